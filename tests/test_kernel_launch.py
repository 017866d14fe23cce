"""The tile-config launch of the Triton launchers (CPU: stand-ins for the kernel, the autotuner
and the compiled kernel)."""

from types import SimpleNamespace

import pytest
import torch
import triton

from hf_stable_attn.kernels import _common
from hf_stable_attn.kernels._common import TiledLaunch, specialization

TABLE = {64: [(128, 64, 8, 3), (64, 64, 4, 3)]}
X = torch.zeros(16)


class _Compiled:
    """Records launches like ``compiled[grid](*all_params)``."""

    def __init__(self):
        self.launches = []

    def __getitem__(self, grid):
        return lambda *args: self.launches.append((grid, args))


class _Kernel:
    """Records launches like ``kernel[grid](*args, **kwargs)`` and returns a compiled kernel."""

    def __init__(self, best=None, params=()):
        self.launches, self.best_config, self.compiled = [], best, _Compiled()
        self.params = [SimpleNamespace(name=n, is_constexpr=c) for n, c in params]

    def __getitem__(self, grid):
        def launch(*args, **kwargs):
            self.launches.append((grid, args, kwargs))
            return self.compiled

        return launch


def test_first_call_per_key_autotunes_then_the_chosen_config_is_launched_directly(monkeypatch):
    monkeypatch.setattr(_common, "AUTOTUNE", True)
    chosen = triton.Config({"BLOCK_M": 64, "BLOCK_N": 32}, num_warps=4, num_stages=2)
    kernel, tuned = _Kernel(), _Kernel(best=chosen)
    launch = TiledLaunch(kernel, TABLE, tuned)
    launch("g", 64, ("key", 1), (X, 2), {"FLAG": True})
    assert len(tuned.launches) == 1 and not kernel.launches
    launch("g", 64, ("key", 1), (X, 4), {"FLAG": True})
    assert len(tuned.launches) == 1
    grid, args, kwargs = kernel.launches[0]
    assert args == (X, 4) and kwargs["FLAG"] is True
    assert (kwargs["BLOCK_M"], kwargs["BLOCK_N"], kwargs["num_warps"], kwargs["num_stages"]) == (64, 32, 4, 2)
    launch("g", 64, ("other key", 1), (X, 6), {"FLAG": False})
    assert len(tuned.launches) == 2


def test_without_autotuning_the_tables_first_entry_is_launched(monkeypatch):
    monkeypatch.setattr(_common, "AUTOTUNE", False)
    monkeypatch.setattr(_common, "INTERPRET", False)
    kernel, tuned = _Kernel(), _Kernel()
    TiledLaunch(kernel, TABLE, tuned)("g", 64, ("key",), (X,), {"FLAG": True})
    assert not tuned.launches
    _, args, kwargs = kernel.launches[0]
    assert args == (X,) and kwargs["FLAG"] is True
    assert (kwargs["BLOCK_M"], kwargs["BLOCK_N"], kwargs["num_warps"], kwargs["num_stages"]) == TABLE[64][0]


def _grid(meta):
    return (128 // meta["BLOCK_M"], 3)


def test_later_launches_with_the_same_specialization_call_the_compiled_kernel(monkeypatch):
    monkeypatch.setattr(_common, "AUTOTUNE", False)
    monkeypatch.setattr(_common, "INTERPRET", False)
    params = [("X", False), ("n", False), ("scale", False), ("FLAG", True), ("BLOCK_M", True),
              ("BLOCK_N", True)]
    kernel = _Kernel(params=params)
    launch = TiledLaunch(kernel, TABLE, _Kernel())
    x = torch.zeros(64)
    launch(_grid, 64, ("key",), (x, 32, 0.5), {"FLAG": True})
    launch(_grid, 64, ("key",), (x, 48, 0.25), {"FLAG": True})  # 48: still divisible by 16
    assert len(kernel.launches) == 1
    assert kernel.compiled.launches == [((1, 3, 1), (x, 48, 0.25, True, 128, 64))]
    launch(_grid, 64, ("key",), (x, 33, 0.25), {"FLAG": True})  # another specialization
    launch(_grid, 64, ("key",), (x[1:], 32, 0.25), {"FLAG": True})  # misaligned pointer
    launch(_grid, 64, ("other",), (x, 32, 0.25), {"FLAG": False})  # another key
    assert len(kernel.launches) == 4 and len(kernel.compiled.launches) == 1


def test_specialization_matches_tritons_criteria():
    x = torch.zeros(64, dtype=torch.bfloat16)
    assert specialization((x, 1, 16, 17, 2**40, 0.5)) == (
        (torch.bfloat16, True), (True, False, True), (False, True, True), (False, False, True),
        (False, True, False), float,
    )
    assert specialization((x[1:],))[0] == (torch.bfloat16, False)


def test_compile_time_parameters_must_come_last():
    with pytest.raises(TypeError, match="must come last"):
        TiledLaunch(_Kernel(params=[("A", True), ("x", False)]), TABLE, _Kernel())

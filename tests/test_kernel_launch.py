"""The tile-config launch of the Triton launchers (CPU: stand-ins for the kernel and the autotuner)."""

import triton

from hf_stable_attn.kernels import _common
from hf_stable_attn.kernels._common import TiledLaunch

TABLE = {64: [(128, 64, 8, 3), (64, 64, 4, 3)]}


class _Kernel:
    """Records launches like ``kernel[grid](*args, **kwargs)``."""

    def __init__(self, best=None):
        self.launches, self.best_config = [], best

    def __getitem__(self, grid):
        return lambda *args, **kwargs: self.launches.append((grid, args, kwargs))


def test_first_call_per_key_autotunes_then_the_chosen_config_is_launched_directly(monkeypatch):
    monkeypatch.setattr(_common, "AUTOTUNE", True)
    chosen = triton.Config({"BLOCK_M": 64, "BLOCK_N": 32}, num_warps=4, num_stages=2)
    kernel, tuned = _Kernel(), _Kernel(best=chosen)
    launch = TiledLaunch(kernel, TABLE, tuned)
    launch("g", 64, ("key", 1), (1, 2), {"FLAG": True})
    assert len(tuned.launches) == 1 and not kernel.launches
    launch("g", 64, ("key", 1), (3, 4), {"FLAG": True})
    assert len(tuned.launches) == 1
    grid, args, kwargs = kernel.launches[0]
    assert args == (3, 4) and kwargs["FLAG"] is True
    assert (kwargs["BLOCK_M"], kwargs["BLOCK_N"], kwargs["num_warps"], kwargs["num_stages"]) == (64, 32, 4, 2)
    launch("g", 64, ("other key", 1), (5, 6), {"FLAG": False})
    assert len(tuned.launches) == 2


def test_without_autotuning_the_tables_first_entry_is_launched(monkeypatch):
    monkeypatch.setattr(_common, "AUTOTUNE", False)
    monkeypatch.setattr(_common, "INTERPRET", False)
    kernel, tuned = _Kernel(), _Kernel()
    TiledLaunch(kernel, TABLE, tuned)("g", 64, ("key",), (1,), {"FLAG": True})
    assert not tuned.launches
    _, args, kwargs = kernel.launches[0]
    assert args == (1,) and kwargs["FLAG"] is True
    assert (kwargs["BLOCK_M"], kwargs["BLOCK_N"], kwargs["num_warps"], kwargs["num_stages"]) == TABLE[64][0]

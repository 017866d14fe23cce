"""The tile-config launch of the Triton launchers and its tuner (CPU: stand-ins for the kernel,
the compiled kernel and the tuner's timing)."""

import functools
import os
import subprocess
import sys
from types import SimpleNamespace

import pytest
import torch
import triton
from triton.runtime.errors import OutOfResources

from hf_stable_attn.kernels import _common, _tuning, flash_bwd
from hf_stable_attn.kernels._common import TiledLaunch, specialization, tile_config

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

    def __init__(self, params=()):
        self.launches, self.compiled = [], _Compiled()
        self.params = [SimpleNamespace(name=n, is_constexpr=c) for n, c in params]
        self.cache_key, self.__name__ = "stand-in source", "stand_in"

    def __getitem__(self, grid):
        def launch(*args, **kwargs):
            self.launches.append((grid, args, kwargs))
            return self.compiled

        return launch


def _fake_timings(monkeypatch, ms):
    """Make ``_tuning.bench_median`` report ``ms[config]`` for a launch of ``config`` (a
    ``functools.partial`` whose last argument is the config, as the launcher's
    ``partial(launch, grid, key, args, flags, config)``) and record, in order, what it timed;
    the device name is a stand-in (no GPU here)."""
    timed = []

    def bench(fn):
        timed.append(fn.args[-1])
        return ms[fn.args[-1]]

    monkeypatch.setattr(_tuning, "bench_median", bench)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "stand-in GPU")
    return timed


def test_first_call_per_key_tunes_then_the_pick_is_launched_directly(monkeypatch):
    monkeypatch.setattr(_common, "AUTOTUNE", True)
    monkeypatch.setattr(_common, "AUTOTUNE_CACHE", False)
    monkeypatch.setattr(_common, "INTERPRET", False)
    slow, fast = (tile_config(c) for c in TABLE[64])
    timed = _fake_timings(monkeypatch, {slow: 2.0, fast: 1.0})
    kernel = _Kernel()
    launch = TiledLaunch(kernel, TABLE)
    launch(_grid, 64, ("key", 1), (X, 2), {"FLAG": True})
    assert len(timed) == 2 * _tuning.ROUNDS and launch.chosen[("key", 1)] == fast
    assert launch.timings[("key", 1)] == {slow: 2.0, fast: 1.0}
    assert launch.picked_by[("key", 1)] == "timed"
    # one compiling launch per candidate, then the call itself with the pick (compiled already)
    assert [kw["BLOCK_M"] for _, _, kw in kernel.launches] == [128, 64]
    assert len(kernel.compiled.launches) == 1
    launch(_grid, 64, ("key", 1), (X, 4), {"FLAG": True})
    assert len(timed) == 2 * _tuning.ROUNDS and len(kernel.launches) == 2
    launch(_grid, 64, ("other key", 1), (X, 6), {"FLAG": False})
    assert len(timed) == 4 * _tuning.ROUNDS


def test_a_pick_saved_on_disk_is_launched_without_timing(monkeypatch, tmp_path):
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(_common, "AUTOTUNE", True)
    monkeypatch.setattr(_common, "AUTOTUNE_CACHE", True)
    monkeypatch.setattr(_common, "INTERPRET", False)
    slow, fast = (tile_config(c) for c in TABLE[64])
    timed = _fake_timings(monkeypatch, {slow: 1.0, fast: 3.0, tile_config((32, 64, 4, 2)): 2.0})
    first = TiledLaunch(_Kernel(), TABLE)
    first(_grid, 64, ("key",), (X,), {"FLAG": True})
    assert first.chosen[("key",)] == slow and len(timed) == 2 * _tuning.ROUNDS
    again = TiledLaunch(_Kernel(), TABLE)  # a later process
    again(_grid, 64, ("key",), (X,), {"FLAG": True})
    assert again.chosen[("key",)] == slow and not again.timings
    assert again.picked_by[("key",)] == "disk cache"
    assert len(timed) == 2 * _tuning.ROUNDS
    other = TiledLaunch(_Kernel(), {64: [*TABLE[64], (32, 64, 4, 2)]})  # other candidates
    other(_grid, 64, ("key",), (X,), {"FLAG": True})
    assert len(timed) == 5 * _tuning.ROUNDS and other.chosen[("key",)] == slow
    single = TiledLaunch(_Kernel(), {64: TABLE[64][:1]})
    single(_grid, 64, ("key",), (X,), {"FLAG": True})
    assert single.picked_by[("key",)] == "one candidate" and len(timed) == 5 * _tuning.ROUNDS


def test_without_autotuning_the_tables_first_entry_is_launched(monkeypatch):
    monkeypatch.setattr(_common, "AUTOTUNE", False)
    monkeypatch.setattr(_common, "INTERPRET", False)
    kernel = _Kernel()
    TiledLaunch(kernel, TABLE)(_grid, 64, ("key",), (X,), {"FLAG": True})
    _, args, kwargs = kernel.launches[0]
    assert args == (X,) and kwargs["FLAG"] is True
    assert (kwargs["BLOCK_M"], kwargs["BLOCK_N"], kwargs["num_warps"], kwargs["num_stages"]) == TABLE[64][0]


def _grid(meta):
    return (128 // meta["BLOCK_M"], 3)


@pytest.mark.parametrize("autotune", [False, True], ids=["table", "tuned"])
def test_a_head_dims_variant_kernel_launches_in_its_place(monkeypatch, tmp_path, autotune):
    """``variants``: head dim 256 launches (and is tuned and its pick saved with) its own kernel,
    head dim 64 the launcher's."""
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(_common, "AUTOTUNE", autotune)
    monkeypatch.setattr(_common, "INTERPRET", False)
    table = {64: TABLE[64], 256: [(64, 64, 8, 2), (32, 64, 8, 3)]}
    _fake_timings(monkeypatch, {tile_config(c): 1.0 + i for d in table
                                for i, c in enumerate(table[d])})
    kernel, variant = _Kernel(), _Kernel()
    variant.do_not_specialize = ["seed", "group"]
    launch = TiledLaunch(kernel, table, variants={256: variant})
    launch(_grid, 256, ("key", 256), (X,), {"FLAG": True})
    assert kernel.launches == [] and len(variant.launches) == (2 if autotune else 1)
    launch(_grid, 64, ("key", 64), (X,), {"FLAG": True})
    assert len(kernel.launches) == (2 if autotune else 1)
    assert len(variant.launches) == (2 if autotune else 1)
    assert launch.kernel_for(256) is variant and launch.kernel_for(64) is kernel


def test_a_saved_pick_belongs_to_the_arguments_the_kernel_specializes_on(monkeypatch, tmp_path):
    """A kernel compiled without specializing some ints (``runtime_ints_jit``) has the same
    source as the one that does, but its picks are its own."""
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path))
    specialized, runtime_ints = _Kernel(), _Kernel()
    runtime_ints.do_not_specialize = ["seed", "group"]
    configs = [tile_config(c) for c in TABLE[64]]
    files = {_tuning._cache_file(k, ("key",), configs, "GPU")[0].cache_dir
             for k in (specialized, runtime_ints)}
    assert len(files) == 2


def test_the_d256_dkdv_launches_a_kernel_not_specialized_on_the_group():
    """Head dim 256's dK/dV compiles ``group`` and ``splits`` as runtime ints (v43b); the other
    head dims keep Triton's specialization of ints equal to 1."""
    from hf_stable_attn.kernels import flash_bwd

    launch = flash_bwd._dkdv_launch
    assert {"group", "splits"} <= set(launch.kernel_for(256).do_not_specialize)
    for head_dim in (16, 32, 64, 128):
        assert launch.kernel_for(head_dim) is flash_bwd._dkdv_kernel
        assert "group" not in launch.kernel_for(head_dim).do_not_specialize
    assert launch.kernel_for(256).fn is flash_bwd._dkdv_kernel.fn


def test_later_launches_with_the_same_specialization_call_the_compiled_kernel(monkeypatch):
    monkeypatch.setattr(_common, "AUTOTUNE", False)
    monkeypatch.setattr(_common, "INTERPRET", False)
    params = [("X", False), ("n", False), ("scale", False), ("FLAG", True), ("BLOCK_M", True),
              ("BLOCK_N", True)]
    kernel = _Kernel(params=params)
    launch = TiledLaunch(kernel, TABLE)
    x = torch.zeros(64)
    launch(_grid, 64, ("key",), (x, 32, 0.5), {"FLAG": True})
    launch(_grid, 64, ("key",), (x, 48, 0.25), {"FLAG": True})  # 48: still divisible by 16
    assert len(kernel.launches) == 1
    assert kernel.compiled.launches == [((1, 3, 1), (x, 48, 0.25, True, 128, 64))]
    launch(_grid, 64, ("key",), (x, 33, 0.25), {"FLAG": True})  # another specialization
    launch(_grid, 64, ("key",), (x[1:], 32, 0.25), {"FLAG": True})  # misaligned pointer
    launch(_grid, 64, ("other",), (x, 32, 0.25), {"FLAG": False})  # another key
    assert len(kernel.launches) == 4 and len(kernel.compiled.launches) == 1
    launch.table = {64: [(64, 64, 4, 3)]}  # another tile config (as benchmarks/tune_kernel.py does)
    launch(_grid, 64, ("key",), (x, 32, 0.5), {"FLAG": True})
    assert len(kernel.launches) == 5 and kernel.launches[-1][2]["BLOCK_M"] == 64


def test_specialization_matches_tritons_criteria():
    x = torch.zeros(64, dtype=torch.bfloat16)
    assert specialization((x, 1, 16, 17, 2**40, 0.5)) == (
        (torch.bfloat16, True), (True, False, True), (False, True, True), (False, False, True),
        (False, True, False), float,
    )
    assert specialization((x[1:],))[0] == (torch.bfloat16, False)
    rows = torch.zeros(1, 64, 2, 64, dtype=torch.bfloat16)
    assert specialization((_common.row_descriptor(rows, 32, 64),)) == (
        (torch.bfloat16, (1, 32, 1, 64)),)  # a TMA descriptor: its dtype and box


def test_compile_time_parameters_must_come_last():
    with pytest.raises(TypeError, match="must come last"):
        TiledLaunch(_Kernel(params=[("A", True), ("x", False)]), TABLE)


def test_without_tma_the_first_pointer_entry_is_launched(monkeypatch):
    monkeypatch.setattr(_common, "AUTOTUNE", False)
    monkeypatch.setattr(_common, "INTERPRET", False)
    table = {64: [(64, 128, 4, 3, True), (128, 64, 8, 3)]}
    for tma_ok, expected in ((True, (64, 128, True)), (False, (128, 64, False))):
        kernel = _Kernel()
        TiledLaunch(kernel, table)(_grid, 64, ("key", tma_ok), (X,), {}, tma_ok)
        _, _, kwargs = kernel.launches[0]
        assert (kwargs["BLOCK_M"], kwargs["BLOCK_N"], kwargs["USE_TMA"]) == expected


def test_a_register_cap_compiles_apart_and_reaches_the_compiler(monkeypatch):
    """An entry's sixth field is Triton's ``maxnreg`` option; capped and uncapped entries of the
    same tiles are two candidates, each compiled once."""
    monkeypatch.setattr(_common, "AUTOTUNE", False)
    monkeypatch.setattr(_common, "INTERPRET", False)
    capped, free = tile_config((64, 64, 4, 2, False, 96)), tile_config((64, 64, 4, 2))
    assert capped[:5] == free[:5] and (capped[5], free[5]) == (96, None) and capped != free
    kernel = _Kernel()
    launch = TiledLaunch(kernel, {64: [capped, free]})
    for config in (capped, free, capped):
        launch.launch(_grid, ("key",), (X,), {}, config, 64)
    assert [kwargs.get("maxnreg") for _, _, kwargs in kernel.launches] == [96, None]
    assert len(kernel.compiled.launches) == 1  # the second capped launch: compiled before


def test_tuning_skips_tma_configs_where_tma_cannot_address_the_tensors(monkeypatch):
    monkeypatch.setattr(_tuning, "two_stage_tma_ok", lambda: True)
    entries = [tile_config(c) for c in [(64, 128, 4, 3, True), (128, 64, 8, 3)]]
    assert _tuning.candidates(entries, tma_ok=True) == entries
    assert _tuning.candidates(entries, tma_ok=False) == entries[1:]


def _launcher(launched, fails=()):
    """``time_rounds``' launcher: ``functools.partial(run, config)`` (so ``_fake_timings`` reads
    the config as ``fn.args[-1]``, as for the launcher's own), recording each run in
    ``launched`` and raising as a config that does not fit for those in ``fails``."""
    def run(config):
        launched.append(config)
        if config in fails:
            raise OutOfResources(232448, 262144, "shared memory")

    return lambda config: functools.partial(run, config)


def test_time_rounds_rotates_the_order_and_keeps_each_configs_median(monkeypatch):
    a, b, c = (64, 64, 4, 3, False), (128, 64, 8, 3, False), (64, 64, 4, 2, True)
    order = _fake_timings(monkeypatch, {a: 2.0, b: 1.0, c: 3.0})
    launched = []
    ms = _tuning.time_rounds([a, b, c], _launcher(launched), rounds=4)
    assert ms == {a: 2.0, b: 1.0, c: 3.0}
    assert launched == [a, b, c]  # one compiling launch each; bench_median runs the rest
    assert order == [a, b, c, b, c, a, c, a, b, a, b, c]


def test_time_rounds_takes_the_median_over_rounds(monkeypatch):
    a, b = (64, 64, 4, 3, False), (128, 64, 8, 3, False)
    samples = {a: iter([1.0, 9.0, 1.2]), b: iter([1.1, 1.1, 1.1])}
    monkeypatch.setattr(_tuning, "bench_median", lambda fn: next(samples[fn.args[-1]]))
    ms = _tuning.time_rounds([a, b], _launcher([]), rounds=3)
    assert ms == {a: 1.2, b: 1.1}  # one slow sample (a clock dip) does not decide


def test_time_rounds_leaves_out_configs_that_do_not_fit(monkeypatch):
    a, b = (64, 64, 4, 3, False), (128, 128, 8, 3, False)
    _fake_timings(monkeypatch, {a: 2.0, b: 1.0})
    assert _tuning.time_rounds([a, b], _launcher([], fails={b}), rounds=2) == {a: 2.0}
    with pytest.raises(OutOfResources):
        _tuning.time_rounds([a, b], _launcher([], fails={a, b}), rounds=2)


class _SmallGpuKernel(_Kernel):
    """A ``_Kernel`` whose compiling launch raises as a config that does not fit does (Triton
    raises ``OutOfResources`` when it loads a kernel needing more shared memory than the GPU
    gives a block) for ``BLOCK_M`` in ``too_big``."""

    def __init__(self, too_big):
        super().__init__()
        self.too_big = too_big

    def __getitem__(self, grid):
        def launch(*args, **kwargs):
            if kwargs["BLOCK_M"] in self.too_big:
                raise OutOfResources(232448, 101376, "shared memory")
            self.launches.append((grid, args, kwargs))
            return self.compiled

        return launch


@pytest.mark.parametrize("autotune", [False, True], ids=["table", "tuned"])
def test_configs_that_do_not_fit_the_gpu_are_passed_over(monkeypatch, autotune):
    """A GPU with less shared memory per block than a Hopper: the table's entries it cannot hold
    are passed over (and with autotuning off not tried again); where none fits, an error that
    names the kernel, the head dim and what to use instead."""
    monkeypatch.setattr(_common, "AUTOTUNE", autotune)
    monkeypatch.setattr(_common, "AUTOTUNE_CACHE", False)
    monkeypatch.setattr(_common, "INTERPRET", False)
    _fake_timings(monkeypatch, {tile_config(c): 1.0 for c in TABLE[64]})
    kernel = _SmallGpuKernel(too_big={128})
    launch = TiledLaunch(kernel, TABLE)
    for _ in range(2):
        launch(_grid, 64, ("key",), (X,), {})
        assert launch.last == tile_config(TABLE[64][1])
    assert [kw["BLOCK_M"] for _, _, kw in kernel.launches] == [64]
    if not autotune:
        assert launch.unfit == {(tile_config(TABLE[64][0]), 64, X.device)}
    with pytest.raises(_tuning.NoConfigFits, match="stand_in at \\(padded\\) head dim 64 "
                       ".*attn_implementation=\"sdpa\"") as info:
        TiledLaunch(_SmallGpuKernel(too_big={64, 128}), TABLE)(_grid, 64, ("key",), (X,), {})
    assert isinstance(info.value.__cause__, OutOfResources)


@pytest.mark.parametrize("setting, expected", [(None, True), ("1", True), ("0", False)])
def test_tma_is_on_unless_the_environment_turns_it_off(setting, expected):
    env = {k: v for k, v in os.environ.items() if k != "HF_STABLE_ATTN_TMA"}
    if setting is not None:
        env["HF_STABLE_ATTN_TMA"] = setting
    code = "from hf_stable_attn.kernels import _common; print(_common.TMA)"
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          timeout=120)
    assert proc.stdout.strip() == str(expected), proc.stderr[-2000:]


def test_tma_needs_a_gpu_with_tma_long_sequences_aligned_strides_not_the_interpreter(
        monkeypatch):
    """From ``TMA_MIN_SEQLEN`` rows, or ``TMA_MIN_SEQLEN_UNMASKED`` for calls that are not
    windowed (no causal mask, no window), on a GPU with TMA (here: a stand-in answer)."""
    x = torch.zeros(2, 16, 4, 64, dtype=torch.bfloat16)
    long = _common.TMA_MIN_SEQLEN
    monkeypatch.setattr(_common, "INTERPRET", False)
    monkeypatch.setattr(_common, "TMA", False)
    assert not _common.tma_ready(long, x)
    monkeypatch.setattr(_common, "TMA", True)
    monkeypatch.setattr(_common, "INTERPRET", True)
    assert not _common.tma_ready(long, x)
    monkeypatch.setattr(_common, "INTERPRET", False)
    monkeypatch.setattr(_common.triton, "set_allocator", lambda alloc: None)
    assert not _common.tma_ready(long, x)  # a CPU tensor: no TMA
    gpu_has_tma = [False]
    monkeypatch.setattr(_common, "has_tma", lambda device: gpu_has_tma[0])
    assert not _common.tma_ready(long, x)
    gpu_has_tma[0] = True
    assert _common.tma_ready(long, x, x.transpose(1, 2))
    assert not _common.tma_ready(long - 1, x)
    unmasked = _common.TMA_MIN_SEQLEN_UNMASKED  # calls with no causal mask and no window
    assert unmasked < long
    assert _common.tma_ready(unmasked, x, windowed=False)
    assert not _common.tma_ready(unmasked - 1, x, windowed=False)
    assert not _common.tma_ready(unmasked, x)
    assert not _common.tma_ready(long, torch.zeros(2, 16, 3, 40, dtype=torch.bfloat16)[..., :36])
    assert not _common.tma_ready(long, torch.zeros(2, 16, 3, 111, dtype=torch.bfloat16))
    assert not _common.tma_ready(long, x[:, :, :1].expand(x.shape))  # heads broadcast: stride 0


@pytest.mark.parametrize("capability, expected", [((8, 0), False), ((8, 9), False),
                                                    ((9, 0), True), ((10, 0), True),
                                                    ((12, 0), True)])
def test_tma_from_compute_capability_9(monkeypatch, capability, expected):
    """Hopper and later have TMA (A100, L4, RTX 4090 do not); a CPU device never, nor an AMD GPU
    under ROCm, whatever capability ROCm reports."""
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: capability)
    _common.has_tma.cache_clear()
    try:
        assert _common.has_tma(torch.device("cuda", 0)) == expected
        assert not _common.has_tma(torch.device("cpu"))
        monkeypatch.setattr(torch.version, "hip", "6.4")
        _common.has_tma.cache_clear()
        assert not _common.has_tma(torch.device("cuda", 0))
    finally:
        _common.has_tma.cache_clear()


@pytest.mark.parametrize("programs, group, sms, expected", [
    (4096, 1, 132, 1),  # MHA: never split
    (2048, 4, 132, 1),  # enough programs already
    (1024, 4, 132, 2),  # Llama ~1B (8 KV heads, 4:1) at 2 x 4096 tokens
    (512, 8, 132, 4),   # 2 KV heads, 8:1: four times the programs reach 8 per SM
    (16, 4, 132, 4),    # nothing reaches the target: one query head per program
    (10, 6, 10, 6),     # no divisor of 6 reaches 80 programs (6 gives 60): the whole group
    (30, 6, 10, 3),     # 2 gives 60, 3 gives 90 (divisors of the group only)
])
def test_dkdv_group_split_is_the_smallest_divisor_that_fills_the_gpu(programs, group, sms,
                                                                     expected):
    from hf_stable_attn.kernels import flash_bwd

    assert flash_bwd.PROGRAMS_PER_SM == 8
    assert flash_bwd.group_splits(programs, group, sms) == expected


def test_host_arithmetic_matches_triton():
    """The launchers' own ``ceil_div`` and ``next_power_of_2`` (cheaper than Triton's wrapped
    constexpr functions) give Triton's values, hence the same grids, tiles and autotune keys."""
    for n in [*range(1, 300), 511, 512, 513, 4095, 4096, 4097, 8191, 65537, 2**31 - 1]:
        assert _common.next_power_of_2(n) == triton.next_power_of_2(n), n
        for block in (16, 32, 64, 128):
            assert _common.ceil_div(n, block) == triton.cdiv(n, block), (n, block)
    assert [_common.block_d(d) for d in (8, 16, 40, 64, 111, 128, 160, 256)] == \
        [16, 16, 64, 64, 128, 128, 256, 256]
    assert [_common.seq_bucket(s) for s in (0, 1, 1000, 1024, 1025, 8192, 100000)] == \
        [1, 1, 1024, 1024, 2048, 8192, 8192]


def test_launch_kwargs_name_the_launchers_keywords():
    """``testing.launch_kwargs`` / ``fix_kwargs`` (used by the GPU tests, benchmarks and scripts)
    stay in step with the launchers' keyword-only parameters."""
    import inspect

    from hf_stable_attn.kernels import flash_attn_bwd, flash_attn_fwd
    from hf_stable_attn.shift_rule import shift_params
    from hf_stable_attn.testing import fix_kwargs, launch_kwargs

    def keywords(fn, optional=()):
        params = inspect.signature(fn).parameters.values()
        return {p.name for p in params if p.kind is p.KEYWORD_ONLY} - set(optional)

    masking = launch_kwargs(100, 120, 64, causal=True)
    fix = fix_kwargs(shift_params(torch.bfloat16, beta=4.0))
    assert set(masking) | set(fix) == keywords(flash_attn_fwd, ("shift_single", "return_shift", "sinks"))
    assert set(masking) == keywords(flash_attn_bwd, ("deterministic", "p_dp_out"))
    assert (masking["max_seqlen_q"], masking["max_seqlen_k"], masking["causal"]) == (100, 120, True)
    assert masking["softmax_scale"] == 64**-0.5 and fix["beta"] == 4.0
    with pytest.raises(TypeError, match="unknown launcher keyword"):
        launch_kwargs(100, 120, 64, casual=True)


class _CudaTensor:
    """Stand-in for a CUDA tensor on device ``index`` (the launcher reads only ``.device``)."""

    def __init__(self, index):
        self.device = torch.device("cuda", index)


def _stand_in_devices(monkeypatch):
    """``torch.cuda.current_device`` / ``torch.cuda.device`` stand-ins over one current index;
    returns (the current index, a list of the indices ``torch.cuda.device`` was entered with)."""
    current, entered = [0], []

    class _Device:
        def __init__(self, index):
            self.index = index

        def __enter__(self):
            entered.append(self.index)
            self.previous, current[0] = current[0], self.index

        def __exit__(self, *exc):
            current[0] = self.previous

    monkeypatch.setattr(torch.cuda, "current_device", lambda: current[0])
    monkeypatch.setattr(torch.cuda, "device", _Device)
    return current, entered


def test_launches_run_on_the_device_of_their_first_tensor(monkeypatch):
    """A model spread over GPUs calls with tensors on a device that is not the current one;
    Triton launches on the current device, so the launcher switches to the tensors' for the call
    (compiling, tuned and compiled launches alike) and back."""
    monkeypatch.setattr(_common, "AUTOTUNE", False)
    monkeypatch.setattr(_common, "INTERPRET", False)
    current, entered = _stand_in_devices(monkeypatch)
    at_launch = []

    class _Kernel:
        params = []

        def __getitem__(self, grid):
            def launch(*args, **kwargs):
                at_launch.append(current[0])
                return {(1, 3, 1): lambda *a: at_launch.append(current[0])}

            return launch

    launch = TiledLaunch(_Kernel(), TABLE)
    launch(_grid, 64, ("key",), (_CudaTensor(1), 32), {})  # compiles
    launch(_grid, 64, ("key",), (_CudaTensor(1), 32), {})  # the compiled kernel
    assert at_launch == [1, 1] and current == [0] and entered == [1, 1]
    launch(_grid, 64, ("key",), (_CudaTensor(0), 32), {})  # already current: no switch
    assert at_launch == [1, 1, 0] and entered == [1, 1]


def test_cpu_tensors_need_no_device(monkeypatch):
    monkeypatch.setattr(torch.cuda, "current_device", lambda: pytest.fail("no CUDA device here"))
    with _common.on_device_of(X):
        pass


@pytest.mark.parametrize("varlen", [False, True], ids=["dense", "packed"])
def test_tma_configs_in_the_dense_layout_launch_with_descriptors_of_the_streamed_tensors(
        monkeypatch, varlen):
    """A TMA config reads the dense layout's K (here) through a descriptor the launcher makes
    per config, box (1, BLOCK_N, 1, BLOCK_D) over the whole (B, S, H, D) tensor with its
    strides; packed sequences and pointer configs get the tensor itself."""
    monkeypatch.setattr(_common, "AUTOTUNE", False)
    monkeypatch.setattr(_common, "INTERPRET", False)
    k = torch.zeros(2, 3, 40, 48, dtype=torch.bfloat16).transpose(1, 2)  # heads apart, D < 64
    table = {64: [(64, 32, 4, 3, True), (128, 16, 8, 3)]}
    kernel = _Kernel(params=[("Q", False), ("K", False), ("n", False), ("IS_VARLEN", True)])
    launch = TiledLaunch(kernel, table, descriptors={"K": "BLOCK_N"})
    flags = {"IS_VARLEN": varlen, "BLOCK_D": 64}
    for tma_ok in (True, False):
        launch(_grid, 64, ("key", tma_ok), (X, k, 3), flags, tma_ok)
    (_, with_tma, _), (_, without, _) = kernel.launches
    assert with_tma[0] is X and without[1] is k
    if varlen:
        assert with_tma[1] is k
    else:
        desc = with_tma[1]
        assert desc.base is k and desc.block_shape == [1, 32, 1, 64]
        assert (desc.shape, desc.strides) == (list(k.shape), list(k.stride()))


def test_launch_compiled_goes_through_the_jit_once_per_specialization(monkeypatch):
    """``launch_compiled`` (the Gluon kernels' launches): the first call per specialization and
    compile-time arguments compiles; later ones run the compiled kernel with the compile-time
    values in the kernel's parameter order (options that are parameters included)."""
    monkeypatch.setattr(_common, "_COMPILED", {})
    kernel = _Kernel(params=[("X", False), ("n", False), ("A", True), ("num_warps", True),
                             ("B", True)])
    for n, a in ((32, 1), (48, 1), (32, 2), (1, 1), (48, 1)):
        _common.launch_compiled(kernel, (3,), (X, n), dict(A=a, B=True), num_warps=4)
    # 32 and 48 specialize alike (both divisible by 16), 1 does not; A=2 is another compile
    assert [(args, kwargs) for _, args, kwargs in kernel.launches] == [
        ((X, 32), dict(A=1, B=True, num_warps=4)), ((X, 32), dict(A=2, B=True, num_warps=4)),
        ((X, 1), dict(A=1, B=True, num_warps=4))]
    assert kernel.compiled.launches == [((3, 1, 1), (X, 48, 1, 4, True))] * 2


@pytest.mark.parametrize("seqlen, varlen, tma_ok, offset, expected", [
    (256, False, True, 0, True), (254, False, True, 0, False), (256, True, True, 0, False),
    (256, False, False, 0, False), (256, False, True, 1, False),
], ids=["dense", "s-not-4-divisible", "packed", "no-tma", "misaligned"])
def test_the_dkdv_reads_lse_through_descriptors_only_where_tma_can_address_it(
        monkeypatch, seqlen, varlen, tma_ok, offset, expected):
    """``flash_bwd.vector_tma_ok``: lse (B, H, S) with 16-byte strides (S % 4 == 0) and base,
    in the dense layout that TMA configs read (``tma_ok``), and only under ``_VECTOR_TMA``."""
    lse = torch.zeros(4 * seqlen + 1)[offset:offset + 4 * seqlen].view(2, 2, seqlen)
    monkeypatch.setattr(flash_bwd, "_VECTOR_TMA", True)
    assert flash_bwd.vector_tma_ok(lse, varlen, tma_ok) == expected
    monkeypatch.setattr(flash_bwd, "_VECTOR_TMA", False)
    assert not flash_bwd.vector_tma_ok(lse, varlen, tma_ok)

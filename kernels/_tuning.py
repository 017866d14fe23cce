"""Choosing a launch's tile config: the candidates timed in interleaved rounds, the pick kept on
disk.

Each candidate runs once per round, in an order that rotates from round to round, and the lowest
median over the rounds wins. Triton's autotuner, which picked up to v15, times its configs one
after another, once each; on an H100 its picks changed from one fresh process to the next (the
same in 16 of 24 shape-kernel pairs), ours far less often (the same in 22 of 24). Against the
whole call timed after minutes of work, both cost about 1% on average and a few percent on some
pairs (docs/kernel_notes.md, v16a). The picks go to Triton's cache directory, keyed by Triton,
the kernel's source and the arguments it is not specialized on, the GPU, the ptxas, the launch
key and the candidates, so later processes reuse them.
"""

from __future__ import annotations

import hashlib
import json
import statistics
from typing import Callable

import torch
from triton.compiler.errors import CompileTimeAssertionFailure
from triton.runtime.cache import get_cache_manager, triton_key
from triton.runtime.errors import OutOfResources, PTXASError
from triton.testing import do_bench

from ._ptxas import compiling_ptxas, release, two_stage_tma_ok

ROUNDS = 5
# Per candidate and round: triton.testing.do_bench's warm-up and measuring time (ms), L2 flushed
# before every run.
WARMUP_MS, REP_MS = 5, 25
# What a config that does not fit raises on its first launch (Triton's autotuner skips the same).
DOES_NOT_FIT = (OutOfResources, PTXASError, CompileTimeAssertionFailure)

Config = tuple  # (BLOCK_M, BLOCK_N, num_warps, num_stages, use_tma, maxnreg): _common.tile_config


class NoConfigFits(RuntimeError):
    """No tile config of a kernel's table fits the GPU, which has less shared memory per block
    than the configs need at this head dim (the tables were chosen on Hopper GPUs, 227 KiB)."""

    def __init__(self, kernel, block_d: int, device):
        name = getattr(kernel, "__name__", str(kernel))
        super().__init__(
            f"No tile config of the Triton kernel {name} at (padded) head dim {block_d} fits "
            f"{_describe(device)}: every config of its table failed to compile or load there "
            "(more shared memory per block or more registers than the GPU gives one; the "
            "chained error says which; the tables were chosen on Hopper GPUs, with 227 KiB of "
            "shared memory per block). Use attn_implementation=\"sdpa\" for this model "
            "on this GPU, or a GPU with more shared memory per block (A100, H100, H200, B200).")


def _describe(device) -> str:
    """The GPU's name, compute capability and shared memory per block, as far as CUDA tells."""
    if getattr(device, "type", None) != "cuda" or not torch.cuda.is_available():
        return f"this device ({device})"
    props = torch.cuda.get_device_properties(device)
    shared = getattr(props, "shared_memory_per_block_optin", None)
    return (f"{props.name} (compute capability {props.major}.{props.minor}"
            + (f", {shared // 1024} KiB of shared memory per block)" if shared else ")"))


def candidates(entries: list[Config], tma_ok: bool) -> list[Config]:
    """The table ``entries`` (``tile_config`` tuples) a launch may try: TMA ones only where
    ``tma_ok``, and 2-stage TMA ones only where the ptxas in use builds them (``_ptxas``)."""
    min_tma_stages = 2 if tma_ok and two_stage_tma_ok() else 3
    return [c for c in entries if not c[4] or (tma_ok and c[3] >= min_tma_stages)]


def bench_median(fn: Callable[[], object]) -> float:
    """Median ms of ``fn`` (``triton.testing.do_bench``, L2 flushed between runs)."""
    return do_bench(fn, warmup=WARMUP_MS, rep=REP_MS, return_mode="median")


def time_rounds(configs: list[Config], launcher: Callable[[Config], Callable[[], object]],
                rounds: int = ROUNDS) -> dict[Config, float]:
    """Median over ``rounds`` of ``bench_median(launcher(config))`` per config; round ``r``
    starts at the ``r``-th config. Each config is launched once first (that compiles it); those
    that do not fit are left out, and if none fits the last error is raised."""
    runs, error = {}, None
    for config in configs:
        fn = launcher(config)
        try:
            fn()
        except DOES_NOT_FIT as exc:
            error = exc
            continue
        runs[config] = fn
    if not runs:
        raise error
    order = list(runs)
    times = {config: [] for config in order}
    for r in range(rounds):
        for config in order[r % len(order):] + order[:r % len(order)]:
            times[config].append(bench_median(runs[config]))
    return {config: statistics.median(ms) for config, ms in times.items()}


def _cache_file(kernel, key: tuple, configs: list[Config], device_name: str):
    """(cache manager, file name) of the pick for ``key`` among ``configs``."""
    parts = [triton_key(), kernel.cache_key, repr(getattr(kernel, "do_not_specialize", [])),
             device_name, str(release(compiling_ptxas())),
             repr(key), repr(configs), f"rounds={ROUNDS},{WARMUP_MS},{REP_MS}"]
    digest = hashlib.sha256("-".join(parts).encode()).hexdigest()
    return get_cache_manager(digest), f"{kernel.__name__[:150]}.tiles.json"


def load_pick(kernel, key: tuple, configs: list[Config], device_name: str) -> Config | None:
    """The pick an earlier process saved for this launch, if any."""
    cache, name = _cache_file(kernel, key, configs, device_name)
    path = cache.get_file(name)
    if path is None:
        return None
    with open(path) as f:
        return tuple(json.load(f)["pick"])


def save_pick(kernel, key: tuple, configs: list[Config], device_name: str,
              timings: dict[Config, float]) -> Config:
    """The fastest of ``timings``, written where ``load_pick`` finds it."""
    pick = min(timings, key=timings.get)
    cache, name = _cache_file(kernel, key, configs, device_name)
    record = {"key": repr(key), "pick": list(pick),
              "ms": [[list(c), ms] for c, ms in timings.items()]}
    cache.put(json.dumps(record), name, binary=False)
    return pick

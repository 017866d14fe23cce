"""Timing, peak memory and the time budget, shared by the benchmarks.

On CUDA the steady-state time is ``triton.testing.do_bench``'s median: CUDA events around each
call, the L2 cache flushed before each call (so repeated runs never measure a warm cache), its own
warm-up on top of ours. On the CPU (smoke tests only) it is the median of ``perf_counter`` laps.
The first call of every timed function is measured apart (``first_call``): it holds Triton
autotuning, ``torch.compile`` and cuDNN plan building, which must never leak into the median.
"""

from __future__ import annotations

import functools
import statistics
import time
from typing import Callable, Sequence, TypeVar

import torch

T = TypeVar("T")


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def clear_grads(tensors: Sequence[torch.Tensor] | None) -> None:
    """Set ``.grad`` of each of ``tensors`` (if any) to None."""
    for t in tensors or ():
        t.grad = None


def first_call(fn: Callable[[], T], device: torch.device) -> tuple[float, T]:
    """``(wall seconds, result)`` of one synchronized call: the warm-up that compiles and autotunes."""
    synchronize(device)
    start = time.perf_counter()
    result = fn()
    synchronize(device)
    return time.perf_counter() - start, result


def median_ms(
    fn: Callable[[], object],
    device: torch.device,
    *,
    grad_to_none: Sequence[torch.Tensor] | None = None,
    warmup_ms: float = 25.0,
    rep_ms: float = 100.0,
    cpu_reps: int = 3,
) -> float:
    """Median milliseconds per call of ``fn`` once warm; ``grad_to_none`` reset before each call."""
    if device.type == "cuda":
        import triton.testing

        return float(
            triton.testing.do_bench(
                fn, warmup=warmup_ms, rep=rep_ms, grad_to_none=grad_to_none, return_mode="median"
            )
        )
    laps = []
    for _ in range(cpu_reps):
        clear_grads(grad_to_none)
        start = time.perf_counter()
        fn()
        laps.append(time.perf_counter() - start)
    return 1e3 * statistics.median(laps)


def sustained_ms(
    fn: Callable[[], object],
    device: torch.device,
    seconds: float,
    *,
    grad_to_none: Sequence[torch.Tensor] | None = None,
) -> float:
    """Milliseconds per call of ``fn`` called back to back for ``seconds`` of host time, no L2
    flush and no pause between calls (CUDA events around the whole run on CUDA): the card's
    steady state, where a sustained load holds it at its power limit as training does, while
    ``median_ms``'s flushes and short windows leave it some headroom."""
    n = 0
    if device.type == "cuda":
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
    t0 = time.perf_counter()
    while n == 0 or time.perf_counter() - t0 < seconds:
        clear_grads(grad_to_none)
        fn()
        n += 1
    if device.type != "cuda":
        return 1e3 * (time.perf_counter() - t0) / n
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / n


def rotated_rounds(timers: Sequence[Callable[[], float]], rounds: int) -> list[list[float]]:
    """Each timer's results over ``rounds`` rounds. Every round runs each timer once, starting at
    a different one (round ``r`` at ``r * n // rounds``), so a drift of the GPU's clock, or
    whatever favours a position in the order, spreads over all of them instead of falling on
    the same one each round."""
    laps: list[list[float]] = [[] for _ in timers]
    for r in range(rounds):
        start = r * len(timers) // rounds
        for i in [*range(start, len(timers)), *range(start)]:
            laps[i].append(timers[i]())
    return laps


def interleaved_medians(fns: dict[str, Callable[[], object]], rounds: int, device: torch.device,
                        sustain_s: float = 0.0
                        ) -> tuple[dict[str, float], dict[str, list[float]]]:
    """Warm each of ``fns`` with one call, then time them in ``rotated_rounds`` (``median_ms``
    each, or with ``sustain_s`` > 0 ``sustained_ms`` for that many seconds): ``(median ms over
    the rounds, every round's ms)``, both by name."""
    for fn in fns.values():
        fn()
    if sustain_s > 0:
        time_one = functools.partial(sustained_ms, device=device, seconds=sustain_s)
    else:
        time_one = functools.partial(median_ms, device=device)
    laps = rotated_rounds([functools.partial(time_one, fn) for fn in fns.values()], rounds)
    return ({name: statistics.median(ms) for name, ms in zip(fns, laps)}, dict(zip(fns, laps)))


def peak_extra_mb(
    fn: Callable[[], object],
    device: torch.device,
    *,
    grad_to_none: Sequence[torch.Tensor] | None = None,
) -> float | None:
    """MiB allocated at the peak of one call beyond what was allocated before it (None on CPU).

    That is the call's own footprint: outputs, saved activations, gradients and workspace, not the
    inputs it was given.
    """
    if device.type != "cuda":
        return None
    clear_grads(grad_to_none)
    torch.cuda.synchronize(device)
    before = torch.cuda.memory_allocated(device)
    torch.cuda.reset_peak_memory_stats(device)
    fn()
    torch.cuda.synchronize(device)
    return (torch.cuda.max_memory_allocated(device) - before) / 2**20


class Budget:
    """A wall-clock budget: ``fits(expected_s)`` says whether one more unit of work still fits."""

    def __init__(self, seconds: float | None):
        self.seconds = seconds
        self.start = time.perf_counter()

    def elapsed(self) -> float:
        return time.perf_counter() - self.start

    def fits(self, expected_s: float = 0.0) -> bool:
        return self.seconds is None or self.elapsed() + expected_s <= self.seconds

"""Host time per call, for the scripts in gpu/ that measure launch overhead (GPU only)."""

from __future__ import annotations

import cProfile
import io
import pstats
import time

import torch


def host_us(fn, n: int = 300, warmup: int = 20) -> float:
    """Mean wall-clock microseconds per ``fn()`` over ``n`` calls after ``warmup`` calls, with
    the GPU drained before and after (at shapes too small to keep the GPU busy this is host time)."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(n):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - start) / n * 1e6


def host_profile(fn, n: int = 300, lines: int = 25) -> str:
    """cProfile of ``n`` calls of ``fn`` in this thread (GPU drained at the end), as the
    ``lines`` entries with the most time of their own."""
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(n):
        fn()
    torch.cuda.synchronize()
    prof.disable()
    text = io.StringIO()
    pstats.Stats(prof, stream=text).sort_stats("tottime").print_stats(lines)
    return text.getvalue()

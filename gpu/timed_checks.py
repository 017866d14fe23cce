"""What the Gluon route and kernel checks (``gpu/route_check.py``, ``hopper_bwd_check.py``,
``hopper_fwd_check.py``) share: a variant set's timing record, and the timing loop that stops at
a time budget and keeps its results on disk after every shape, naming the code that ran."""

from __future__ import annotations

import argparse
import json
import time
from typing import Callable, Iterable

import torch

from benchmarks.runinfo import source_digest
from benchmarks.timing import interleaved_medians


def rates(fns: dict[str, Callable[[], object]], rounds: int, device: torch.device,
          flops: float, sustain_s: float = 0.0) -> dict:
    """``interleaved_medians`` of ``fns`` (back to back for ``sustain_s`` seconds a round where
    it is > 0) as a record's ``ms`` (median per name), ``ms_rounds`` and ``tflops`` (``flops``
    per call)."""
    med, ms = interleaved_medians(fns, rounds, device, sustain_s)
    return dict(ms=med, ms_rounds=ms, tflops={n: flops / m / 1e9 for n, m in med.items()})


def save(result: dict, out: str) -> None:
    """``result`` as JSON at ``out``, with ``source``: the ``source_digest`` of the code
    (read once: the loops save after every shape)."""
    if "source" not in result:
        result["source"] = source_digest()
    with open(out, "w") as f:
        json.dump(result, f, indent=1)


def time_within_budget(items: Iterable, measure: Callable[[object], dict], result: dict,
                       out: str, budget_s: float, start: float, shown: tuple[str, ...]) -> None:
    """Append ``measure(item)`` to ``result["timings"]`` for each item until ``budget_s`` seconds
    have passed since ``start`` (then ``result["cut"]`` names the first item left out), printing
    each record's ``shown`` keys and saving ``result`` to ``out`` after each."""
    for item in items:
        if time.time() - start > budget_s:
            result["cut"] = f"budget reached before {item}"
            break
        record = measure(item)
        result["timings"].append(record)
        print(json.dumps({k: record[k] for k in shown}), flush=True)
        save(result, out)
    save(result, out)


def add_case_arguments(ap: argparse.ArgumentParser, cases: list[str], budget_s: float) -> None:
    """The options ``time_cases`` reads: ``--out``, ``--cases`` (default ``cases``),
    ``--rounds``, ``--sustain-s`` and ``--budget-s`` (default ``budget_s``)."""
    ap.add_argument("--out", required=True)
    ap.add_argument("--cases", nargs="+", default=cases)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--sustain-s", type=float, default=1.0)
    ap.add_argument("--budget-s", type=float, default=budget_s)


def time_cases(args, measure_case: Callable[[tuple[int, ...]], dict], shown: tuple[str, ...],
               start: float) -> None:
    """``time_within_budget`` over ``args.cases`` (``"64:1:2048"``: colon-separated integers),
    into a result that names the GPU, torch and the timing (``args.sustain_s`` seconds back to
    back a round, ``args.rounds`` rounds), saved at ``args.out`` within ``args.budget_s``
    seconds of ``start``."""
    cases = [tuple(int(x) for x in c.split(":")) for c in args.cases]
    result = dict(gpu=torch.cuda.get_device_name(), torch=torch.__version__,
                  timing=f"back to back {args.sustain_s} s, {args.rounds} rounds", timings=[])
    time_within_budget(cases, measure_case, result, args.out, args.budget_s, start, shown)

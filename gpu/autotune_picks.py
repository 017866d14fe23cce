"""How far from the best config is the launchers' pick? (GPU only.)

For each of issue 4's target shapes at one sequence length (bf16; D 64/128; causal or not; MHA
or GQA 8:1; ``--seqlen``, default 4096; ``--shapes`` picks some, ``--batches`` sets the batch
sizes, default 16k tokens a batch) and each of our kernels (``fwd`` with the fix, ``fwd_nofix``
without, ``dq`` and ``dkdv``, the last two timed as a whole backward; ``--parts`` picks some), this

1. asks the package's launchers for their picks, in fresh processes with the on-disk cache of
   picks off (so each process times the configs itself), ``--variants`` saying how many processes
   of each kind: ``cold`` tunes as a training run's first step does, ``heat`` first keeps the card
   busy with matrix products for ``HEAT_S`` seconds (clocks and temperature of a card at work),
   ``long`` times each candidate and round for ``LONG_MS`` (warm-up, measure) instead of the
   tuner's own. Up to v15 Triton's autotuner picked (``autotune_picks_before_h100.json``), since
   v16a ``kernels/_tuning.py``;
2. times every table config of that kernel in one process, in ``--rounds`` interleaved rounds
   (configs shuffled per round; ``do_bench`` median per round, L2 flushed), and reports each
   config's median over rounds.

Each row: the shape, the kernel, every config's median, the interleaved best and each process's
variant, pick with its cost against that best, and the tuner's own timings of the candidates
(the kernel alone). Compiles run first in worker processes (as in ``benchmarks/tune_kernel.py``),
so the child processes load binaries.

Run: ``PYTHONPATH=$PWD python gpu/autotune_picks.py --variants cold:2 heat:2 --rounds 5``
(output under $OUT); e.g. ``--seqlen 2048 --batches 4 8 --shapes 64:true:1 --parts fwd`` for
D64 causal MHA at S 2048, the forward with the fix, at 8k and 16k tokens.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time

from triton.testing import do_bench

from benchmarks.bench_attention import Shape
from benchmarks.tune_kernel import Runner, make_inputs, precompile
from child_runs import child_json, keep_row, save_rows  # gpu/ is the script directory
from hf_stable_attn.kernels import _tuning
from hf_stable_attn.kernels._common import tile_config

PARTS = ("fwd", "fwd_nofix", "dq", "dkdv")
HEAT_S = 5.0
LONG_MS = (25, 100)

CHILD = """
import json, sys, time
import torch
from hf_stable_attn.kernels import _tuning, flash_bwd, flash_fwd  # reads HF_STABLE_ATTN_AUTOTUNE=1
from benchmarks.bench_attention import Shape
from benchmarks.tune_kernel import make_inputs  # sets it to 0, too late to matter
from hf_stable_attn.shift_rule import shift_params
from hf_stable_attn.testing import fix_kwargs, launch_kwargs

variant, heat_s, long_ms = sys.argv[2], float(sys.argv[3]), json.loads(sys.argv[4])
parts = json.loads(sys.argv[5])
if variant == "long":
    _tuning.WARMUP_MS, _tuning.REP_MS = long_ms
if variant == "heat":
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    start = time.perf_counter()
    while time.perf_counter() - start < heat_s:
        for _ in range(20):
            a @ a
        torch.cuda.synchronize()
launches = {"fwd": flash_fwd._fwd_launch, "fwd_nofix": flash_fwd._fwd_launch,
            "dq": flash_bwd._dq_launch, "dkdv": flash_bwd._dkdv_launch}
picks = []
for fields in json.loads(sys.argv[1]):
    shape = Shape(*fields)
    q, k, v, dout = make_inputs(shape)
    kw = launch_kwargs(shape.seqlen, shape.seqlen, shape.head_dim, causal=shape.causal)
    row = {}

    def record(names, run):
        for name in names:  # shapes that share a launch key (batch sizes) tune each afresh
            launches[name].chosen.clear()
        result = run()
        torch.cuda.synchronize()
        for name in names:
            launch = launches[name]
            key = next(iter(launch.chosen))
            row[name] = list(launch.chosen[key])
            row[name + "_ms"] = {str(list(c)): round(t, 4)
                                 for c, t in launch.timings.get(key, {}).items()}
        return result

    for name, stabilize in (("fwd_nofix", False), ("fwd", True)):
        fix = fix_kwargs(shift_params(q.dtype, stabilize=stabilize, beta=4.0))
        if name in parts or name == "fwd":  # the backward needs the forward's output
            out, lse = record([name], lambda: flash_fwd.flash_attn_fwd(q, k, v, **kw, **fix))
    if {"dq", "dkdv"} & set(parts):
        record(["dq", "dkdv"], lambda: flash_bwd.flash_attn_bwd(dout, q, k, v, out, lse, **kw))
    picks.append(row)
print(json.dumps(picks))
"""


def target_shapes(seqlen: int, batches: list[int] | None, only: list[str] | None) -> list[Shape]:
    """Issue 4's shapes at ``seqlen`` as the attention sweep builds them (16k tokens per batch,
    or each of ``batches``), only those named in ``only`` ("D:causal:group", e.g. "64:true:1")
    where given."""
    shapes = []
    for d, heads in ((128, 16), (64, 32)):
        for causal in (False, True):
            for group in (1, 8):
                if only and f"{d}:{str(causal).lower()}:{group}" not in only:
                    continue
                for batch in batches or [max(16384 // seqlen, 1)]:
                    shapes.append(Shape("bf16", seqlen, batch, heads, heads // group, d, causal))
    return shapes


def allowed(runner: Runner, part: str, shape: Shape) -> list[tuple]:
    """The table configs a launch for ``shape`` may pick from (TMA ones included: the inputs
    are TMA-ready)."""
    return _tuning.candidates([tile_config(c) for c in runner.table(part, shape.head_dim)], True)


def interleaved_medians(runner: Runner, part: str, shape: Shape, configs: list[tuple],
                        rounds: int) -> dict[tuple, float]:
    """Median over ``rounds`` of each config's ``do_bench`` median, configs shuffled per round."""
    tensors = make_inputs(shape, seed=1)
    times = {c: [] for c in configs}
    order = list(configs)
    for _ in range(rounds):
        random.shuffle(order)
        for cfg in order:
            fn = runner.call(part, cfg, shape, tensors)
            try:
                times[cfg].append(do_bench(fn, warmup=10, rep=40, return_mode="median"))
            finally:
                fn.restore()
    return {c: statistics.median(t) for c, t in times.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--variants", nargs="+", default=["cold:2", "heat:2"],
                    help="NAME:PROCESSES, NAME one of cold, heat, long")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--jobs", type=int, default=16)
    ap.add_argument("--seqlen", type=int, default=4096)
    ap.add_argument("--batches", nargs="+", type=int,
                    help="batch sizes (default: 16k tokens a batch)")
    ap.add_argument("--shapes", nargs="+", help='"D:causal:group" (e.g. 64:true:1), default all')
    ap.add_argument("--parts", nargs="+", default=list(PARTS), choices=PARTS)
    args = ap.parse_args()
    random.seed(0)
    start = time.perf_counter()
    runner = Runner("hf_stable_attn.kernels")
    shapes = target_shapes(args.seqlen, args.batches, args.shapes)
    if not shapes:
        ap.error(f"--shapes {args.shapes} names none of the target shapes (D:causal:group)")
    work = [(part, c, s) for s in shapes for part in args.parts for c in allowed(runner, part, s)]
    failed = precompile("hf_stable_attn.kernels", work, args.jobs)
    print(f"compiled in {time.perf_counter() - start:.0f} s, {len(failed)} failed", file=sys.stderr)

    fields = json.dumps([[getattr(s, f) for f in Shape.__dataclass_fields__] for s in shapes])
    env = {"HF_STABLE_ATTN_AUTOTUNE": "1", "HF_STABLE_ATTN_AUTOTUNE_CACHE": "0"}
    variants = [name for spec in args.variants
                for name in [spec.split(":")[0]] * int(spec.split(":")[1])]
    if not set(variants) <= {"cold", "heat", "long"}:
        ap.error(f"--variants: names are cold, heat and long, got {args.variants}")
    picks = [child_json(CHILD, fields, name, str(HEAT_S), json.dumps(LONG_MS),
                        json.dumps(args.parts), env=env) for name in variants]
    print(f"picks done at {time.perf_counter() - start:.0f} s", file=sys.stderr)

    rows = []
    for i, shape in enumerate(shapes):
        for part in args.parts:
            configs = allowed(runner, part, shape)
            ms = interleaved_medians(runner, part, shape, configs, args.rounds)
            best = min(ms, key=ms.get)
            chosen = [p[i][part] if isinstance(p, list) else p for p in picks]
            keep_row(rows, dict(
                shape=[shape.head_dim, shape.causal, shape.heads_q, shape.heads_kv],
                seqlen=shape.seqlen, batch=shape.batch, part=part,
                ms={str(list(c)): round(t, 4) for c, t in ms.items()}, best=list(best),
                variants=variants, picks=chosen,
                pick_cost=[round(ms[tuple(c)] / ms[best] - 1, 4) if isinstance(c, list) else None
                           for c in chosen],
                tuner_ms=[p[i][part + "_ms"] if isinstance(p, list) else None for p in picks]))
    print(f"done at {time.perf_counter() - start:.0f} s", file=sys.stderr)
    save_rows(rows, "autotune_picks.json")


if __name__ == "__main__":
    main()

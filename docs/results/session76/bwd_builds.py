"""Session 76, GPU: one D64 backward kernel (``--part``: dq or dkdv) at causal MHA S 2048 (B 8,
H 32, bf16), each listed table entry forced (``benchmarks.tune_kernel.Runner``), every kernel of
the backward timed by the CUDA profiler in interleaved rounds (``gpu.kernel_split.kernel_ms``):
whether Triton 3.6's builds are slower than 3.9's in the kernels themselves (session 75, call 7
timed only whole backwards).

    PYTHONPATH=$PWD python3 docs/results/session76/bwd_builds.py time OUT.json [--part dkdv]
    PYTHONPATH=$PWD python3 docs/results/session76/bwd_builds.py one 128,64,4,3,True   # for ncu

The other kernel runs its table's first entry (``tune_kernel`` sets HF_STABLE_ATTN_AUTOTUNE=0).
Call 1 ran this file as ``dq_builds.py``, dQ only, at ``9976768``.
"""

from __future__ import annotations

import argparse
import ast
import json
import statistics

import torch
import triton

from benchmarks.tune_kernel import Runner, default_shapes, make_inputs, ptxas_version
from gpu.kernel_split import kernel_ms

CONFIGS = {"dq": [(128, 64, 4, 3, True), (128, 64, 4, 3), (128, 64, 8, 3), (64, 64, 4, 3)],
           "dkdv": [(64, 64, 4, 3, True), (32, 64, 4, 3, True), (64, 64, 4, 3), (32, 64, 4, 2)]}
ROUNDS = 5


def backward(part: str, cfg: tuple):
    """The whole backward with ``part``'s table holding only ``cfg`` (a closure with a
    ``restore``)."""
    (shape,) = default_shapes(16384, 2048, seqlen=2048, cases=[(64, True, 1)])
    return Runner("hf_stable_attn.kernels").call(part, cfg, shape, make_inputs(shape))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("mode", choices=("time", "one"))
    ap.add_argument("target", help="time: the JSON to write; one: the config, comma-separated")
    ap.add_argument("--part", choices=tuple(CONFIGS), default="dq")
    args = ap.parse_args()
    if args.mode == "one":
        run = backward(args.part, tuple(map(ast.literal_eval, args.target.split(","))))
        for _ in range(4):
            run()
        torch.cuda.synchronize()
        return
    configs = CONFIGS[args.part]
    times = {cfg: {} for cfg in configs}
    for r in range(ROUNDS):
        for cfg in configs[r % len(configs):] + configs[:r % len(configs)]:
            run = backward(args.part, cfg)
            for name, ms in kernel_ms(run, ()).items():
                times[cfg].setdefault(name, []).append(ms)
            run.restore()
    records = [dict(config=list(cfg), **{name: statistics.median(v) for name, v in ks.items()})
               for cfg, ks in times.items()]
    report = dict(gpu=torch.cuda.get_device_name(), torch=torch.__version__,
                  triton=triton.__version__, ptxas=ptxas_version(), part=args.part,
                  rounds=ROUNDS, records=records)
    with open(args.target, "w") as f:
        json.dump(report, f, indent=1)
    for rec in records:
        print(rec["config"], {k[:12]: round(v, 4) for k, v in rec.items()
                              if k != "config" and v > 0.01})


if __name__ == "__main__":
    main()

"""Session 76, GPU: the D64 dQ kernel alone at causal MHA S 2048 (B 8, H 32, bf16), each listed
table entry forced (``benchmarks.tune_kernel.Runner``), timed per kernel by the CUDA profiler in
interleaved rounds (``gpu.kernel_split.kernel_ms``): whether Triton 3.6's build of the dQ's TMA
entry is slower than 3.9's in the kernel itself (session 75, call 7: the whole backward 1.110
against 1.021 ms with that entry, level with the pointer one).

    PYTHONPATH=$PWD python3 docs/results/session76/dq_builds.py time OUT.json
    PYTHONPATH=$PWD python3 docs/results/session76/dq_builds.py one 128,64,4,3,True   # for ncu

The dK/dV runs its table's first entry (``tune_kernel`` sets HF_STABLE_ATTN_AUTOTUNE=0).
"""

from __future__ import annotations

import ast
import json
import statistics
import sys

import torch
import triton

from benchmarks.tune_kernel import Runner, default_shapes, make_inputs, ptxas_version
from gpu.kernel_split import kernel_ms

CONFIGS = [(128, 64, 4, 3, True), (128, 64, 4, 3), (128, 64, 8, 3), (64, 64, 4, 3)]
ROUNDS = 5


def backward(cfg: tuple):
    """The whole backward with the dQ table holding only ``cfg`` (a closure), and its restore."""
    (shape,) = default_shapes(16384, 2048, seqlen=2048, cases=[(64, True, 1)])
    run = Runner("hf_stable_attn.kernels").call("dq", cfg, shape, make_inputs(shape))
    return run


def main() -> None:
    mode = sys.argv[1]
    if mode == "one":
        run = backward(tuple(map(ast.literal_eval, sys.argv[2].split(","))))
        for _ in range(4):
            run()
        torch.cuda.synchronize()
        return
    times = {cfg: {} for cfg in CONFIGS}
    for r in range(ROUNDS):
        for cfg in CONFIGS[r % len(CONFIGS):] + CONFIGS[:r % len(CONFIGS)]:
            run = backward(cfg)
            for name, ms in kernel_ms(run, ()).items():
                times[cfg].setdefault(name, []).append(ms)
            run.restore()
    records = [dict(config=list(cfg), **{name: statistics.median(v) for name, v in ks.items()})
               for cfg, ks in times.items()]
    report = dict(gpu=torch.cuda.get_device_name(), torch=torch.__version__,
                  triton=triton.__version__, ptxas=ptxas_version(), rounds=ROUNDS,
                  records=records)
    with open(sys.argv[2], "w") as f:
        json.dump(report, f, indent=1)
    for rec in records:
        print(rec["config"], {k[:12]: round(v, 4) for k, v in rec.items()
                              if k != "config" and v > 0.01})


if __name__ == "__main__":
    main()

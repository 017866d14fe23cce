"""GPU: GPT-2 124M training in fresh processes (``stable_flash``, or each of ``--impls`` in turn);
per process the median step time and, from a torch.profiler capture of 3 more steps, the GPU
time per step summed over all kernels, over our three kernels, and the largest kernels. A slow
process whose GPU time per step is unchanged waited on the host; one whose kernels took longer
did not. Run from the repository root:

    PYTHONPATH=$PWD python gpu/e2e_slow_process.py --runs 8 [--impls stable_flash sdpa]
"""

from __future__ import annotations

import argparse
import json
import os

from child_runs import child_json  # gpu/ is the script directory

CHILD = """
import json, statistics, sys, time, torch
from torch.profiler import ProfilerActivity, profile
from gpu.profile_e2e import train_steps
step = train_steps(sys.argv[1], 1)  # GPT-2 124M, after 3 warm-up steps
laps = []
for _ in range(10):
    t = time.perf_counter(); step(); torch.cuda.synchronize(); laps.append(time.perf_counter() - t)
with profile(activities=[ProfilerActivity.CUDA]) as prof:
    for _ in range(3):
        step()
    torch.cuda.synchronize()
kernels = {}
for e in prof.key_averages():
    if e.device_time_total > 0 and not e.key.startswith(("aten::", "autograd", "Optimizer")):
        kernels[e.key] = kernels.get(e.key, 0.0) + e.self_device_time_total / 3e3
ours = sum(v for k, v in kernels.items()
           if k.startswith(("_fwd_kernel", "_dq_kernel", "_dkdv_kernel")))
top = sorted(kernels.items(), key=lambda kv: -kv[1])[:6]
print(json.dumps({"ms_per_step": 1e3 * statistics.median(laps),
                  "gpu_ms_per_step": sum(kernels.values()), "ours_ms_per_step": ours,
                  "top_kernels_ms": {k[:60]: round(v, 3) for k, v in top}}))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=8)
    ap.add_argument("--impls", nargs="+", default=["stable_flash"])
    args = ap.parse_args()
    rows = []
    for i in range(args.runs):
        for impl in args.impls:
            row = {"run": i, "impl": impl, **child_json(CHILD, impl)}
            print(json.dumps(row), flush=True)
            rows.append(row)
    with open(os.path.join(os.environ.get("OUT", "."), "gpt2_slow_process.json"), "w") as f:
        json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()

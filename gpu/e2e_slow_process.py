"""GPU: GPT-2 124M training in fresh processes (``stable_flash``, or each of ``--impls`` in turn);
per process the median step time (over 10 steps with Python's garbage collector timed, then 10
with it off) and, from a torch.profiler capture of 3 more steps, the GPU time per step summed over
all kernels, over our three kernels, and the largest kernels, and the GPU's idle time between
kernels with the kernel pairs it falls between. A slow process whose GPU time per step is
unchanged waited on the host; one whose kernels took longer did not. Run from the repository root:

    PYTHONPATH=$PWD python gpu/e2e_slow_process.py --runs 8 [--impls stable_flash sdpa]
"""

from __future__ import annotations

import argparse

from child_runs import child_json, keep_row, save_rows  # gpu/ is the script directory

CHILD = """
import collections, gc, json, statistics, sys, time, torch
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile
from benchmarks.timing import first_call
from gpu.profile_e2e import cuda_ms_by_name, train_steps
step = train_steps(sys.argv[1], 1)  # GPT-2 124M, after 3 warm-up steps
gc_s = []
gc_started = []
def gc_clock(phase, info):
    if phase == "start":
        gc_started.append((time.perf_counter(), info["generation"]))
    else:
        t0, generation = gc_started.pop()
        gc_s.append((generation, time.perf_counter() - t0))
def laps(n):
    return 1e3 * statistics.median(first_call(step, torch.device("cuda"))[0] for _ in range(n))
gc.callbacks.append(gc_clock)
ms = laps(10)
gc.callbacks.remove(gc_clock)
gc.collect(); gc.disable()
ms_gc_off = laps(10)
gc.enable()
with profile(activities=[ProfilerActivity.CUDA]) as prof:
    for _ in range(3):
        step()
    torch.cuda.synchronize()
kernels = cuda_ms_by_name(prof.events(), 3)
ours = sum(v for k, v in kernels.items()
           if k.startswith(("_fwd_kernel", "_dq_kernel", "_dkdv_kernel")))
top = collections.Counter()
for name, ms_per_step in kernels.items():  # kernels whose names share 60 characters add up
    top[name[:60]] += ms_per_step
device = sorted((e for e in prof.events() if e.device_type == DeviceType.CUDA),
                key=lambda e: e.time_range.start)
sites, idle, end, before = collections.Counter(), 0.0, None, None
for e in device:  # GPU idle time between kernels (us), by the kernels on either side
    if end is not None and e.time_range.start - end > 5.0:
        gap = e.time_range.start - end
        idle += gap
        sites[before[:40] + " -> " + e.name[:40]] += gap
    if end is None or e.time_range.end > end:
        end, before = e.time_range.end, e.name
gc_by_generation = collections.defaultdict(list)
for generation, seconds in gc_s:
    gc_by_generation[generation].append(seconds)
print(json.dumps({"ms_per_step": ms, "ms_per_step_gc_off": ms_gc_off,
                  "gc_ms_per_step": {g: round(1e3 * sum(v) / 10, 3) for g, v in gc_by_generation.items()},
                  "gc_collections": {g: len(v) for g, v in gc_by_generation.items()},
                  "gpu_ms_per_step": sum(kernels.values()), "ours_ms_per_step": ours,
                  "gpu_idle_ms_per_step": idle / 3e3,
                  "idle_sites_ms_per_step": {k: round(v / 3e3, 3) for k, v in sites.most_common(8)},
                  "top_kernels_ms": {k: round(v, 3) for k, v in top.most_common(6)}}))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=8)
    ap.add_argument("--impls", nargs="+", default=["stable_flash"])
    args = ap.parse_args()
    rows = []
    for i in range(args.runs):
        for impl in args.impls:
            keep_row(rows, {"run": i, "impl": impl, **child_json(CHILD, impl)})
    save_rows(rows, "gpt2_slow_process.json")


if __name__ == "__main__":
    main()

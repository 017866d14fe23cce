"""GPU: GPT-2 124M training step times, step by step, in fresh processes (each of ``--impls`` in
turn, ``--runs`` times): whether a slow process is slow from the start or only in its first
steps after the warm-up (``bench_e2e`` times 10 steps after 2). With ``--idle-context both``
each run is done twice: alone on the GPU, and next to another process that holds an idle CUDA
context (as ``bench_e2e --processes`` did: its parent process). Run from the repository root:

    PYTHONPATH=$PWD python gpu/e2e_step_trace.py --runs 3 --steps 60 [--idle-context both]
"""

from __future__ import annotations

import argparse
import subprocess
import sys

from child_runs import child_json, keep_row, save_rows  # gpu/ is the script directory

CHILD = """
import json, sys, torch
from benchmarks.timing import first_call
from gpu.profile_e2e import train_steps
step = train_steps(sys.argv[1], 1)  # GPT-2 124M, after 3 warm-up steps
cuda = torch.device("cuda")
laps = [round(1e3 * first_call(step, cuda)[0], 2) for _ in range(int(sys.argv[2]))]
print(json.dumps({"ms_per_step": laps}))
"""


def hold_idle_context() -> subprocess.Popen:
    """A process that creates a CUDA context on the default GPU and then sleeps (kill it)."""
    holder = subprocess.Popen(
        [sys.executable, "-c", "import time, torch; torch.ones(1, device='cuda'); "
                               "print('ready', flush=True); time.sleep(3600)"],
        stdout=subprocess.PIPE, text=True)
    holder.stdout.readline()
    return holder


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--impls", nargs="+", default=["stable_flash", "sdpa"])
    ap.add_argument("--idle-context", choices=["no", "both"], default="no")
    args = ap.parse_args()
    rows = []
    for i in range(args.runs):
        for idle_context in ([False, True] if args.idle_context == "both" else [False]):
            holder = hold_idle_context() if idle_context else None
            for impl in args.impls:
                keep_row(rows, {"run": i, "impl": impl, "idle_context_elsewhere": idle_context,
                                **child_json(CHILD, impl, str(args.steps))})
            if holder is not None:
                holder.kill()
                holder.wait()
    save_rows(rows, "gpt2_step_trace.json")


if __name__ == "__main__":
    main()

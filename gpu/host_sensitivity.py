"""GPU: how much of GPT-2 124M's training step waits on our attention's host time. Within one
process, alternating, the step time with an added busy-wait of ``--delay-us`` in every
attention forward call, in every backward call, in both, and in neither. The slope says which
phase's host time the step pays for (a step that hides the host time does not move). Fresh
processes (``--runs``), as step times vary between processes. Run from the repository root:

    PYTHONPATH=$PWD python gpu/host_sensitivity.py --runs 2 --delay-us 100
"""

from __future__ import annotations

import argparse

from child_runs import child_json, keep_row, save_rows  # gpu/ is the script directory

CHILD = """
import json, statistics, sys, time, torch
from benchmarks.timing import first_call
from hf_stable_attn import ops
from gpu.profile_e2e import train_steps
delay = {"fwd": 0.0, "bwd": 0.0}
def busy(seconds):
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass
def delayed(fn, phase):
    def call(*args):
        busy(delay[phase])
        return fn(*args)
    return call
ops._run_forward = delayed(ops._run_forward, "fwd")
ops._backward_impl = delayed(ops._backward_impl, "bwd")
step = train_steps(sys.argv[1], 1)  # GPT-2 124M, after 3 warm-up steps
added = float(sys.argv[2]) * 1e-6
variants = {"none": (0.0, 0.0), "fwd": (added, 0.0), "bwd": (0.0, added), "both": (added, added)}
laps = {name: [] for name in variants}
for _ in range(6):
    for name, (f, b) in variants.items():
        delay["fwd"], delay["bwd"] = f, b
        laps[name] += [1e3 * first_call(step, torch.device("cuda"))[0] for _ in range(3)]
print(json.dumps({name: round(statistics.median(v), 2) for name, v in laps.items()}))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--delay-us", type=float, default=100.0)
    ap.add_argument("--impl", default="stable_flash")
    args = ap.parse_args()
    rows = []
    for i in range(args.runs):
        keep_row(rows, {"run": i, "impl": args.impl, "delay_us": args.delay_us,
                        "ms_per_step": child_json(CHILD, args.impl, str(args.delay_us))})
    save_rows(rows, "gpt2_host_sensitivity.json")


if __name__ == "__main__":
    main()

"""Run 1's two misses again on the CPU (TRITON_INTERPRET=1) with fuzz_kernels.run_case as it
stands after run 1 (failures classed by the reference path): each case is rebuilt from its
record, so the inputs are the GPU run's (drawn on the CPU from the case's seed).
Run from the repository root: TRITON_INTERPRET=1 PYTHONPATH=$PWD python docs/results/session46/replay_run1.py"""
import json
import sys

sys.path.insert(0, "gpu")
import fuzz_kernels as fz  # noqa: E402

for log in ("docs/results/session46/fuzz_run1/fuzz_0.log", "docs/results/session46/fuzz_run1/fuzz_2.log"):
    for line in open(log):
        if not line.startswith("FAIL"):
            continue
        r = json.loads(line[len("FAIL "):])
        case = fz.Case(**{k: tuple(v) if isinstance(v, list) else v
                          for k, v in r.items() if k in fz.Case.__dataclass_fields__})
        rec = fz.run_case(case, r["seed"], "cpu", 1e-4)
        print(r["seed"], "known_class", rec["known_class"],
              {n: {k: rec[n][k] for k in ("err", "plain_err", "reference_err") if k in rec[n]}
               for n in ("dq", "dk", "dv")}, "| GPU kernel's errors:",
              {n: r[n]["err"] for n in ("dq", "dk", "dv")})

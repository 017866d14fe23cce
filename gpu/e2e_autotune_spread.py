"""GPU: GPT-2 124M training steps with ``stable_flash`` in fresh processes, and the tile configs
the autotuner picked in each, to see whether the spread of the end-to-end ratio between
processes follows those picks. Run from the repository root (output under $OUT):

    PYTHONPATH=$PWD python gpu/e2e_autotune_spread.py --runs 4

It writes one bench_e2e JSON per run and a summary; each row is also printed, since the device
tool returns at most 8 files (with 4 runs the summary is the one left out).
"""

from __future__ import annotations

import argparse
import os

from child_runs import child_json, keep_row, save_rows  # gpu/ is the script directory

CHILD = """
import json, sys
from benchmarks import bench_e2e
from hf_stable_attn.kernels import flash_bwd, flash_fwd
report = bench_e2e.main(["--models", "gpt2-124m", "--impls", "stable_flash", "--gen-impls", "none",
                         "--out", sys.argv[1]])
picks = {name: {str(key[:3]): str(cfg) for key, cfg in launch.chosen.items()}
         for name, launch in [("fwd", flash_fwd._fwd_launch), ("dq", flash_bwd._dq_launch),
                              ("dkdv", flash_bwd._dkdv_launch)]}
ms = [r["ms_per_step"] for r in report["records"] if r["mode"] == "train"][0]
print(json.dumps({"ms_per_step": ms, "picks": picks}))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=4)
    args = ap.parse_args()
    out = os.environ.get("OUT", ".")
    rows = []
    for autotune in ("1", "0"):
        for i in range(args.runs):
            path = os.path.join(out, f"gpt2_autotune{autotune}_{i}.json")
            keep_row(rows, {"autotune": autotune == "1", "run": i,
                            **child_json(CHILD, path, env={"HF_STABLE_ATTN_AUTOTUNE": autotune})})
    save_rows(rows, "gpt2_autotune_spread.json")


if __name__ == "__main__":
    main()

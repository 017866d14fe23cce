"""GPU: GPT-2 124M greedy generation with a static cache (which Transformers compiles) in fresh
processes, per process the ms per new token and the forward's tile configs the autotuner picked,
to see what the spread of ``stable_flash``'s static-cache entries between processes follows:
autotuning per process (its timings not shared), fixed configs (``HF_STABLE_ATTN_AUTOTUNE=0``),
and ``sdpa`` for comparison. Run from the repository root (rows printed and saved under $OUT):

    PYTHONPATH=$PWD python gpu/static_decode_spread.py --runs 3
"""

from __future__ import annotations

import argparse
import os
import tempfile

from child_runs import child_json, keep_row, save_rows  # gpu/ is the script directory

CHILD = """
import json, sys
from benchmarks import bench_e2e
from hf_stable_attn.kernels import flash_fwd
report = bench_e2e.main(["--models", "gpt2-124m", "--impls", "none", "--gen-impls", sys.argv[2],
                         "--gen-cache", "static", "--gen-reps", "5", "--out", sys.argv[1]])
record = report["records"][0]
picks = {str(key[:2]): str(cfg) for key, cfg in flash_fwd._fwd_launch.chosen.items()}
print(json.dumps({"ms_per_step": record["ms_per_step"], "compile_s": record["compile_s"],
                  "picks": picks}))
"""

VARIANTS = {
    "stable_flash, autotuned per process": ("stable_flash", {"HF_STABLE_ATTN_AUTOTUNE_CACHE": "0"}),
    "stable_flash, fixed configs": ("stable_flash", {"HF_STABLE_ATTN_AUTOTUNE": "0"}),
    "sdpa": ("sdpa", {}),
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.runs):
            for label, (impl, env) in VARIANTS.items():
                path = os.path.join(tmp, f"{i}.json")
                keep_row(rows, {"variant": label, "run": i,
                                **child_json(CHILD, path, impl, env=env)})
    save_rows(rows, "static_decode_spread.json")


if __name__ == "__main__":
    main()

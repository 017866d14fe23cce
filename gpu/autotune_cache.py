"""GPU: the first training step of GPT-2 124M and the ~1B Llama with ``stable_flash`` in fresh
processes sharing one new Triton cache directory, to show what disk-cached autotuning saves:

1. ``cold``: nothing cached (compiles and autotuning timings);
2. ``retime``: compiled kernels cached, ``HF_STABLE_ATTN_AUTOTUNE_CACHE=0`` (timings again);
3. ``cached``: compiled kernels and the first process's timings cached.

Each row also holds the step time afterwards and the configs each process picked; the rows go
to ``$OUT/autotune_cache.json`` (the children's bench_e2e JSONs stay in a temporary directory).
Run from the repository root:

    PYTHONPATH=$PWD python gpu/autotune_cache.py --models gpt2-124m llama-1b
"""

from __future__ import annotations

import argparse
import os
import tempfile

from child_runs import child_json, keep_row, save_rows  # gpu/ is the script directory

CHILD = """
import json, sys
from benchmarks import bench_e2e
from hf_stable_attn.kernels import flash_bwd, flash_fwd
report = bench_e2e.main(["--models", sys.argv[2], "--impls", "stable_flash", "--gen-impls", "none",
                         "--steps", "5", "--out", sys.argv[1]])
picks = {name: sorted(str(cfg) for cfg in launch.chosen.values())
         for name, launch in [("fwd", flash_fwd._fwd_launch), ("dq", flash_bwd._dq_launch),
                              ("dkdv", flash_bwd._dkdv_launch)]}
train = [r for r in report["records"] if r["mode"] == "train"][0]
print(json.dumps({"first_step_s": train["compile_s"], "ms_per_step": train["ms_per_step"],
                  "picks": picks}))
"""

CONDITIONS = (("cold", "1"), ("retime", "0"), ("cached", "1"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="+", default=["gpt2-124m", "llama-1b"])
    args = ap.parse_args()
    scratch = tempfile.mkdtemp(prefix="autotune-cache-")
    rows = []
    for model in args.models:
        cache_dir = tempfile.mkdtemp(prefix=f"triton-cache-{model}-")
        for condition, autotune_cache in CONDITIONS:
            env = {"TRITON_CACHE_DIR": cache_dir, "HF_STABLE_ATTN_AUTOTUNE_CACHE": autotune_cache}
            path = os.path.join(scratch, f"{model}_{condition}.json")
            keep_row(rows, {"model": model, "condition": condition,
                            **child_json(CHILD, path, model, env=env)})
    save_rows(rows, "autotune_cache.json")


if __name__ == "__main__":
    main()

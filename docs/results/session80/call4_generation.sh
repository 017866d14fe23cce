#!/usr/bin/env bash
# Session 80, call 4, the same machine, GPU 0 alone, the machine's Triton 3.6, main (v78a's
# kernels): generation latency through Transformers (bench_e2e's prompts, dynamic cache),
# stable_flash against sdpa, both models, one process per entry; the first at v78a. OUT set.
set -uo pipefail
: "${OUT:?set OUT to the folder whose files come back}"
export PYTHONPATH=$PWD HF_HUB_OFFLINE=1 CUDA_VISIBLE_DEVICES=0
timeout -k 5 290 python3 -m benchmarks.bench_e2e --impls none --gen-impls stable_flash sdpa \
    --processes 1 --time-budget-s 260 --out "$OUT/gen-e2e.json" 2>&1 \
    | grep -v -E "leaked|nanobind|refleaks|skipped remainder" > "$OUT/gen.log"
tail -n 8 "$OUT/gen.log"

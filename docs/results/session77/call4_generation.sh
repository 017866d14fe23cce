#!/usr/bin/env bash
# Session 77, call 4, one H200 alone, the machine's Triton 3.6, main: generation latency through
# Transformers (8 prompts of 128 tokens, 128 new, dynamic cache), stable_flash against sdpa, both
# models; one process per entry (the device time left). The last generation run (session 58's
# `1720`) ran beside a sweep on the other GPU and was host-bound. OUT set.
set -uo pipefail
: "${OUT:?set OUT to the folder whose files come back}"
export PYTHONPATH=$PWD HF_HUB_OFFLINE=1
timeout -k 5 280 python3 -m benchmarks.bench_e2e --impls none --gen-impls stable_flash sdpa \
    --processes 1 --time-budget-s 250 --out "$OUT/gen-e2e.json" 2>&1 \
    | grep -v -E "leaked|nanobind|refleaks|skipped remainder" > "$OUT/gen.log"
tail -n 8 "$OUT/gen.log"

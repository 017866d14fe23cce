#!/usr/bin/env bash
# Session 86, call 1 (one H200, torch 2.11, Triton 3.6): stage the first half of the slimmed
# Triton 3.8.0 pack (gpu/slim_triton.sh; the repository and a whole pack pass the 64 MiB a call
# carries) for call 2 on the same warm machine, then GPT-2 124M training end to end,
# stable_flash against sdpa, six fresh processes each in alternating rounds.
# Run with carry [".t38s/a"]. OUT set.
set -uo pipefail
: "${OUT:?set OUT to the folder whose files come back}"
bash gpu/carried_triton_halves.sh first 38 || exit 1
python3 -m benchmarks.runinfo > "$OUT/runinfo.txt"
nvidia-smi --query-gpu=index,name,driver_version,power.limit --format=csv,noheader > "$OUT/gpu.txt"
HF_HUB_OFFLINE=1 PYTHONPATH=$PWD python3 -m benchmarks.bench_e2e --models gpt2-124m \
    --impls stable_flash sdpa --gen-impls none --processes 6 --time-budget-s 320 \
    --out "$OUT/e2e.json" > "$OUT/e2e.log" 2>&1
cat "$OUT/staged.txt" "$OUT/gpu.txt"; tail -n 15 "$OUT/e2e.log"

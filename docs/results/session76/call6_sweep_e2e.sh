#!/usr/bin/env bash
# Session 76, call 6, two H200s of one host, the machine's Triton 3.6, main with v76c: GPU 0 the
# six D64 causal target shapes with every peer (as session 75's call 1 ran them); GPU 1 at the
# same time training end to end (GPT-2 124M and the ~1B Llama model, stable_flash and sdpa, three
# fresh processes each). OUT set.
set -uo pipefail
: "${OUT:?set OUT to the folder whose files come back}"
export PYTHONPATH=$PWD
CUDA_VISIBLE_DEVICES=0 python3 -m benchmarks.bench_attention --dtypes bf16 \
    --seqlens 2048 4096 8192 --causal true --kv-groups 1 8 --modes fwd_bwd \
    --rounds 5 --sustain-s 1 --sustain-rounds 2 --time-budget-s 370 --head-dims 64 \
    --out "$OUT/gpu0-d64-causal-attention.json" 2>&1 \
    | grep -v -E "leaked|nanobind|refleaks" > "$OUT/sweep_gpu0.log" &
CUDA_VISIBLE_DEVICES=1 python3 -m benchmarks.bench_e2e --models gpt2-124m llama-1b \
    --impls stable_flash sdpa --gen-impls none --processes 3 --time-budget-s 370 \
    --out "$OUT/gpu1-e2e.json" 2>&1 | grep -v -E "leaked|nanobind|refleaks" > "$OUT/e2e_gpu1.log"
wait
nvidia-smi --query-gpu=index,name,driver_version,power.limit --format=csv,noheader > "$OUT/gpu.txt"
tail -n 12 "$OUT/sweep_gpu0.log" "$OUT/e2e_gpu1.log"

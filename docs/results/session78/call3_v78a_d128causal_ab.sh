#!/usr/bin/env bash
# Session 78, call 3, two H200s of one host (nvidia-h200-x2), the machine's Triton 3.6, branch
# v78a-raw-max: GPU 0 issue 4's six D128 causal target shapes with every peer; GPU 1
# gpu/hopper_fwd_ab.py, v78a's Gluon forward against main's in one process (timing only,
# random inputs, D64 and D128, with and without a causal mask, the fix on and off).
# Run with carry [".variants/s77"]. OUT set.
set -uo pipefail
: "${OUT:?set OUT to the folder whose files come back}"
export PYTHONPATH=$PWD HF_HUB_OFFLINE=1
quiet() { grep -v -E "leaked|nanobind|refleaks|skipped remainder"; }
CUDA_VISIBLE_DEVICES=0 python3 -m benchmarks.bench_attention --dtypes bf16 \
    --seqlens 2048 4096 8192 --causal true --kv-groups 1 8 --modes fwd_bwd \
    --rounds 5 --sustain-s 1 --sustain-rounds 2 --time-budget-s 420 --head-dims 128 \
    --out "$OUT/gpu0-d128-causal-attention.json" 2>&1 | quiet > "$OUT/sweep_gpu0.log" &
CUDA_VISIBLE_DEVICES=1 timeout -k 5 420 python3 gpu/hopper_fwd_ab.py \
    --base .variants/s77/flash_fwd_hopper_main.py --no-checks --head-dims 64 128 \
    --seqlens 4096 8192 --budget-s 400 --out "$OUT/ab_random.json" 2>&1 | quiet \
    > "$OUT/ab_random.log"
wait
nvidia-smi --query-gpu=index,name,driver_version,power.limit --format=csv,noheader > "$OUT/gpu.txt"
tail -n 3 "$OUT/ab_random.log"; tail -n 2 "$OUT/sweep_gpu0.log"

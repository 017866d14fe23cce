#!/usr/bin/env bash
# Session 78, call 1, two H200s of one host (nvidia-h200-x2), the machine's Triton 3.6, branch
# v78a-raw-max: GPU 0 the GPU test suite (gpu/validate_kernel.sh); GPU 1 issue 4's six D64
# causal target shapes with every peer (session 75's call1_sweep.sh group). Run with carry
# [".gpu_carry"]. OUT set.
set -uo pipefail
: "${OUT:?set OUT to the folder whose files come back}"
export PYTHONPATH=$PWD
CUDA_VISIBLE_DEVICES=1 python3 -m benchmarks.bench_attention --dtypes bf16 \
    --seqlens 2048 4096 8192 --causal true --kv-groups 1 8 --modes fwd_bwd \
    --rounds 5 --sustain-s 1 --sustain-rounds 2 --time-budget-s 420 --head-dims 64 \
    --out "$OUT/gpu1-d64-causal-attention.json" 2>&1 \
    | grep -v -E "leaked|nanobind|refleaks|skipped remainder" > "$OUT/sweep_gpu1.log" &
CUDA_VISIBLE_DEVICES=0 OUT=$OUT/suite TEST_TIMEOUT_S=420 bash gpu/validate_kernel.sh 2>&1 | tail -n 8
wait
nvidia-smi --query-gpu=index,name,driver_version,power.limit --format=csv,noheader > "$OUT/gpu.txt"
tail -n 4 "$OUT/sweep_gpu1.log"

#!/usr/bin/env bash
# Session 75, call 3, two H200s of one host (nvidia-h200-x2), main's kernels under Triton 3.9
# carried in (call 2 staged its ptxas-blackwell in /tmp/carried_ptxas). At the same time:
#   GPU 0: the GPU suite (gpu/validate_kernel.sh);
#   GPU 1: the six D64 causal shapes, as call 1's GPU 1 sweep.
# Run with carry [".t39", ".gpu_carry"]. OUT set.
set -uo pipefail
: "${OUT:?set OUT to the folder whose files come back}"
export PYTHONPATH=$PWD
source gpu/carried_triton.sh > "$OUT/carried_triton.txt" 2>&1 || exit 1
CUDA_VISIBLE_DEVICES=1 python3 -m benchmarks.bench_attention --dtypes bf16 \
    --seqlens 2048 4096 8192 --causal true --kv-groups 1 8 --modes fwd_bwd --rounds 5 \
    --sustain-s 1 --sustain-rounds 2 --time-budget-s 420 --head-dims 64 \
    --out "$OUT/gpu1-d64-causal-triton39-attention.json" 2>&1 \
    | grep -v -E "leaked|nanobind|refleaks" > "$OUT/sweep_gpu1.log" &
CUDA_VISIBLE_DEVICES=0 TEST_TIMEOUT_S=420 OUT=$OUT bash gpu/validate_kernel.sh
wait
cat "$OUT/carried_triton.txt" >> "$OUT/gpu.txt" && rm "$OUT/carried_triton.txt"
tail -n 3 "$OUT/sweep_gpu1.log"

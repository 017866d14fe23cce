#!/usr/bin/env bash
# Session 75, call 3, four H200s of one host (nvidia-h200-x4), main's kernels, after call 2
# staged Triton 3.9's ptxas-blackwell in /tmp/carried_ptxas. At the same time:
#   GPU 2 (Triton 3.6): benchmarks.bench_e2e, GPT-2 124M then the ~1B Llama model, stable_flash
#     against sdpa, 3 processes each;
#   GPU 3 (Triton 3.6): the four D64 causal shapes at S 2048-4096 again (call 1's GPU 1 sweep,
#     cut to those seqlens), a second sample of the shapes nearest the 1.3x FA2 line;
#   GPU 0 (Triton 3.9 carried in): the GPU suite (gpu/validate_kernel.sh);
#   GPU 1 (Triton 3.9 carried in): the six D64 causal shapes, as call 1's GPU 1 sweep.
# Run with carry [".t39", ".gpu_carry"]. OUT set.
set -uo pipefail
: "${OUT:?set OUT to the folder whose files come back}"
export PYTHONPATH=$PWD
drop='leaked|nanobind|refleaks'
CUDA_VISIBLE_DEVICES=2 python3 -m benchmarks.bench_e2e --models gpt2-124m llama-1b \
    --impls stable_flash sdpa --gen-impls none --processes 3 --time-budget-s 400 \
    --out "$OUT/gpu2-e2e.json" 2>&1 | grep -v -E "$drop" > "$OUT/gpu2.log" &
CUDA_VISIBLE_DEVICES=3 python3 -m benchmarks.bench_attention --dtypes bf16 --seqlens 2048 4096 \
    --causal true --kv-groups 1 8 --modes fwd_bwd --rounds 5 --sustain-s 1 --sustain-rounds 2 \
    --time-budget-s 400 --head-dims 64 --out "$OUT/gpu3-d64-causal-attention.json" 2>&1 \
    | grep -v -E "$drop" > "$OUT/gpu3.log" &
source gpu/carried_triton.sh > "$OUT/carried_triton.txt" 2>&1 || exit 1
CUDA_VISIBLE_DEVICES=1 python3 -m benchmarks.bench_attention --dtypes bf16 \
    --seqlens 2048 4096 8192 --causal true --kv-groups 1 8 --modes fwd_bwd --rounds 5 \
    --sustain-s 1 --sustain-rounds 2 --time-budget-s 420 --head-dims 64 \
    --out "$OUT/gpu1-d64-causal-triton39-attention.json" 2>&1 \
    | grep -v -E "$drop" > "$OUT/gpu1.log" &
CUDA_VISIBLE_DEVICES=0 TEST_TIMEOUT_S=420 OUT=$OUT bash gpu/validate_kernel.sh
wait
cat "$OUT/carried_triton.txt" >> "$OUT/gpu.txt"
for g in 1 2 3; do echo "== GPU $g"; cat "$OUT/gpu$g.log"; done > "$OUT/calls.log"
rm "$OUT"/gpu[123].log "$OUT/carried_triton.txt"
grep -E "^==|records|e2e:" "$OUT/calls.log"

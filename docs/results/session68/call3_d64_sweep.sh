#!/usr/bin/env bash
# Session 68, call 3, two H200s of one host, the machine's Triton 3.6, main's kernels: issue 4's
# twelve D64 target shapes with every peer (bench_attention, as call 2's D128 sweep), GPU 0
# without a mask and GPU 1 with a causal mask, at the same time. OUT set.
set -uo pipefail
: "${OUT:?set OUT to the folder whose files come back}"
export PYTHONPATH=$PWD
for g in 0 1; do
    causal=$([ "$g" = 0 ] && echo false || echo true)
    CUDA_VISIBLE_DEVICES=$g python3 -m benchmarks.bench_attention --dtypes bf16 \
        --seqlens 2048 4096 8192 --causal "$causal" --kv-groups 1 8 --modes fwd_bwd --rounds 5 \
        --sustain-s 1 --sustain-rounds 2 --time-budget-s 420 --head-dims 64 \
        --out "$OUT/gpu$g-d64-causal-$causal-attention.json" 2>&1 \
        | grep -v -E "leaked|nanobind|refleaks" > "$OUT/sweep_gpu${g}_d64_causal_$causal.log" &
done
wait
tail -n 8 "$OUT"/*.log

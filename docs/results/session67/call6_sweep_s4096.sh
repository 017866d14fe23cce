#!/usr/bin/env bash
# Session 67, two H200s of one host, the machine's Triton 3.6, branch v67a: issue 4's D64 causal
# S 4096 shapes, GQA 8:1 (whose dK/dV v67a moved to the Triton kernel) and MHA (unchanged), with
# 1 s back to back, on both GPUs at the same time (two more samples, nothing else running).
# OUT set.
set -uo pipefail
: "${OUT:?set OUT to the folder whose files come back}"
export PYTHONPATH=$PWD
for g in 0 1; do
    CUDA_VISIBLE_DEVICES=$g python3 -m benchmarks.bench_attention --dtypes bf16 --head-dims 64 \
        --modes fwd_bwd --rounds 5 --sustain-s 1 --sustain-rounds 2 --time-budget-s 100 \
        --seqlens 4096 --causal true --kv-groups 8 1 \
        --out "$OUT/gpu$g-d64-causal-s4096-attention.json" 2>&1 \
        | grep -v -E "leaked|nanobind|refleaks|skipped remainder" > "$OUT/sweep_gpu$g.log" &
done
wait
tail -n 2 "$OUT"/sweep_gpu*.log

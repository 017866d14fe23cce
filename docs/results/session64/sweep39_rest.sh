#!/usr/bin/env bash
# Session 64, on two H200s of one host under the carried Triton 3.9 (after a call that staged
# ptxas-blackwell): the D64 target shapes that suite39_sweep39.sh's budget left out, every peer,
# GPU 0 the four at S 4096 (causal MHA again), GPU 1 the four at S 8192, at the same time.
# Carry .t39; OUT set.
set -uo pipefail
: "${OUT:?set OUT to the folder whose files come back}"
source gpu/carried_triton.sh > "$OUT/carried_triton.txt" 2>&1 || exit 1
for gpu in 0 1; do
    seqlen=$([ "$gpu" = 0 ] && echo 4096 || echo 8192)
    CUDA_VISIBLE_DEVICES=$gpu python3 -m benchmarks.bench_attention --dtypes bf16 \
        --seqlens $seqlen --causal true false --kv-groups 1 8 --modes fwd_bwd --rounds 5 \
        --time-budget-s 230 --head-dims 64 --out "$OUT/gpu$gpu-triton39-attention.json" 2>&1 \
        | grep -v "leaked" > "$OUT/sweep_gpu${gpu}_triton39.log" &
done
wait

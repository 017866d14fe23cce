#!/usr/bin/env bash
# Session 75, call 6, two H200s of one host (nvidia-h200-x2), main's kernels, after call 5 staged
# Triton 3.9's ptxas-blackwell in /tmp/carried_ptxas: D64 causal MHA and GQA 8:1 at S 2048 and
# 4096, each pass alone (fwd, bwd) and fwd_bwd, ours with and without the fix and FA2, under
# Triton 3.6 on GPU 0 and Triton 3.9 (carried in) on GPU 1 at the same time: which pass holds
# the 3-4% that calls 1 and 3 measured between the two Tritons at S 2048.
# Run with carry [".t39"]. OUT set.
set -uo pipefail
: "${OUT:?set OUT to the folder whose files come back}"
export PYTHONPATH=$PWD
sweep() {  # $1 GPU, $2 file stem
    CUDA_VISIBLE_DEVICES=$1 python3 -m benchmarks.bench_attention --dtypes bf16 \
        --seqlens 2048 4096 --causal true --kv-groups 1 8 --modes fwd bwd fwd_bwd \
        --impls stable_flash stable_flash_nofix sdpa_flash --rounds 3 --sustain-s 1 \
        --sustain-rounds 2 --time-budget-s 330 --head-dims 64 --out "$OUT/$2-attention.json" 2>&1 \
        | grep -v -E "leaked|nanobind|refleaks" > "$OUT/$2.log"
}
sweep 0 gpu0-d64-causal-modes-triton36 &
source gpu/carried_triton.sh > "$OUT/carried_triton.txt" 2>&1 || exit 1
sweep 1 gpu1-d64-causal-modes-triton39
wait
tail -n 2 "$OUT"/*.log; cat "$OUT/carried_triton.txt"

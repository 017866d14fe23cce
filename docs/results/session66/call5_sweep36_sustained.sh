#!/usr/bin/env bash
# Session 66, two H200s of one host, the machine's Triton 3.6, main's code: issue 4's 24 target
# shapes (bf16, S 2048-8192, causal and not, MHA and GQA 8:1, forward + backward) with every peer,
# GPU 0 head dim 64 and GPU 1 head dim 128 at the same time, with the clocks and power per record
# and each call also run back to back for 1 s (--sustain-s: the card's steady state at its power
# limit). OUT set. Into OUT: the two JSONs and their logs. SWEEP_BUDGET_S (490).
set -uo pipefail
: "${OUT:?set OUT to the folder whose files come back}"
export PYTHONPATH=$PWD
for g in 0 1; do
    d=$((64 * (g + 1)))
    CUDA_VISIBLE_DEVICES=$g python3 -m benchmarks.bench_attention --dtypes bf16 \
        --seqlens 2048 4096 8192 --causal true false --kv-groups 1 8 --modes fwd_bwd --rounds 5 \
        --sustain-s 1 --sustain-rounds 2 --time-budget-s "${SWEEP_BUDGET_S:-490}" --head-dims $d \
        --out "$OUT/gpu$g-d$d-attention.json" 2>&1 \
        | grep -v -E "leaked|nanobind|refleaks" > "$OUT/sweep_gpu${g}_d$d.log" &
done
wait
tail -n 3 "$OUT"/sweep_gpu*.log

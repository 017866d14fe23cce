#!/usr/bin/env bash
# Session 66, two H200s of one host, the machine's Triton 3.6, main's code, as call 5
# (--sustain-s 1): GPU 0 the D64 S 8192 shapes (call 5's budget left out three of them); GPU 1
# at the same time a second sample of the D64 causal shapes at S 2048 and 4096 (the lowest
# FA2 ratios). OUT set.
set -uo pipefail
: "${OUT:?set OUT to the folder whose files come back}"
export PYTHONPATH=$PWD
sweep() {  # GPU, name, then bench_attention's shape arguments
    local g=$1 name=$2
    shift 2
    CUDA_VISIBLE_DEVICES=$g python3 -m benchmarks.bench_attention --dtypes bf16 --head-dims 64 \
        --modes fwd_bwd --rounds 5 --sustain-s 1 --sustain-rounds 2 --time-budget-s 330 "$@" \
        --out "$OUT/gpu$g-$name-attention.json" 2>&1 \
        | grep -v -E "leaked|nanobind|refleaks" > "$OUT/sweep_gpu${g}_$name.log"
}
sweep 0 d64-s8192 --seqlens 8192 --causal true false --kv-groups 1 8 &
sweep 1 d64-causal-s2048-4096 --seqlens 2048 4096 --causal true --kv-groups 1 8 &
wait
tail -n 2 "$OUT"/sweep_gpu*.log

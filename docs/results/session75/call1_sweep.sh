#!/usr/bin/env bash
# Session 75, call 1, four H200s of one host (nvidia-h200-x4), the machine's Triton 3.6, main's
# kernels: issue 4's 24 target shapes with every peer in one call, one sweep per GPU at the same
# time (as session 68's call3_d64_sweep.sh, which ran two per call): GPU 0 D64 without a mask,
# GPU 1 D64 causal, GPU 2 D128 without a mask, GPU 3 D128 causal. OUT set.
set -uo pipefail
: "${OUT:?set OUT to the folder whose files come back}"
export PYTHONPATH=$PWD
g=0
for d in 64 128; do
    for causal in false true; do
        CUDA_VISIBLE_DEVICES=$g python3 -m benchmarks.bench_attention --dtypes bf16 \
            --seqlens 2048 4096 8192 --causal "$causal" --kv-groups 1 8 --modes fwd_bwd \
            --rounds 5 --sustain-s 1 --sustain-rounds 2 --time-budget-s 420 --head-dims "$d" \
            --out "$OUT/gpu$g-d$d-causal-$causal-attention.json" 2>&1 \
            | grep -v -E "leaked|nanobind|refleaks" > "$OUT/sweep_gpu$g.log" &
        g=$((g + 1))
    done
done
wait
nvidia-smi --query-gpu=index,name,driver_version,power.limit --format=csv,noheader > "$OUT/gpu.txt"
for g in 0 1 2 3; do echo "== GPU $g"; cat "$OUT/sweep_gpu$g.log"; done > "$OUT/sweeps.log"
rm "$OUT"/sweep_gpu*.log
tail -n 5 "$OUT/sweeps.log"

#!/usr/bin/env bash
# Session 78, call 2, two H200s of one host (nvidia-h200-x2), the machine's Triton 3.6, branch v78a-raw-max:
# issue 4's 12 target shapes without a mask with every peer, one sweep per GPU at the same time
# (session 75's call1_sweep.sh, its two groups without a mask): GPU 0 D64, GPU 1 D128. v76c
# changed the Triton TMA dQ these D64 shapes run; session 76 timed only the causal ones. OUT set.
set -uo pipefail
: "${OUT:?set OUT to the folder whose files come back}"
export PYTHONPATH=$PWD
g=0
for d in 64 128; do
    CUDA_VISIBLE_DEVICES=$g python3 -m benchmarks.bench_attention --dtypes bf16 \
        --seqlens 2048 4096 8192 --causal false --kv-groups 1 8 --modes fwd_bwd \
        --rounds 5 --sustain-s 1 --sustain-rounds 2 --time-budget-s 420 --head-dims "$d" \
        --out "$OUT/gpu$g-d$d-nomask-attention.json" 2>&1 \
        | grep -v -E "leaked|nanobind|refleaks" > "$OUT/sweep_gpu$g.log" &
    g=$((g + 1))
done
wait
nvidia-smi --query-gpu=index,name,driver_version,power.limit --format=csv,noheader > "$OUT/gpu.txt"
for g in 0 1; do echo "== GPU $g"; cat "$OUT/sweep_gpu$g.log"; done > "$OUT/sweeps.log"
rm "$OUT"/sweep_gpu*.log
tail -n 5 "$OUT/sweeps.log"

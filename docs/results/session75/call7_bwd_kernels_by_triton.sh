#!/usr/bin/env bash
# Session 75, call 7, two H200s of one host (nvidia-h200-x2), main's kernels: the D64 causal MHA
# S 2048 backward kernels alone (benchmarks.tune_kernel --grid table: every dQ and dK/dV table
# entry, do_bench medians), Triton 3.6 on GPU 0 and Triton 3.9 (carried in) on GPU 1 at the same
# time: which kernel holds 3.9's 3-5% backward lead (call 6). No call was left to stage 3.9's
# ptxas-blackwell, so 3.9 builds sm_90 here with PyTorch's CUDA 13.0 ptxas (gpu/carried_triton.sh);
# session 61 found the dK/dV's spills and loop sizes follow the Triton version, not the ptxas.
# Run with carry [".t39"]. OUT set.
set -uo pipefail
: "${OUT:?set OUT to the folder whose files come back}"
export PYTHONPATH=$PWD
tune() {  # $1 GPU, $2 file stem
    CUDA_VISIBLE_DEVICES=$1 python3 -m benchmarks.tune_kernel --parts dq dkdv --cases 64:1:1 \
        --seqlen 2048 --grid table --time-budget-s 140 --out "$OUT/$2.json" 2>&1 \
        | grep -v -E "leaked|nanobind|refleaks" > "$OUT/$2.log"
}
tune 0 gpu0-bwd-kernels-triton36 &
source gpu/carried_triton.sh > "$OUT/carried_triton.txt" 2>&1 || exit 1
tune 1 gpu1-bwd-kernels-triton39
wait
tail -n 20 "$OUT"/*.log; cat "$OUT/carried_triton.txt"

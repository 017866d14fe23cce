#!/usr/bin/env bash
# Session 76, call 4, two H200s of one host: v76b (this tree) against main's kernels (a copy as
# package kbase in .variants/main), gpu/backward_ab.py (the whole backward of both packages on the
# same inputs, the tables' first entries, 5 rotated rounds, results compared), its eight shapes;
# GPU 0 under Triton 3.6, GPU 1 under 3.9 (carried in, PyTorch's CUDA 13.0 ptxas) at the same
# time. Then GPU 0: D64 causal MHA S 2048 with 3.6's dQ pick, the pointer (128, 64, 8, 3).
# Run with carry [".t39", ".variants"]. OUT set.
set -uo pipefail
: "${OUT:?set OUT to the folder whose files come back}"
export PYTHONPATH=$PWD:$PWD/.variants/main
ab() {  # $1 GPU, $2 file stem, rest: backward_ab arguments
    local gpu=$1 stem=$2; shift 2
    CUDA_VISIBLE_DEVICES=$gpu python3 gpu/backward_ab.py --base kbase --out "$OUT/$stem.json" "$@" \
        2>&1 | grep -v -E "leaked|nanobind|refleaks" > "$OUT/$stem.log"
}
(
    source gpu/carried_triton.sh > "$OUT/carried_triton.txt" 2>&1 || exit 1
    ab 1 ab_v76b_triton39
) &
ab 0 ab_v76b_triton36
ab 0 ab_v76b_triton36_dq_pointer --shape 2048:8:32:32:64:1 --tiles dq=128,64,8,3,0 \
    --tiles dkdv=64,64,4,3,1
wait
cat "$OUT"/ab_*.log | cut -c1-200; cat "$OUT/carried_triton.txt"

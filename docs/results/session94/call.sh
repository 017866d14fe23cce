#!/usr/bin/env bash
# Session 94 (one H200, torch 2.11): split_columns in the Gluon forward's and dQ's masks
# (84a593a) against main before it (700f520; its flash_fwd_hopper.py in .ab/, its package in
# .ab/base), under the machine's Triton 3.6 and a carried 3.9.0. One call a step, one warm machine:
#   STEP=one    carry [".gpu_carry", ".t39s/a", ".t39b"]: stage ptxas-blackwell and 3.9.0's first
#               half; the GPU suite (3.6); the Gluon forward A/B under 3.6 (bit for bit, timed)
#   STEP=two    carry [".t39s/b"]: unpack 3.9.0; the same A/B under it
#   STEP=three  under 3.6: the A/B timed only (S 8192 and 4096); issue 4's d64-causal group at S
#               4096 and 8192, ours with and without the fix, at the change and at 700f520
# OUT set.
set -uo pipefail
: "${OUT:?set OUT to the folder whose files come back}"
: "${STEP:?one, two or three}"
export HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
quiet() { grep -v -E "leaked|nanobind|refleaks|skipped remainder"; }
fwd_ab() {  # $1 the run's name; the A/B at causal S 2048-8192, D64 and D128 (or AB_ARGS)
    PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} timeout -k 10 "${AB_S:-300}" python3 \
        gpu/hopper_fwd_ab.py --base .ab/base_flash_fwd_hopper.py --out "$OUT/$1.json" \
        --budget-s "$((${AB_S:-300} - 90))" --causal true ${AB_ARGS:---seqlens 2048 4096 8192} 2>&1 \
        | quiet > "$OUT/$1.log"
    grep -c '"ok": true' "$OUT/$1.log"; grep '"ok": false' "$OUT/$1.log" | head -5
}
case $STEP in
    one)
        mkdir -p /tmp/carried_ptxas && cp .t39b/ptxas-blackwell.xz /tmp/carried_ptxas/ || exit 1
        bash gpu/carried_triton_halves.sh first 39 || exit 1
        python3 -m benchmarks.runinfo > "$OUT/runinfo36.txt"
        CUDA_VISIBLE_DEVICES=0 OUT=$OUT/suite TEST_TIMEOUT_S=290 bash gpu/validate_kernel.sh \
            | tail -n 4
        AB_S=230 fwd_ab fwd_ab36 ;;
    two)
        bash gpu/carried_triton_halves.sh second 39 || exit 1
        export PYTHONPATH=/tmp/carried_triton TRITON_BACKENDS_IN_TREE=1
        python3 -m benchmarks.runinfo > "$OUT/runinfo39.txt"
        AB_S=420 fwd_ab fwd_ab39 ;;
    three)  # under 3.6: the A/B timed only, then forward + backward of ours, change and base
        AB_S=200 AB_ARGS="--no-checks --seqlens 8192 4096" fwd_ab fwd_ab36_timed
        IMPLS="stable_flash stable_flash_nofix" SEQLENS="4096 8192" BUDGET_S=110 \
            bash gpu/issue4_sweep.sh 0:d64-causal 0:d64-causal:.ab/base ;;
    *) echo "one, two or three, not $STEP"; exit 2 ;;
esac

#!/usr/bin/env bash
# Session 95 (one H200, torch 2.11, Triton 3.6): v94b (the Triton kernels' masks as one interval
# a row; _hopper_ring.columns_at_most) against main before it (f6773b7, its package in .ab/base,
# carried). Call 1 ran STEP=one, carry [".gpu_carry", ".ab"]: the GPU suite at the change; issue
# 4's d64-causal group at S 2048 and 4096 (ours with and without the fix, SDPA FLASH), change then
# base. (Calls 2-4 ran gpu/issue4_sweep.sh inline: docs/results/session95/README.md.) OUT set.
set -uo pipefail
: "${OUT:?set OUT to the folder whose files come back}"
: "${STEP:?one}"
export HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
ab() {  # $1 group, then the sweep's environment: change then base, same process order
    IMPLS="${IMPLS:-stable_flash stable_flash_nofix sdpa_flash}" \
        bash gpu/issue4_sweep.sh "0:$1" "0:$1:.ab/base"
}
case $STEP in
    one)
        python3 -m benchmarks.runinfo > "$OUT/runinfo36.txt"
        CUDA_VISIBLE_DEVICES=0 OUT=$OUT/suite TEST_TIMEOUT_S=290 bash gpu/validate_kernel.sh \
            | tail -n 4
        SEQLENS="2048 4096" BUDGET_S=110 ab d64-causal ;;
    *) echo "one, not $STEP"; exit 2 ;;
esac

#!/usr/bin/env bash
# Session 89, call 1 (a fresh H200, torch 2.11, its Triton 3.6): stage 3.8.0's first half for
# call 2, then paircount.diff (the Gluon forward's tie count, two rows in one quad reduction)
# through the GPU suite and, beside main, the persistent no-mask forward routes, fix on and off
# (S 2048 and 8192, D64 and D128, MHA and GQA 8:1):
#   run(command="OUT=/tmp/c1 bash docs/results/session89/call1_stage_paircount_t36.sh; tar ...",
#       carry=[".t38s/a", ".gpu_carry"])
set -uo pipefail
: "${OUT:?set OUT to the folder whose files come back}"
mkdir -p "$OUT"
bash gpu/carried_triton_halves.sh first 38 || exit 1
bash gpu/variant_tree.sh docs/results/session89/paircount.diff || exit 1
python3 -m benchmarks.runinfo > "$OUT/runinfo.txt"
(cd /tmp/paircount && CUDA_VISIBLE_DEVICES=0 TEST_TIMEOUT_S=270 OUT=$OUT/suite \
    bash gpu/validate_kernel.sh)
SEQLENS="2048 8192" ONLY='^gluon \(128, 2, (160|240), [^)]*\) persistent' BUDGET_S=100 \
    bash docs/results/session88/routes_by_triton.sh 36@/tmp/paircount 36

#!/usr/bin/env bash
# Session 87 (one H200, torch 2.11): the fix's cost alone, stable_flash against
# stable_flash_nofix (9 rounds, do_bench medians and back to back), in fresh processes under the
# machine's Triton 3.6 or a carried one (3.8.0 here), in the order given. Each argument is
# VERSION:GROUP,
#   VERSION  36 (the machine's Triton) | 37, 38 or 39 (the Triton that gpu/carried_triton.sh
#            unpacked in /tmp/carried_triton in this or an earlier call on the same warm
#            machine; triton.txt records which)
#   GROUP    as gpu/issue4_sweep.sh's (d64-causal, d64-nomask, d128-causal, d128-nomask)
# Writes $OUT/rK-tVERSION-GROUP/ (K the argument's place): issue4_sweep.sh's files and triton.txt.
#   OUT=$OUT BUDGET_S=150 bash docs/results/session87/fixcost_by_triton.sh 36:d128-causal \
#       38:d128-causal
set -uo pipefail
: "${OUT:?set OUT to the folder whose files come back}"
k=0
for spec in "$@"; do
    k=$((k + 1)); version=${spec%%:*}; group=${spec#*:}
    dir=$OUT/r$k-t$version-$group
    mkdir -p "$dir"
    case $version in
        36) extra=() ;;
        37|38|39) [ -d /tmp/carried_triton/triton ] || { echo "no Triton unpacked"; exit 2; }
            extra=(PYTHONPATH=/tmp/carried_triton TRITON_BACKENDS_IN_TREE=1) ;;
        *) echo "unknown version $version (36, 37, 38, 39)"; exit 2 ;;
    esac
    env "${extra[@]}" python3 -c 'import triton; print(triton.__version__, triton.__file__)' \
        > "$dir/triton.txt"
    env "${extra[@]}" OUT="$dir" IMPLS="stable_flash stable_flash_nofix" ROUNDS=9 \
        BUDGET_S="${BUDGET_S:-200}" bash gpu/issue4_sweep.sh "0:$group"
done

#!/usr/bin/env bash
# Session 88 (one H200, torch 2.11): the no-mask forward's Gluon routes at the table's config,
# one program per tile and persistent, each with and without the fix in the same rounds
# (gpu/route_check.py --fix-off-too), D64 and D128, MHA and GQA 8:1, S 2048-8192, in a fresh
# process under each Triton named, in order:
#   36  the machine's Triton
#   38  the Triton 3.8.0 that gpu/carried_triton.sh unpacked in /tmp/carried_triton in this or
#       an earlier call on the same warm machine
# Writes $OUT/rK-tVERSION-routes.json and .log (K the argument's place). ROUNDS (default 5) and
# BUDGET_S (default 200, per run) set route_check's --rounds and --budget-s.
#   OUT=$OUT bash docs/results/session88/routes_by_triton.sh 38 36
set -uo pipefail
: "${OUT:?set OUT to the folder whose files come back}"
mkdir -p "$OUT"
k=0
for version in "$@"; do
    k=$((k + 1)); base=$OUT/r$k-t$version-routes
    case $version in
        36) extra=() ;;
        38) [ -d /tmp/carried_triton/triton ] || { echo "3.8.0 not unpacked"; exit 2; }
            extra=(TRITON_BACKENDS_IN_TREE=1) ;;
        *) echo "unknown version $version (36, 38)"; exit 2 ;;
    esac
    path=$PWD${extra:+:/tmp/carried_triton}
    env "${extra[@]}" PYTHONPATH="$path" python3 -c \
        'import triton; print("triton", triton.__version__, triton.__file__)' > "$base.log"
    env "${extra[@]}" PYTHONPATH="$path" python3 gpu/route_check.py --kinds fwd --fix-off-too \
        --causal false --seqlens 2048 4096 8192 --head-dims 64 128 \
        --only '^gluon \(128, 2, (160|240),' --rounds "${ROUNDS:-5}" \
        --budget-s "${BUDGET_S:-200}" --out "$base.json" >> "$base.log" 2>&1
    echo "run $k (triton $version) rc=$?" >> "$base.log"
done

#!/usr/bin/env bash
# Session 88 (one H200, torch 2.11): the no-mask forward's Gluon routes at the table's config,
# one program per tile and persistent, each with and without the fix in the same rounds
# (gpu/route_check.py --fix-off-too), D64 and D128, MHA and GQA 8:1, S 2048-8192, in a fresh
# process under each Triton named, in order. Each argument is VERSION[@TREE]:
#   VERSION  36 (the machine's Triton) | 38 (the Triton 3.8.0 that gpu/carried_triton.sh
#            unpacked in /tmp/carried_triton in this or an earlier call on the same warm machine)
#   TREE     a copy of the repository whose kernels run (default: this one), e.g. one with a
#            variant's diff applied; its last path component tags the run's files
# Writes $OUT/rK-tVERSION[-TAG]-routes.json and .log (K the argument's place). ROUNDS (default 5),
# BUDGET_S (default 200, per run), SEQLENS (default "2048 4096 8192") and ONLY (default: the
# table's configs) set route_check's --rounds, --budget-s, --seqlens and --only.
#   OUT=$OUT bash docs/results/session88/routes_by_triton.sh 38 36 38@/tmp/variant
set -uo pipefail
: "${OUT:?set OUT to the folder whose files come back}"
mkdir -p "$OUT"
k=0
repo=$PWD
for spec in "$@"; do
    version=${spec%%@*}; tree=$repo; tag=""
    [ "$spec" = "$version" ] || { tree=${spec#*@}; tag=-$(basename "$tree"); }
    k=$((k + 1)); base=$OUT/r$k-t$version$tag-routes
    case $version in
        36) extra=() ;;
        38) [ -d /tmp/carried_triton/triton ] || { echo "3.8.0 not unpacked"; exit 2; }
            extra=(TRITON_BACKENDS_IN_TREE=1) ;;
        *) echo "unknown version $version (36, 38)"; exit 2 ;;
    esac
    path=$tree${extra:+:/tmp/carried_triton}
    cd "$tree" || exit 2
    env "${extra[@]}" PYTHONPATH="$path" python3 -c \
        'import triton; print("triton", triton.__version__, triton.__file__)' > "$base.log"
    env "${extra[@]}" PYTHONPATH="$path" python3 gpu/route_check.py --kinds fwd --fix-off-too \
        --causal false --seqlens ${SEQLENS:-2048 4096 8192} --head-dims 64 128 \
        --only "${ONLY:-^gluon \(128, 2, (160|240),}" --rounds "${ROUNDS:-5}" \
        --budget-s "${BUDGET_S:-200}" --out "$base.json" >> "$base.log" 2>&1
    echo "run $k (triton $version$tag) rc=$?" >> "$base.log"
    cd "$repo" || exit 2
done

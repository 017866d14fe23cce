#!/usr/bin/env bash
# Session 88 (a warm H200 where call4_stage.sh staged 3.8.0's first half): unpack 3.8.0 as
# call2_t38.sh does, copy the repository to /tmp/NAME for each NAME in VARIANTS with NAME.diff
# (this folder) applied, then the persistent no-mask routes, fix on and off, of the trees the
# arguments name (routes_by_triton.sh's VERSION[@TREE]; S 2048 and 8192). Calls 5 and 7 through
# call5_barrier.sh and call7_diagnostics.sh; call 9:
#   OUT=$OUT VARIANTS=swap_gap bash docs/results/session88/variants_by_triton.sh \
#       38 38@/tmp/swap_gap 36 36@/tmp/swap_gap 38@/tmp/swap_gap 38
# Run with carry [".t38s/b"].
set -uo pipefail
: "${OUT:?set OUT to the folder whose files come back}" "${VARIANTS:?name the diffs}"
bash gpu/carried_triton_halves.sh second 38 || exit 1
for variant in $VARIANTS; do
    rm -rf "/tmp/$variant" && mkdir "/tmp/$variant"
    tar --exclude=./.t38s --exclude=./.t37s -cf - . | tar -C "/tmp/$variant" -xf -
    (cd "/tmp/$variant" && { patch -p1 < "docs/results/session88/$variant.diff" \
        || git apply "docs/results/session88/$variant.diff"; }) \
        >> "$OUT/patch.txt" 2>&1 || { cat "$OUT/patch.txt"; exit 1; }
done
SEQLENS="2048 8192" ONLY='^gluon \(128, 2, (160|240), [^)]*\) persistent' \
    bash docs/results/session88/routes_by_triton.sh "$@"
cat "$OUT/carried_triton.txt" "$OUT/patch.txt"

#!/usr/bin/env bash
# Session 88 (a warm H200 where call4_stage.sh staged 3.8.0's first half): unpack 3.8.0 as
# call2_t38.sh does, copy the repository to /tmp/NAME for each NAME in VARIANTS with NAME.diff
# (this folder) applied (gpu/variant_tree.sh since session 89: the same copy and patch), then the
# persistent no-mask routes, fix on and off, of the trees the arguments name
# (routes_by_triton.sh's VERSION[@TREE]; S 2048 and 8192). Calls 5 and 7 through
# call5_barrier.sh and call7_diagnostics.sh; call 9:
#   OUT=$OUT VARIANTS=swap_gap bash docs/results/session88/variants_by_triton.sh \
#       38 38@/tmp/swap_gap 36 36@/tmp/swap_gap 38@/tmp/swap_gap 38
# Run with carry [".t38s/b"]. The diffs are against session 88's main (`62fb4d5`);
# loop_barrier.diff and swap_gap.diff do not apply to main from `4318280` on.
set -uo pipefail
: "${OUT:?set OUT to the folder whose files come back}" "${VARIANTS:?name the diffs}"
bash gpu/carried_triton_halves.sh second 38 || exit 1
for variant in $VARIANTS; do
    bash gpu/variant_tree.sh "docs/results/session88/$variant.diff" || exit 1
done
SEQLENS="2048 8192" ONLY='^gluon \(128, 2, (160|240), [^)]*\) persistent' \
    bash docs/results/session88/routes_by_triton.sh "$@"
cat "$OUT/carried_triton.txt" "$OUT/patch.txt"

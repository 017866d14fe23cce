#!/usr/bin/env bash
# Session 88, call 7 (call 6's warm H200; call 6 ran call4_stage.sh): unpack 3.8.0 as
# call2_t38.sh does, copy the repository twice with the diagnostic diffs applied (not kernels to
# ship: diag_nocount.diff drops the tie count, every row untied; diag_nogap.diff drops the tie
# gap's arithmetic, a constant gap), then the persistent no-mask routes, fix on and off, of main
# and both diagnostics under both Tritons in turn (routes_by_triton.sh; S 2048 and 8192): which
# part of the fix's forward work 3.8.0 runs slower. Run with carry [".t38s/b"]. OUT set.
set -uo pipefail
: "${OUT:?set OUT to the folder whose files come back}"
bash gpu/carried_triton_halves.sh second 38 || exit 1
rm -rf /tmp/nocount /tmp/nogap
for variant in nocount nogap; do
    mkdir "/tmp/$variant"
    tar --exclude=./.t38s --exclude=./.t37s -cf - . | tar -C "/tmp/$variant" -xf -
    (cd "/tmp/$variant" && { patch -p1 < "docs/results/session88/diag_$variant.diff" \
        || git apply "docs/results/session88/diag_$variant.diff"; }) \
        >> "$OUT/patch.txt" 2>&1 || { cat "$OUT/patch.txt"; exit 1; }
done
[ $# -gt 0 ] || set -- 38 38@/tmp/nocount 38@/tmp/nogap 36 36@/tmp/nocount 36@/tmp/nogap
SEQLENS="2048 8192" ONLY='^gluon \(128, 2, (160|240), [^)]*\) persistent' \
    bash docs/results/session88/routes_by_triton.sh "$@"
cat "$OUT/carried_triton.txt" "$OUT/patch.txt"

#!/usr/bin/env bash
# Session 88, call 5 (call 4's warm H200): unpack 3.8.0 as call2_t38.sh does, copy the repository
# to /tmp/loop_barrier with loop_barrier.diff applied (a warpgroup barrier at the top of the
# forward's key-tile step, where 3.6's build has one and 3.8.0's not), then the persistent
# no-mask routes, fix on and off, of main and the variant under both Tritons in turn
# (routes_by_triton.sh; S 2048 and 8192). Run with carry [".t38s/b"]. OUT set.
set -uo pipefail
: "${OUT:?set OUT to the folder whose files come back}"
bash gpu/carried_triton_halves.sh second 38 || exit 1
rm -rf /tmp/loop_barrier
mkdir /tmp/loop_barrier
tar --exclude=./.t38s --exclude=./.t37s -cf - . | tar -C /tmp/loop_barrier -xf -
(cd /tmp/loop_barrier && { patch -p1 < docs/results/session88/loop_barrier.diff \
    || git apply docs/results/session88/loop_barrier.diff; }) \
    > "$OUT/patch.txt" 2>&1 || { cat "$OUT/patch.txt"; exit 1; }
[ $# -gt 0 ] || set -- 38 38@/tmp/loop_barrier 36 36@/tmp/loop_barrier 38@/tmp/loop_barrier 38
SEQLENS="2048 8192" ONLY='^gluon \(128, 2, (160|240), [^)]*\) persistent' \
    bash docs/results/session88/routes_by_triton.sh "$@"
cat "$OUT/carried_triton.txt" "$OUT/patch.txt"

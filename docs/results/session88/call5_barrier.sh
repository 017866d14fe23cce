#!/usr/bin/env bash
# Session 88, call 5 (call 4's warm H200): through variants_by_triton.sh, unpack 3.8.0, copy the
# repository to /tmp/loop_barrier with loop_barrier.diff applied (a warpgroup barrier at the top
# of the forward's key-tile step, where 3.6's build has one and 3.8.0's not), then the persistent
# no-mask routes, fix on and off, of main and the variant under both Tritons in turn (S 2048 and
# 8192). Run with carry [".t38s/b"]. OUT set.
[ $# -gt 0 ] || set -- 38 38@/tmp/loop_barrier 36 36@/tmp/loop_barrier 38@/tmp/loop_barrier 38
VARIANTS=loop_barrier bash docs/results/session88/variants_by_triton.sh "$@"

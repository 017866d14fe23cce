#!/usr/bin/env bash
# Session 88, call 7 (call 6's warm H200; call 6 ran call4_stage.sh): through
# variants_by_triton.sh, unpack 3.8.0, copy the repository twice with the diagnostic diffs
# applied (not kernels to ship: nocount.diff drops the tie count, every row untied; nogap.diff
# drops the tie gap's arithmetic, a constant gap), then the persistent no-mask routes, fix on
# and off, of main and both diagnostics under both Tritons in turn (S 2048 and 8192): which part
# of the fix's forward work 3.8.0 runs slower. Run with carry [".t38s/b"]. OUT set.
[ $# -gt 0 ] || set -- 38 38@/tmp/nocount 38@/tmp/nogap 36 36@/tmp/nocount 36@/tmp/nogap
VARIANTS="nocount nogap" bash docs/results/session88/variants_by_triton.sh "$@"

#!/usr/bin/env bash
# Session 87, call 2 (the warm H200 of call 1): join the 3.8.0 pack's halves (the first staged by
# call 1) and unpack it in /tmp/carried_triton (gpu/carried_triton.sh, in a subshell so that the
# machine's 3.6 stays the default), then the fix's cost alone under 3.8.0 for D128 and D64
# causal. Run with carry [".t38s/b"]. OUT set.
set -uo pipefail
: "${OUT:?set OUT to the folder whose files come back}"
bash gpu/carried_triton_halves.sh second 38 || exit 1
BUDGET_S=220 bash docs/results/session87/fixcost_by_triton.sh 38:d128-causal 38:d64-causal
cat "$OUT/carried_triton.txt"

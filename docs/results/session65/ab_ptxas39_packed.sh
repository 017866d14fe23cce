#!/usr/bin/env bash
# Session 65: session 64's ab_ptxas39.sh (under Triton 3.9, the D64 forward routes built by
# ptxas 13.4 against 13.0, alternating processes; GPU 0 without a mask, GPU 1 causal), its eight
# route JSONs packed into one archive (a call returns at most eight files). Stage ptxas-blackwell
# in a call before this one, carry .t39; OUT set; PASSES and BUDGET_S as there.
set -uo pipefail
: "${OUT:?set OUT to the folder whose files come back}"
mkdir -p "$OUT/ab"
OUT="$OUT/ab" bash docs/results/session64/ab_ptxas39.sh
tail -n 4 "$OUT"/ab/routes_gpu*.log
tar -C "$OUT" -czf "$OUT/ab_ptxas39.tgz" ab && rm -rf "$OUT/ab"

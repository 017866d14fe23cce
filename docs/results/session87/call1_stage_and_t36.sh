#!/usr/bin/env bash
# Session 87, call 1 (one H200, torch 2.11): stage the first half of the slimmed Triton 3.8.0
# pack for call 2 on the same warm machine (as session 86's call 1), then the fix's cost alone
# under the machine's Triton 3.6 for D128 and D64 causal (fresh processes; they also compile and
# tune for the later calls). Run with carry [".t38s/a"]. OUT set.
set -uo pipefail
: "${OUT:?set OUT to the folder whose files come back}"
bash gpu/carried_triton_halves.sh first 38 || exit 1
python3 -m benchmarks.runinfo > "$OUT/runinfo.txt"
BUDGET_S=220 bash docs/results/session87/fixcost_by_triton.sh 36:d128-causal 36:d64-causal
cat "$OUT/staged.txt"

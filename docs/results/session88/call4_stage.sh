#!/usr/bin/env bash
# Session 88, call 4 (a fresh H200: calls 1-3's went back): stage the first half of the slimmed
# Triton 3.8.0 pack for call 5 on the same warm machine. Run with carry [".t38s/a"]. OUT set.
set -uo pipefail
: "${OUT:?set OUT to the folder whose files come back}"
bash gpu/carried_triton_halves.sh first 38 || exit 1
python3 -m benchmarks.runinfo > "$OUT/runinfo.txt"
cat "$OUT/staged.txt"

#!/usr/bin/env bash
# Session 88, call 1 (one H200, torch 2.11): stage the first half of the slimmed Triton 3.8.0
# pack for call 2 on the same warm machine, then the no-mask forward's routes under the
# machine's Triton 3.6 (routes_by_triton.sh). Run with carry [".t38s/a"]. OUT set.
set -uo pipefail
: "${OUT:?set OUT to the folder whose files come back}"
bash gpu/carried_triton_halves.sh first 38 || exit 1
python3 -m benchmarks.runinfo > "$OUT/runinfo.txt"
bash docs/results/session88/routes_by_triton.sh 36
tail -n 30 "$OUT"/r1-t36-routes.log

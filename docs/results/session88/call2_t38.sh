#!/usr/bin/env bash
# Session 88, call 2 (the warm H200 of call 1): join the 3.8.0 pack's halves (the first staged by
# call 1), unpack it in /tmp/carried_triton (gpu/carried_triton.sh in a subshell, so that the
# machine's 3.6 stays the default), then the no-mask forward's routes under 3.8.0, 3.6 and 3.8.0
# again (routes_by_triton.sh). Run with carry [".t38s/b"]. OUT set.
set -uo pipefail
: "${OUT:?set OUT to the folder whose files come back}"
bash gpu/carried_triton_halves.sh second 38 || exit 1
[ $# -gt 0 ] || set -- 38 36 38
bash docs/results/session88/routes_by_triton.sh "$@"
cat "$OUT/carried_triton.txt"

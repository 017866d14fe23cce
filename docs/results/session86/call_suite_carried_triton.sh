#!/usr/bin/env bash
# Session 86, calls 2 and 4 (the warm H200 of call 1, torch 2.11): the whole GPU suite
# (gpu/validate_kernel.sh) under a carried Triton, 3.8.0 (torch 2.14's pin) or 3.7.1 (torch
# 2.12.1's and 2.13's), whose first half call 1 (3.8.0) or call 3 (3.7.1) staged:
#   VERSION=38 ... run with carry [".t38s/b", ".gpu_carry"];  VERSION=37 ... [".t37s/b", ...].
# The second half is kept in /tmp too, for a later call on the same machine.
set -uo pipefail
: "${OUT:?set OUT to the folder whose files come back}"
: "${VERSION:?38 or 37}"
bash gpu/carried_triton_halves.sh second "$VERSION" || exit 1
export PYTHONPATH=/tmp/carried_triton${PYTHONPATH:+:$PYTHONPATH} TRITON_BACKENDS_IN_TREE=1
python3 -m benchmarks.runinfo > "$OUT/runinfo.txt"
CUDA_VISIBLE_DEVICES=0 TEST_TIMEOUT_S=440 OUT=$OUT bash gpu/validate_kernel.sh
cat "$OUT/carried_triton.txt"

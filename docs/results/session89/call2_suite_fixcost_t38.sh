#!/usr/bin/env bash
# Session 89, call 2 (call 1's warm H200, which staged 3.8.0's first half): main (with the D128
# tie gap a row from Triton 3.8, 4318280) through the GPU suite under the carried 3.8.0, then the
# fix's cost in forward + backward at D128 under it, without a mask and causal:
#   run(command="OUT=/tmp/c2 bash docs/results/session89/call2_suite_fixcost_t38.sh; tar ...",
#       carry=[".t38s/b", ".gpu_carry"])
set -uo pipefail
: "${OUT:?set OUT to the folder whose files come back}"
mkdir -p "$OUT"
VERSION=38 OUT=$OUT/suite timeout 300 bash docs/results/session86/call_suite_carried_triton.sh
OUT=$OUT/fixcost BUDGET_S=120 timeout 250 bash docs/results/session87/fixcost_by_triton.sh \
    38:d128-nomask 38:d128-causal

#!/usr/bin/env bash
# Session 92, call 2, one H200, Triton 3.6 (the machine's): the fix's cost at S 16384 (issue 4's
# target set since session 91), stable_flash against stable_flash_nofix, 9 do_bench rounds and
# two 1 s back-to-back rounds (the timing S 16384 lacked), the four groups of two shapes (MHA,
# GQA 8:1) each in a fresh process (session 87's fixcost_by_triton.sh). Writes $OUT/call2.tgz.
set -uo pipefail
: "${OUT:?set OUT to the folder whose files come back}"
export HF_HUB_OFFLINE=1 TRITON_CACHE_DIR=/tmp/tc92
SEQLENS=16384 OUT=/tmp/c2 BUDGET_S=110 bash docs/results/session87/fixcost_by_triton.sh \
    36:d64-nomask 36:d64-causal 36:d128-nomask 36:d128-causal > /tmp/c2.log 2>&1
mv /tmp/c2.log /tmp/c2/
tar -C /tmp -czf $OUT/call2.tgz c2

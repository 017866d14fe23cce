#!/usr/bin/env bash
# Session 81, call 3, one H200 (the two-GPU machine was not lent), Triton 3.6: the fix's cost
# (forward + backward, `stable_flash` against `stable_flash_nofix`, 9 interleaved rounds) on the
# six D128 causal target shapes, v81b (this tree) and main (.variants/m80) in turn, A B B A, each
# run a fresh process.
# Run with carry [".variants/m80"]. OUT set; everything comes back in call3.tgz.
set -uo pipefail
: "${OUT:?set OUT to the folder whose files come back}"
export HF_HUB_OFFLINE=1
mkdir -p /tmp/c3
OUT=/tmp/c3 IMPLS="stable_flash stable_flash_nofix" ROUNDS=9 BUDGET_S=130 bash gpu/issue4_sweep.sh \
    0:d128-causal 0:d128-causal:.variants/m80 0:d128-causal:.variants/m80 0:d128-causal
tar -C /tmp/c3 -czf "$OUT/call3.tgz" .

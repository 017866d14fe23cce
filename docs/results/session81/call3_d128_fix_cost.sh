#!/usr/bin/env bash
# Session 81, call 3, two H200s of one host, Triton 3.6: the fix's cost (forward + backward,
# `stable_flash` against `stable_flash_nofix`, 9 interleaved rounds) on the twelve D128 target
# shapes, v81b (this tree) and main (.variants/m80) at the same time on the two GPUs, then
# swapped; the D128 groups without a mask once each tree.
# Run with carry [".variants/m80"]. OUT set; everything comes back in call3.tgz.
set -uo pipefail
: "${OUT:?set OUT to the folder whose files come back}"
export HF_HUB_OFFLINE=1
mkdir -p /tmp/c3
OUT=/tmp/c3 IMPLS="stable_flash stable_flash_nofix" ROUNDS=9 BUDGET_S=170 bash gpu/issue4_sweep.sh \
    0:d128-causal 0:d128-causal:.variants/m80 0:d128-nomask \
    1:d128-causal:.variants/m80 1:d128-causal 1:d128-nomask:.variants/m80
tar -C /tmp/c3 -czf "$OUT/call3.tgz" .

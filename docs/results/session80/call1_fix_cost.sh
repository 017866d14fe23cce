#!/usr/bin/env bash
# Session 80, call 1, two H200s of one host (nvidia-h200-x2), main (v78a's kernels), the
# machine's Triton 3.6: the fix's cost alone on issue 4's 24 shapes. Only stable_flash and
# stable_flash_nofix, 9 interleaved rounds, each group twice in fresh processes; GPU 0 the D64
# groups, GPU 1 the D128 groups, in order. First stages half of the Triton 3.9 pack for call 2.
# Run with carry [".t39s/a"]. OUT set.
set -uo pipefail
: "${OUT:?set OUT to the folder whose files come back}"
mkdir -p /tmp/t39stage && cp .t39s/a/* /tmp/t39stage/ && ls -l /tmp/t39stage
IMPLS="stable_flash stable_flash_nofix" ROUNDS=9 BUDGET_S=150 bash gpu/issue4_sweep.sh \
    0:d64-causal 0:d64-nomask 0:d64-causal 0:d64-nomask \
    1:d128-causal 1:d128-nomask 1:d128-causal 1:d128-nomask

#!/usr/bin/env bash
# Session 62, v61a on two GPUs of one host: ab_variant.sh with the branch's kernels/flash_bwd.py
# (.variants/v61a_flash_bwd.py) laid over a copy of the tree, S 2048, 4096 and 1024, 110 s a
# process. Calls 1 and 3 ran this script as it stood at 5378965, before ab_variant.sh took its
# steps over; the only difference since is that the timing files come back packed in
# routes.tgz. Run from the repository root with OUT set; carry .variants and .gpu_carry.
# ROUTE_ARGS, PASSES, BUDGET_S and SUITE_S as ab_variant.sh takes them.
set -uo pipefail
variant=.variants/v61a
mkdir -p "$variant/kernels" && cp .variants/v61a_flash_bwd.py "$variant/kernels/flash_bwd.py" \
    || exit 1
shapes="--kinds routes --seqlens 2048 4096 1024 --head-dims 64 --causal true false"
VARIANT=$variant NAME=v61a BUDGET_S=${BUDGET_S:-110} ROUTE_ARGS=${ROUTE_ARGS:-$shapes} \
    exec bash "$(dirname "$0")/ab_variant.sh"

#!/usr/bin/env bash
# Session 82, call 2, one H200, Triton 3.6: probe v82c (the count on the packed P at the next step's start, no gap in the loop, no
# fix-up) against main's D64 forward (.variants/m80, the same D64 code as main), timing only:
# gpu/hopper_fwd_ab.py, 5 interleaved rounds, D64, S 4096, 8192, 2048. The fix-off builds
# are the same code in both (the spread). Carry [".variants/m80"].
set -uo pipefail
: "${OUT:?set OUT to the folder whose files come back}"
W=/tmp/c2
mkdir -p $W
export HF_HUB_OFFLINE=1 PYTHONPATH=$PWD
quiet() { grep -v -E "leaked|nanobind|refleaks|skipped remainder"; }
nvidia-smi --query-gpu=index,name,driver_version,power.limit --format=csv,noheader > $W/gpu.txt
timeout -k 5 470 python3 gpu/hopper_fwd_ab.py \
    --base .variants/m80/flash_fwd_hopper_main.py --no-checks --head-dims 64 \
    --seqlens 4096 8192 2048 --rounds 5 --budget-s 440 --out $W/ab_d64.json 2>&1 \
    | quiet > $W/ab_d64.log
tar -C $W -czf "$OUT/call2.tgz" .
tail -n 30 $W/ab_d64.log

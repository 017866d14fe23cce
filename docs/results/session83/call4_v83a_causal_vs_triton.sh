#!/usr/bin/env bash
# Session 83, call 4, one H200, Triton 3.6: v83a's nested form (5692bad's forward, carried as
# .variants/v83/flash_fwd_hopper_nested.py and copied over the package's in this disposable
# copy) against main's forward (the base: .variants/v83/flash_fwd_hopper_main.py, 26709ac's,
# whose loops are main's) and the Triton forward, D64 causal at S 2048 and 8192 (the shapes call
# 1's budget left out), MHA and GQA 8:1, the fix on and off: gpu/hopper_fwd_ab.py, timing only,
# 3 interleaved rounds. Where the Triton forward takes the call (D64 causal S 2048; MHA with
# the fix below 8192), the question is whether the shorter Gluon build overtakes it.
# Carry [".variants/v83"].
set -uo pipefail
: "${OUT:?set OUT to the folder whose files come back}"
W=/tmp/c4
mkdir -p $W
export HF_HUB_OFFLINE=1 PYTHONPATH=$PWD HF_STABLE_ATTN_AUTOTUNE=0
quiet() { grep -v -E "leaked|nanobind|refleaks|skipped remainder"; }
nvidia-smi --query-gpu=index,name,driver_version,power.limit --format=csv,noheader > $W/gpu.txt
cp .variants/v83/flash_fwd_hopper_nested.py kernels/flash_fwd_hopper.py
timeout -k 5 400 python3 gpu/hopper_fwd_ab.py \
    --base .variants/v83/flash_fwd_hopper_main.py --no-checks --head-dims 64 --causal true \
    --seqlens 2048 8192 --rounds 3 --budget-s 380 --out $W/ab_d64_causal.json 2>&1 \
    | quiet > $W/ab_d64_causal.log
echo "ab exit $?" >> $W/ab_d64_causal.log
tar -C $W -czf "$OUT/call4.tgz" .
tail -n 12 $W/ab_d64_causal.log

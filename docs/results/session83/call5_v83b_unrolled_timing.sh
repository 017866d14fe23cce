#!/usr/bin/env bash
# Session 83, call 5, one H200, Triton 3.6: v83b (branch v83b-unrolled-pairs), the Gluon
# forward's unmasked key tiles two a loop trip (an odd one left over through the masked loop).
# gpu/hopper_fwd_variants.py: main's forward (ac678f7's, carried as
# .variants/v83/flash_fwd_hopper_ac678f7.py) as the reference, v83b (the package's here): the
# 20 bit-for-bit check cases, then D64 at S 4096 and 8192 (MHA and GQA 8:1, causal and not,
# the fix on and off), each at its shipped launch, 3 interleaved rounds.
# Carry [".variants/v83"].
set -uo pipefail
: "${OUT:?set OUT to the folder whose files come back}"
W=/tmp/c5
mkdir -p $W
export HF_HUB_OFFLINE=1 PYTHONPATH=$PWD HF_STABLE_ATTN_AUTOTUNE=0
quiet() { grep -v -E "leaked|nanobind|refleaks|skipped remainder"; }
nvidia-smi --query-gpu=index,name,driver_version,power.limit --format=csv,noheader > $W/gpu.txt
timeout -k 5 420 python3 gpu/hopper_fwd_variants.py \
    --variant main=.variants/v83/flash_fwd_hopper_ac678f7.py \
    --variant unrolled=kernels/flash_fwd_hopper.py \
    --launch shipped --head-dims 64 --seqlens 4096 8192 --rounds 3 --budget-s 400 \
    --out $W/variants_d64.json 2>&1 | quiet > $W/variants_d64.log
echo "variants exit $?" >> $W/variants_d64.log
tar -C $W -czf "$OUT/call5.tgz" .
grep -c '"ok": true' $W/variants_d64.log; grep '"ok": false' $W/variants_d64.log | head -3
grep shape $W/variants_d64.log

#!/usr/bin/env bash
# Session 81, call 2, two H200s of one host, Triton 3.6: v81a's Gluon forward against main's,
# timing only (call 1's forward_bits found no tensor differing): gpu/hopper_fwd_ab.py, 5
# interleaved rounds, S 4096, 8192 and 2048, with and without a causal mask, MHA and GQA 8:1, the
# fix on and off (off runs the same code in both: the spread). GPU 0 D64, GPU 1 D128.
# Run with carry [".variants/m80"]. OUT set; everything comes back in call2.tgz.
set -uo pipefail
: "${OUT:?set OUT to the folder whose files come back}"
W=/tmp/c2
mkdir -p $W
export HF_HUB_OFFLINE=1 PYTHONPATH=$PWD
quiet() { grep -v -E "leaked|nanobind|refleaks|skipped remainder"; }
for gpu in 0 1; do
    d=$([ $gpu = 0 ] && echo 64 || echo 128)
    CUDA_VISIBLE_DEVICES=$gpu timeout -k 5 480 python3 gpu/hopper_fwd_ab.py \
        --base .variants/m80/flash_fwd_hopper_main.py --no-checks --head-dims $d \
        --seqlens 4096 8192 2048 --rounds 5 --budget-s 430 --out $W/ab_d$d.json 2>&1 \
        | quiet > $W/ab_d$d.log &
done
wait
nvidia-smi --query-gpu=index,name,driver_version,power.limit --format=csv,noheader > $W/gpu.txt
tar -C $W -czf "$OUT/call2.tgz" .
tail -n 2 $W/ab_d*.log

#!/usr/bin/env bash
# Session 81, call 1, two H200s of one host, Triton 3.6: v81a (the tie gap once a lane pair)
# checked and its forward timed against main's.
# - GPU 1: the whole GPU suite (gpu/validate_kernel.sh).
# - GPU 0: gpu/forward_bits.py on this tree and on main (.variants/m80, `git archive main`) at
#   once, then compared (v81a's arithmetic is main's op for op: no tensor should differ); then
#   gpu/hopper_fwd_ab.py's timing against main's Gluon forward (no checks: forward_bits made them).
# Run with carry [".gpu_carry", ".variants/m80"]. OUT set; everything comes back in call1.tgz.
set -uo pipefail
: "${OUT:?set OUT to the folder whose files come back}"
W=/tmp/c1
mkdir -p $W
export HF_HUB_OFFLINE=1
quiet() { grep -v -E "leaked|nanobind|refleaks|skipped remainder"; }
python3 -m pip install --no-deps -q .gpu_carry/*.whl
(CUDA_VISIBLE_DEVICES=1 OUT=$W/suite TEST_TIMEOUT_S=420 bash gpu/validate_kernel.sh \
    > $W/suite.txt 2>&1) &
suite=$!
export CUDA_VISIBLE_DEVICES=0
PYTHONPATH=$PWD timeout -k 5 230 python3 gpu/forward_bits.py save --budget-s 170 \
    --out /tmp/bits_v81a.safetensors 2>&1 | quiet > $W/bits_v81a.log &
a=$!
PYTHONPATH=$PWD/.variants/m80:$PWD timeout -k 5 230 python3 gpu/forward_bits.py save \
    --budget-s 170 --out /tmp/bits_main.safetensors 2>&1 | quiet > $W/bits_main.log &
b=$!
wait $a $b
PYTHONPATH=$PWD python3 gpu/forward_bits.py compare /tmp/bits_main.safetensors \
    /tmp/bits_v81a.safetensors --out $W/forward_bits.json 2>&1 | quiet > $W/compare.log
PYTHONPATH=$PWD timeout -k 5 250 python3 gpu/hopper_fwd_ab.py \
    --base .variants/m80/flash_fwd_hopper_main.py --no-checks --head-dims 64 128 \
    --seqlens 4096 8192 --budget-s 210 --out $W/ab_random.json 2>&1 | quiet > $W/ab_random.log
wait $suite
nvidia-smi --query-gpu=index,name,driver_version,power.limit --format=csv,noheader > $W/gpu.txt
tar -C $W -czf "$OUT/call1.tgz" .
tail -n 3 $W/bits_*.log; tail -n 15 $W/compare.log; tail -n 4 $W/ab_random.log
cat $W/suite.txt | tail -n 12

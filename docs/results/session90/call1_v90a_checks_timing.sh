#!/usr/bin/env bash
# Session 90, call 1, one H200, Triton 3.6 (the machine's): v90a (v90a.diff: a row's lanes count
# their scores against their own maximum's floor while they exchange maxima) checked and its
# Gluon forward timed against main's.
# - The GPU suite in the variant tree (/tmp/v90a, gpu/variant_tree.sh), beside
#   gpu/forward_bits.py on the variant and on main at once, then compared (v90a's tie decisions
#   are main's: no tensor should differ).
# - Then gpu/hopper_fwd_ab.py in the variant tree against main's kernels/flash_fwd_hopper.py, no
#   checks (forward_bits made them), D64 and D128, S 4096, 8192 and 2048, 3 rounds.
# Run from main's tree with carry [".gpu_carry"]. OUT set; everything comes back in call1.tgz.
set -uo pipefail
: "${OUT:?set OUT to the folder whose files come back}"
W=/tmp/c1
mkdir -p $W
export HF_HUB_OFFLINE=1
quiet() { grep -v -E "leaked|nanobind|refleaks|skipped remainder"; }
ROOT=$PWD
OUT=$W bash gpu/variant_tree.sh docs/results/session90/v90a.diff || exit 1
python3 -m pip install --no-deps -q .gpu_carry/*.whl
(cd /tmp/v90a && OUT=$W/suite TEST_TIMEOUT_S=330 WORKERS=10 bash gpu/validate_kernel.sh \
    > $W/suite.txt 2>&1) &
suite=$!
PYTHONPATH=/tmp/v90a timeout -k 5 200 python3 gpu/forward_bits.py save --budget-s 140 \
    --out /tmp/bits_v90a.safetensors 2>&1 | quiet > $W/bits_v90a.log &
a=$!
PYTHONPATH=$ROOT timeout -k 5 200 python3 gpu/forward_bits.py save --budget-s 140 \
    --out /tmp/bits_main.safetensors 2>&1 | quiet > $W/bits_main.log &
b=$!
wait $a $b
PYTHONPATH=$ROOT python3 gpu/forward_bits.py compare /tmp/bits_main.safetensors \
    /tmp/bits_v90a.safetensors --out $W/forward_bits.json 2>&1 | quiet > $W/compare.log
wait $suite
(cd /tmp/v90a && PYTHONPATH=/tmp/v90a timeout -k 5 230 python3 gpu/hopper_fwd_ab.py \
    --base $ROOT/kernels/flash_fwd_hopper.py --no-checks --head-dims 64 128 \
    --seqlens 4096 8192 2048 --rounds 3 --budget-s 200 --out $W/ab_random.json 2>&1 \
    | quiet > $W/ab_random.log)
nvidia-smi --query-gpu=index,name,driver_version,power.limit --format=csv,noheader > $W/gpu.txt
tar -C $W -czf "$OUT/call1.tgz" .
tail -n 3 $W/bits_*.log; tail -n 15 $W/compare.log; tail -n 6 $W/ab_random.log
tail -n 12 $W/suite.txt

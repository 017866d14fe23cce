#!/usr/bin/env bash
# Session 83, call 2, one H200, Triton 3.6: main at the refactor commit (_gap_constants in
# the Gluon forward: same instructions, 3 of 16 builds reorder index math outside the loops).
# The forward's GPU tests and the tie tests; then gpu/hopper_fwd_variants.py's bit-for-bit
# checks of this tree's forward against the forward before the refactor (no timing).
# Carry [".variants/v83", ".gpu_carry"].
set -uo pipefail
: "${OUT:?set OUT to the folder whose files come back}"
W=/tmp/c2
mkdir -p $W
export HF_HUB_OFFLINE=1 PYTHONPATH=$PWD HF_STABLE_ATTN_AUTOTUNE=0
quiet() { grep -v -E "leaked|nanobind|refleaks|skipped remainder"; }
nvidia-smi --query-gpu=index,name,driver_version,power.limit --format=csv,noheader > $W/gpu.txt
python3 -m pip install --no-deps -q .gpu_carry/*.whl
timeout -k 5 200 python3 -m pytest -m gpu -q --tb=short -p no:cacheprovider -rfE -n 12 \
    tests/gpu/test_hopper_forward.py tests/gpu/test_sinks_gpu.py \
    "tests/gpu/test_kernel_gpu.py::test_tie_decisions_match_the_shift_rule" \
    "tests/gpu/test_kernel_gpu.py::test_structural_no_p_rounds_to_one" > $W/tests.log 2>&1
echo "pytest exit $?" >> $W/tests.log
timeout -k 5 200 python3 gpu/hopper_fwd_variants.py \
    --variant before=.variants/v83/flash_fwd_hopper_main.py \
    --variant after=kernels/flash_fwd_hopper.py \
    --head-dims 64 --seqlens 4096 --budget-s 0 --out $W/checks.json 2>&1 | quiet > $W/checks.log
echo "variants exit $?" >> $W/checks.log
tar -C $W -czf "$OUT/call2.tgz" .
tail -n 3 $W/tests.log
grep -c '"ok": true' $W/checks.log; grep '"ok": false' $W/checks.log | head -5; tail -n 2 $W/checks.log

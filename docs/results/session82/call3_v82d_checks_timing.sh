#!/usr/bin/env bash
# Session 82, call 3, one H200, Triton 3.6: v82d (f08e37f). First the Gluon forward's GPU tests
# (tests/gpu/test_hopper_forward.py, test_sinks_gpu.py, and test_kernel_gpu.py's tie tests) in
# parallel workers; then gpu/hopper_fwd_ab.py against main's forward (.variants/m80/flash_fwd_hopper_v81b.py, main's kernels/flash_fwd_hopper.py
# at 00fbf8b), 3 interleaved rounds,
# S 4096, 8192, 2048, D64 then D128, timing only.
# Carry [".variants/m80", ".gpu_carry"].
set -uo pipefail
: "${OUT:?set OUT to the folder whose files come back}"
W=/tmp/c3
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
for d in 64 128; do
    timeout -k 5 190 python3 gpu/hopper_fwd_ab.py \
        --base .variants/m80/flash_fwd_hopper_v81b.py --no-checks --head-dims $d \
        --seqlens 4096 8192 2048 --rounds 3 --budget-s 170 --out $W/ab_d$d.json 2>&1 \
        | quiet > $W/ab_d$d.log
done
tar -C $W -czf "$OUT/call3.tgz" .
tail -n 25 $W/tests.log

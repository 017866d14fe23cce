#!/usr/bin/env bash
# Session 76, call 7, one H200, main with v76c under Triton 3.9 (carried in, PyTorch's CUDA 13.0
# ptxas: no call was left to stage ptxas-blackwell): the GPU tests of the Triton kernels that
# v76c touches: test_kernel_gpu.py's sweep and TMA backward tests, test_table_configs.py's dQ
# and dK/dV entries. The device time left allowed no timing.
# Run with carry [".t39", ".gpu_carry"]. OUT set.
set -uo pipefail
: "${OUT:?set OUT to the folder whose files come back}"
python3 -m pip install --no-deps -q .gpu_carry/*.whl
source gpu/carried_triton.sh > "$OUT/carried_triton.txt" 2>&1 || exit 1
export PYTHONPATH=$PYTHONPATH:$PWD HF_HUB_OFFLINE=1 HF_STABLE_ATTN_AUTOTUNE=0
timeout -k 5 150 python3 -m pytest -m gpu -q -p no:cacheprovider -rfE -n 12 \
    tests/gpu/test_kernel_gpu.py tests/gpu/test_table_configs.py \
    -k "tma_backward or sweep or (table_config and (dq or dkdv))" \
    2>&1 | grep -v -E "leaked|nanobind|refleaks" > "$OUT/gpu_tests_triton39.log"
tail -n 6 "$OUT/gpu_tests_triton39.log"
cat "$OUT/carried_triton.txt"

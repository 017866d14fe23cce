#!/usr/bin/env bash
# Session 76, call 7, one H200, main with v76c under Triton 3.9 (carried in, PyTorch's CUDA 13.0
# ptxas: no call was left to stage ptxas-blackwell): the GPU tests of the Triton kernels that
# v76c touches (tests/gpu/test_kernel_gpu.py, and test_table_configs.py's dQ and dK/dV entries),
# then D64 causal S 2048 MHA and GQA 8:1 with every peer in what time is left.
# Run with carry [".t39", ".gpu_carry"]. OUT set.
set -uo pipefail
: "${OUT:?set OUT to the folder whose files come back}"
python3 -m pip install --no-deps -q .gpu_carry/*.whl
source gpu/carried_triton.sh > "$OUT/carried_triton.txt" 2>&1 || exit 1
export PYTHONPATH=$PYTHONPATH:$PWD HF_HUB_OFFLINE=1 HF_STABLE_ATTN_AUTOTUNE=0
timeout -k 5 130 python3 -m pytest -m gpu -q -p no:cacheprovider -rfE -n 12 \
    tests/gpu/test_kernel_gpu.py tests/gpu/test_table_configs.py -k "not table_config or dq or dkdv" \
    2>&1 | grep -v -E "leaked|nanobind|refleaks" > "$OUT/gpu_tests_triton39.log"
tail -n 6 "$OUT/gpu_tests_triton39.log"
unset HF_STABLE_ATTN_AUTOTUNE
python3 -m benchmarks.bench_attention --dtypes bf16 --seqlens 2048 --causal true --kv-groups 1 8 \
    --modes fwd_bwd --rounds 5 --sustain-s 1 --sustain-rounds 2 --time-budget-s 75 --head-dims 64 \
    --out "$OUT/d64-causal-s2048-triton39-attention.json" 2>&1 \
    | grep -v -E "leaked|nanobind|refleaks" > "$OUT/sweep_triton39.log"
tail -n 4 "$OUT/sweep_triton39.log"; cat "$OUT/carried_triton.txt"

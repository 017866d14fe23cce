#!/usr/bin/env bash
# Session 79, call 6, one H200, Triton 3.9 carried in (PyTorch's CUDA 13.0 ptxas), main at v78a:
# the forward's GPU tests, the first at v78a under 3.9: tests/gpu/test_hopper_forward.py (the
# float64 rule, the Triton forward's bits, tie rows) and test_kernel_gpu.py's tests of the fix,
# softcap, masked rows and key padding. The pack (gpu/slim_triton.sh 3.9.0, split in two halves
# as session 77's) and the repository pass the 64 MiB a call carries, so call 5, on the same
# warm machine, staged the first half:
#   run(command="mkdir -p /tmp/t39stage && cp .t39s/a/* /tmp/t39stage/", carry=[".t39s/a"])
# Run with carry [".t39s/b", ".gpu_carry"]. OUT set.
set -uo pipefail
: "${OUT:?set OUT to the folder whose files come back}"
python3 -m pip install --no-deps -q .gpu_carry/*.whl
cat /tmp/t39stage/t39part_aa .t39s/b/t39part_ab > /tmp/triton.tar.xz || exit 1
TRITON_PACK=/tmp/triton.tar.xz source gpu/carried_triton.sh > "$OUT/carried_triton.txt" 2>&1 \
    || { cat "$OUT/carried_triton.txt"; exit 1; }
export PYTHONPATH=$PYTHONPATH:$PWD HF_HUB_OFFLINE=1
quiet() { grep -v -E "leaked|nanobind|refleaks|skipped remainder"; }
timeout -k 5 240 python3 -m pytest -m gpu -q -p no:cacheprovider -rfE -n 8 \
    tests/gpu/test_hopper_forward.py tests/gpu/test_kernel_gpu.py \
    -k "test_hopper_forward or structural or tie_decisions or softcap or fully_masked or key_padding" \
    2>&1 | quiet > "$OUT/forward_tests_triton39.log"
tail -n 6 "$OUT/forward_tests_triton39.log"
cat "$OUT/carried_triton.txt"

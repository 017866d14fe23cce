#!/usr/bin/env bash
# Session 77, call 1, one H200, Triton 3.9 carried in (PyTorch's CUDA 13.0 ptxas): v77b, the
# D64/D128 Gluon forward's per-warp skip of the tie count (gl.inline_asm, Triton 3.9 only).
# 1. tests/gpu/test_hopper_forward.py (the float64 rule, the Triton forward's bits, tie rows);
# 2. gpu/hopper_fwd_ab.py against main's kernels/flash_fwd_hopper.py (bit for bit, then timed),
#    random inputs, then with an attention sink at key 0.
# The pack (gpu/slim_triton.sh's, recompressed without the headers beside cuda.h, libproton and
# gsan.ll) and the repository passed the 64 MiB a call carries: a call just before, on the same
# warm machine, staged its first half:
#   run(command="mkdir -p /tmp/t39stage && cp .t39s/a/* /tmp/t39stage/", carry=[".t39s/a"])
# Run with carry [".t39s/b", ".gpu_carry", ".variants/s77"]. OUT set.
set -uo pipefail
: "${OUT:?set OUT to the folder whose files come back}"
python3 -m pip install --no-deps -q .gpu_carry/*.whl
cat /tmp/t39stage/t39part_aa .t39s/b/t39part_ab > /tmp/triton.tar.xz || exit 1
TRITON_PACK=/tmp/triton.tar.xz source gpu/carried_triton.sh > "$OUT/carried_triton.txt" 2>&1 \
    || { cat "$OUT/carried_triton.txt"; exit 1; }
export PYTHONPATH=$PYTHONPATH:$PWD HF_HUB_OFFLINE=1
quiet() { grep -v -E "leaked|nanobind|refleaks|skipped remainder"; }
timeout -k 5 170 python3 -m pytest -m gpu -q -p no:cacheprovider -rfE -n 8 \
    tests/gpu/test_hopper_forward.py 2>&1 | quiet > "$OUT/hopper_forward_tests.log"
tail -n 4 "$OUT/hopper_forward_tests.log"
base=.variants/s77/flash_fwd_hopper_main.py
timeout -k 5 230 python3 gpu/hopper_fwd_ab.py --base $base --head-dims 64 \
    --seqlens 4096 8192 2048 --budget-s 200 --out "$OUT/ab_random.json" 2>&1 | quiet \
    > "$OUT/ab_random.log"
tail -n 3 "$OUT/ab_random.log"
timeout -k 5 140 python3 gpu/hopper_fwd_ab.py --base $base --head-dims 64 --seqlens 8192 4096 \
    --inputs sink --budget-s 110 --out "$OUT/ab_sink.json" 2>&1 | quiet > "$OUT/ab_sink.log"
tail -n 3 "$OUT/ab_sink.log"
cat "$OUT/carried_triton.txt"

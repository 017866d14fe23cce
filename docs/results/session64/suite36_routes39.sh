#!/usr/bin/env bash
# Session 64, device call 2, on two H200s of one host, after a call that staged ptxas-blackwell
# (gpu/carried_triton.sh). GPU 1: the GPU suite under the machine's Triton 3.6. GPU 0 at the
# same time: every D64 forward route with and without the fix under the carried Triton 3.9
# (gpu/route_check.py --kinds fwd --fix-off-too). Carry .t39 and .gpu_carry; OUT set.
set -uo pipefail
: "${OUT:?set OUT to the folder whose files come back}"
python3 -m pip install --no-deps -q .gpu_carry/*.whl
(
    CUDA_VISIBLE_DEVICES=1 OUT="$OUT/suite" TEST_TIMEOUT_S=420 bash gpu/validate_kernel.sh \
        > "$OUT/suite.txt" 2>&1
) &
(
    source gpu/carried_triton.sh > "$OUT/carried_triton.txt" 2>&1 || exit 1
    CUDA_VISIBLE_DEVICES=0 python3 -m gpu.route_check --kinds fwd --fix-off-too \
        --seqlens 2048 4096 --head-dims 64 --causal true false --rounds 3 --budget-s 400 \
        --out "$OUT/fwd_fix_triton39.json" 2>&1 | grep -v "leaked" > "$OUT/routes_triton39.log"
)
wait

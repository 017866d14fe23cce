#!/usr/bin/env bash
# Session 64, device call 4, on two H200s of one host under the carried Triton 3.9 (after a call that
# staged ptxas-blackwell): every D64 forward route with and without the fix, GPU 0 at S 8192,
# GPU 1 at S 2048 and 4096 again (device call 2 timed those beside the GPU suite). Carry .t39; OUT set.
set -uo pipefail
: "${OUT:?set OUT to the folder whose files come back}"
source gpu/carried_triton.sh > "$OUT/carried_triton.txt" 2>&1 || exit 1
for gpu in 0 1; do
    seqlens=$([ "$gpu" = 0 ] && echo 8192 || echo 2048 4096)
    CUDA_VISIBLE_DEVICES=$gpu python3 -m gpu.route_check --kinds fwd --fix-off-too \
        --seqlens $seqlens --head-dims 64 --causal true false --rounds 3 --budget-s 330 \
        --out "$OUT/fwd_fix_gpu${gpu}_triton39.json" 2>&1 | grep -v "leaked" \
        > "$OUT/routes_gpu${gpu}_triton39.log" &
done
wait

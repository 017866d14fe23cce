#!/usr/bin/env bash
# Session 64, on two H200s of one host under the carried Triton 3.9 (after a call that staged
# ptxas-blackwell): the D64 causal forward routes at S 4096 with and without the fix on a quiet
# host, MHA on GPU 0 and again on GPU 1 at the same time (device call 2 had the Triton forward
# 5.6% ahead of the Gluon launch there, beside the GPU suite). Carry .t39; OUT set.
set -uo pipefail
: "${OUT:?set OUT to the folder whose files come back}"
source gpu/carried_triton.sh > "$OUT/carried_triton.txt" 2>&1 || exit 1
for gpu in 0 1; do
    CUDA_VISIBLE_DEVICES=$gpu python3 -m gpu.route_check --kinds fwd --fix-off-too \
        --seqlens 4096 --head-dims 64 --causal true --rounds 3 --budget-s 120 \
        --out "$OUT/fwd_fix_gpu${gpu}_triton39.json" 2>&1 \
        | grep -v -E "leaked|nanobind|refleaks" > "$OUT/routes_gpu${gpu}_triton39.log" &
done
wait

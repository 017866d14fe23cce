#!/usr/bin/env bash
# Session 65, on two H200s of one host under the carried Triton 3.9 (after a call that staged
# ptxas-blackwell), at v65a: GPU 0 v65a_route_ab.py (the D64 causal forward route at S 4096 both
# ways in one process); GPU 1 at the same time the five D64 target shapes that call 2's sweep ran
# beside the GPU suite (S 2048, and S 4096 causal MHA), again on a quieter host. Carry .t39.
set -uo pipefail
: "${OUT:?set OUT to the folder whose files come back}"
source gpu/carried_triton.sh > "$OUT/carried_triton.txt" 2>&1 || exit 1
export PYTHONPATH=$PYTHONPATH:$PWD  # after the carried Triton
(
    for args in "--seqlens 2048 --causal true false --kv-groups 1 8" \
                "--seqlens 4096 --causal true --kv-groups 1"; do
        CUDA_VISIBLE_DEVICES=1 python3 -m benchmarks.bench_attention --dtypes bf16 $args \
            --modes fwd_bwd --rounds 5 --time-budget-s 200 --head-dims 64 \
            --out "$OUT/gpu1-$(echo $args | cut -d' ' -f2)-triton39-attention.json" 2>&1
    done | grep -v -E "leaked|nanobind|refleaks" > "$OUT/sweep_gpu1_triton39.log"
) &
CUDA_VISIBLE_DEVICES=0 python3 docs/results/session65/v65a_route_ab.py "$OUT/v65a_route_ab.json" \
    2>&1 | grep -v -E "leaked|nanobind|refleaks" > "$OUT/v65a_route_ab.log"
wait
cat "$OUT/v65a_route_ab.log"; tail -n 3 "$OUT/sweep_gpu1_triton39.log"

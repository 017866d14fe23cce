#!/usr/bin/env bash
# Session 65, on two H200s of one host under the carried Triton 3.9 (after a call that staged
# ptxas-blackwell), at the branch v65a (D64 causal MHA calls with the fix below 8192 rows take the
# Triton forward under 3.9): GPU 1 the GPU suite; GPU 0 at the same time the twelve D64 target
# shapes of issue 4 with every peer, the first sweep under 3.9 after session 64's second half of
# the D64 swap (fix off: persistent). Carry .t39 and .gpu_carry; OUT set. SWEEP_BUDGET_S (500).
set -uo pipefail
: "${OUT:?set OUT to the folder whose files come back}"
source gpu/carried_triton.sh > "$OUT/carried_triton.txt" 2>&1 || exit 1
python3 -m pip install --no-deps -q .gpu_carry/*.whl
(
    CUDA_VISIBLE_DEVICES=1 OUT="$OUT/suite" TEST_TIMEOUT_S=480 bash gpu/validate_kernel.sh \
        > "$OUT/suite.txt" 2>&1
) &
CUDA_VISIBLE_DEVICES=0 python3 -m benchmarks.bench_attention --dtypes bf16 \
    --seqlens 2048 4096 8192 --causal true false --kv-groups 1 8 --modes fwd_bwd --rounds 5 \
    --time-budget-s "${SWEEP_BUDGET_S:-500}" --head-dims 64 \
    --out "$OUT/gpu0-triton39-attention.json" 2>&1 \
    | grep -v -E "leaked|nanobind|refleaks" > "$OUT/sweep_gpu0_triton39.log"
wait

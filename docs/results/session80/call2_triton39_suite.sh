#!/usr/bin/env bash
# Session 80, call 2, the same two H200s (call 1 staged the pack's first part), main's kernels
# under Triton 3.9 carried in (PyTorch's CUDA 13.0 ptxas), the first whole GPU suite at v78a
# under 3.9. At the same time:
#   GPU 0: the GPU suite (gpu/validate_kernel.sh);
#   GPU 1: the six D64 causal shapes with every peer (gpu/issue4_sweep.sh).
# Run with carry [".t39s/b", ".gpu_carry"]. OUT set.
set -uo pipefail
: "${OUT:?set OUT to the folder whose files come back}"
TRITON_PACK="/tmp/t39stage/t39part_aa .t39s/b/t39part_ab" source gpu/carried_triton.sh \
    > "$OUT/carried_triton.txt" 2>&1 || { cat "$OUT/carried_triton.txt"; exit 1; }
export PYTHONPATH=$PYTHONPATH:$PWD
BUDGET_S=400 OUT=$OUT bash gpu/issue4_sweep.sh 1:d64-causal > "$OUT/sweep.txt" 2>&1 &
CUDA_VISIBLE_DEVICES=0 TEST_TIMEOUT_S=440 OUT=$OUT bash gpu/validate_kernel.sh
wait
cat "$OUT/carried_triton.txt"; tail -n 3 "$OUT/sweep.txt"

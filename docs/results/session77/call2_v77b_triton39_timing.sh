#!/usr/bin/env bash
# Session 77, call 2, one H200, Triton 3.9 carried in (PyTorch's CUDA 13.0 ptxas), v77b:
# 1. gpu/hopper_fwd_ab.py against main's Gluon forward on random inputs, timing only (call 1 made
#    the bit-for-bit checks on these sources: 20 of 20 equal, twice);
# 2. benchmarks.bench_attention, D64 forward + backward, ours with and without the fix and FA2
#    (the fix's cost as issue 4 counts it);
# 3. tests/gpu/test_sinks_gpu.py (the Gluon forward folds the sinks).
# Staged as call 1's: run(command="mkdir -p /tmp/t39stage && cp .t39s/a/* /tmp/t39stage/",
# carry=[".t39s/a"]) just before. Run with carry [".t39s/b", ".gpu_carry", ".variants/s77"]. OUT set.
set -uo pipefail
: "${OUT:?set OUT to the folder whose files come back}"
python3 -m pip install --no-deps -q .gpu_carry/*.whl
cat /tmp/t39stage/t39part_aa .t39s/b/t39part_ab > /tmp/triton.tar.xz || exit 1
TRITON_PACK=/tmp/triton.tar.xz source gpu/carried_triton.sh > "$OUT/carried_triton.txt" 2>&1 \
    || { cat "$OUT/carried_triton.txt"; exit 1; }
export PYTHONPATH=$PYTHONPATH:$PWD HF_HUB_OFFLINE=1
quiet() { grep -v -E "leaked|nanobind|refleaks|skipped remainder"; }
timeout -k 5 200 python3 gpu/hopper_fwd_ab.py --base .variants/s77/flash_fwd_hopper_main.py \
    --no-checks --head-dims 64 --seqlens 4096 8192 2048 --budget-s 170 \
    --out "$OUT/ab_random.json" 2>&1 | quiet > "$OUT/ab_random.log"
tail -n 2 "$OUT/ab_random.log"
timeout -k 5 300 python3 -m benchmarks.bench_attention --dtypes bf16 --seqlens 4096 8192 2048 \
    --head-dims 64 --causal false true --kv-groups 1 8 --modes fwd_bwd --rounds 5 \
    --impls stable_flash stable_flash_nofix sdpa_flash --time-budget-s 250 \
    --out "$OUT/d64-attention.json" 2>&1 | quiet > "$OUT/bench.log"
tail -n 3 "$OUT/bench.log"
timeout -k 5 80 python3 -m pytest -m gpu -q -p no:cacheprovider -rfE -n 8 \
    tests/gpu/test_sinks_gpu.py 2>&1 | quiet > "$OUT/sinks_tests.log"
tail -n 2 "$OUT/sinks_tests.log"
cat "$OUT/carried_triton.txt"

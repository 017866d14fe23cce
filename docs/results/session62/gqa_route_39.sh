#!/usr/bin/env bash
# Session 62, the D64 causal GQA dK/dV route under a carried Triton 3.9 on two GPUs of one host:
# GPU 1 runs the GPU suite; GPU 0 runs gpu/dkdv_determinism.py on the route's GQA 8:1 shapes,
# route_check's backward pairings at S 8192, then bench_attention on D64 causal GQA 8:1 with
# every peer. Source gpu/carried_triton.sh first; run from the repository root with OUT set;
# carry .t39 and .gpu_carry.
set -uo pipefail
: "${OUT:?set OUT}"
python3 -m pip install --no-deps -q .gpu_carry/*.whl
export PYTHONPATH=${PYTHONPATH:+$PYTHONPATH:}$PWD
(CUDA_VISIBLE_DEVICES=1 WORKERS=12 TEST_TIMEOUT_S=${SUITE_S:-420} OUT="$OUT" \
    bash gpu/validate_kernel.sh > /dev/null 2>&1) &
(
    export CUDA_VISIBLE_DEVICES=0
    python3 gpu/dkdv_determinism.py --repeats 30 --shapes 2048:64:8:1 4096:64:8:1 8192:64:8:1 \
        --out "$OUT/determinism_d64_gqa.json"
    echo "determinism done at $SECONDS s"
    python3 gpu/route_check.py --kinds routes --seqlens 8192 --head-dims 64 --causal true \
        --rounds 3 --budget-s 200 --out "$OUT/routes_s8192.json"
    echo "routes done at $SECONDS s"
    python3 -m benchmarks.bench_attention --dtypes bf16 --seqlens 2048 4096 8192 --causal true \
        --kv-groups 8 --head-dims 64 --modes fwd_bwd --rounds 5 --time-budget-s 200 \
        --out "$OUT/attention_d64_causal_gqa.json"
    echo "bench done at $SECONDS s"
) > "$OUT/gpu0.log" 2>&1
wait
echo "all done at $SECONDS s"; grep -v "^nanobind\|^ - \|^See " "$OUT/gpu0.log" | tail -n 30
tail -n 3 "$OUT/gpu_tests.log"

#!/usr/bin/env bash
# Session 68, call 2, two H200s of one host, the machine's Triton 3.6, main's kernels.
#   GPU 0: the routes session 67 left untimed in a training step (gpu/route_check.py
#     --whole-step), back to back (--sustain-s 1, 3 rounds) and with do_bench (5 rounds): the
#     backward without a mask (the dQ x dK/dV Gluon/Triton pairings, D64 and D128, S 2048 and
#     4096, MHA and GQA 8:1), and the dK/dV's group splits (1, 2, 4, 8; GQA 8:1, D64 and D128,
#     causal and not, S 2048 and 4096).
#   GPU 1 at the same time: issue 4's twelve D128 target shapes with every peer
#     (bench_attention, as session 66's call 5: clocks per record, each call also back to back).
# OUT set.
set -uo pipefail
: "${OUT:?set OUT to the folder whose files come back}"
export PYTHONPATH=$PWD
quiet() { grep -v -E "leaked|nanobind|refleaks"; }
check() {  # name, route_check arguments...
    local name=$1; shift
    CUDA_VISIBLE_DEVICES=0 python3 -m gpu.route_check --whole-step --seqlens 2048 4096 \
        --head-dims 64 128 "$@" --out "$OUT/$name.json" 2>&1 | quiet > "$OUT/$name.log"
}
(
    check bwd_nomask_sustained --kinds routes --causal false --rounds 3 --sustain-s 1 \
        --budget-s 150
    check splits_sustained --kinds bwd --causal true false --rounds 3 --sustain-s 1 \
        --budget-s 150
    check bwd_nomask_do_bench --kinds routes --causal false --rounds 5 --budget-s 70
    check splits_do_bench --kinds bwd --causal true false --rounds 5 --budget-s 70
) &
CUDA_VISIBLE_DEVICES=1 python3 -m benchmarks.bench_attention --dtypes bf16 \
    --seqlens 2048 4096 8192 --causal true false --kv-groups 1 8 --modes fwd_bwd --rounds 5 \
    --sustain-s 1 --sustain-rounds 2 --time-budget-s 500 --head-dims 128 \
    --out "$OUT/gpu1-d128-attention.json" 2>&1 | quiet > "$OUT/sweep_gpu1_d128.log" &
wait
tail -n 30 "$OUT"/*.log
cd "$OUT" && tar -cf results.tar *.json *.log && rm *.json *.log  # eight files at most come back

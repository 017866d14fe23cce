#!/usr/bin/env bash
# Session 67, two H200s of one host, the machine's Triton 3.6: gpu/route_check.py --sustain-s 1
# (each launch run back to back for 1 s a round, 2 rounds) on the routes session 66 left to
# decide again back to back. GPU 0: every D128 forward launch with the fix, S 2048 and 4096,
# causal and not, MHA and GQA 8:1. GPU 1: every D64 forward launch with the fix without a mask
# (S 2048 and 4096, MHA and GQA 8:1), then the backward's four dQ x dK/dV pairings, D64 and D128
# causal, S 2048 and 4096, MHA and GQA 8:1. OUT set.
set -uo pipefail
: "${OUT:?set OUT to the folder whose files come back}"
export PYTHONPATH=$PWD
run() {  # GPU, name, route_check arguments...
    local g=$1 name=$2; shift 2
    CUDA_VISIBLE_DEVICES=$g python3 -m gpu.route_check --rounds 2 --sustain-s 1 "$@" \
        --out "$OUT/$name.json" 2>&1 | grep -v -E "leaked|nanobind|refleaks" > "$OUT/$name.log"
}
nvidia-smi --query-gpu=index,name,power.limit,clocks.max.sm,temperature.gpu --format=csv \
    > "$OUT/smi.txt"
run 0 route_check_fwd_d128 --kinds fwd --head-dims 128 --seqlens 2048 4096 \
    --causal true false --budget-s 470 &
( run 1 route_check_fwd_d64_nomask --kinds fwd --head-dims 64 --seqlens 2048 4096 \
      --causal false --budget-s 180
  run 1 route_check_bwd_causal --kinds routes --head-dims 64 128 --seqlens 2048 4096 \
      --causal true --budget-s 260 ) &
wait
cat "$OUT/smi.txt" "$OUT"/*.log

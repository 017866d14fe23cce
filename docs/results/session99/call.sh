#!/usr/bin/env bash
# Session 99 (one H200, torch 2.11, the machine's Triton 3.6): the six device calls' commands as
# they ran (each inline in the device tool's command; OUT set by the tool). Call 1 ran main at
# 7b15918; calls 2-6 main with flash_fwd_hopper's FASTER[64, True, False] = (2048, 8192) deleted
# (source 426eb6b4e552, committed as v99a).
#   1: gpu/route_check.py at D64 causal, MHA and GQA 8:1, S 4096, 2048 (8192 cut by the budget).
#   2 (carry .t39s/a .t39b): stage the first half of Triton 3.9.0; the route check at S 4096 and
#      8192 MHA (the shipped Gluon launch and the Triton forward, fix on and off); issue 4's
#      D64 causal MHA S 4096 with every peer.
#   3 (carry .t39s/b): unpack 3.9.0; under it the route check at S 4096 MHA and the same sweep.
#   4 (carry .gpu_carry): the GPU suite under 3.6; under 3.9.0 the D64 causal sweep at S 8192.
#   5, 6: under 3.9.0 the D64 causal sweep at S 2048 (MHA; then GQA 8:1 in call 6) and 4096 GQA.
set -uo pipefail
: "${OUT:?set OUT to the folder whose files come back}"
: "${STEP:?1 to 6}"
export HF_HUB_OFFLINE=1 PYTHONPATH=$PWD
quiet() { grep -v -E "leaked|nanobind|refleaks"; }
only='^(gluon \(128, 2, 160, 3, True\)|triton)( nofix)?$'
under39() { export PYTHONPATH=/tmp/carried_triton:$PWD TRITON_BACKENDS_IN_TREE=1; }
case $STEP in
    1)
        python3 -m benchmarks.runinfo > "$OUT/runinfo.txt"
        nvidia-smi --query-gpu=index,name,driver_version,power.limit --format=csv,noheader \
            > "$OUT/gpu.txt"
        timeout 570 python3 gpu/route_check.py --kinds fwd --seqlens 4096 2048 8192 \
            --head-dims 64 --causal true --heads-per-kv 1 8 --whole-step --fix-off-too \
            --sustain-s 1 --rounds 3 --budget-s 430 --out "$OUT/routes_d64_causal.json" 2>&1 \
            | quiet > "$OUT/routes.log" ;;
    2)
        mkdir -p /tmp/carried_ptxas && cp .t39b/ptxas-blackwell.xz /tmp/carried_ptxas/ || exit 1
        bash gpu/carried_triton_halves.sh first 39 || exit 1
        timeout 200 python3 gpu/route_check.py --kinds fwd --seqlens 4096 8192 --head-dims 64 \
            --causal true --heads-per-kv 1 --whole-step --fix-off-too --sustain-s 1 --rounds 4 \
            --only "$only" --budget-s 150 --out "$OUT/routes36_b.json" 2>&1 \
            | quiet > "$OUT/routes36_b.log"
        SEQLENS=4096 KV_GROUPS=1 BUDGET_S=150 bash gpu/issue4_sweep.sh 0:d64-causal ;;
    3)
        bash gpu/carried_triton_halves.sh second 39 || exit 1
        under39
        python3 -m benchmarks.runinfo > "$OUT/runinfo39.txt"
        timeout 200 python3 gpu/route_check.py --kinds fwd --seqlens 4096 --head-dims 64 \
            --causal true --heads-per-kv 1 --whole-step --fix-off-too --sustain-s 1 --rounds 4 \
            --only "$only" --budget-s 150 --out "$OUT/routes39.json" 2>&1 \
            | quiet > "$OUT/routes39.log"
        SEQLENS=4096 KV_GROUPS=1 BUDGET_S=150 bash gpu/issue4_sweep.sh 0:d64-causal ;;
    4)
        CUDA_VISIBLE_DEVICES=0 OUT=$OUT/suite TEST_TIMEOUT_S=290 bash gpu/validate_kernel.sh
        under39
        SEQLENS="8192 2048" KV_GROUPS="1 8" BUDGET_S=130 bash gpu/issue4_sweep.sh 0:d64-causal ;;
    5)
        under39
        mkdir -p "$OUT/a" "$OUT/b"
        OUT=$OUT/a SEQLENS=2048 KV_GROUPS="1 8" BUDGET_S=100 bash gpu/issue4_sweep.sh 0:d64-causal
        OUT=$OUT/b SEQLENS=4096 KV_GROUPS=8 BUDGET_S=60 timeout 120 \
            bash gpu/issue4_sweep.sh 0:d64-causal ;;
    6)
        under39
        SEQLENS=2048 KV_GROUPS=8 BUDGET_S=60 timeout 150 bash gpu/issue4_sweep.sh 0:d64-causal ;;
    *) echo "1 to 6, not $STEP"; exit 2 ;;
esac

#!/usr/bin/env bash
# Session 100 (one H200, torch 2.11, the machine's Triton 3.6): the device calls' commands as
# they ran (each inline in the device tool's command; OUT set by the tool).
#   1: gpu/route_check.py, the shipped Gluon config with one program per tile and persistent,
#      with and without the fix, forward + backward back to back: D128 causal at S 8192 and
#      16384, then D64 without a mask at S 4096, 8192 and 2048 (MHA and GQA 8:1; 16k tokens a
#      call as in the issue-4 sweeps). The device returns eight files a call: S 8192's pair,
#      gpu.txt and runinfo.txt did not come back (later calls pack theirs in one tar).
#   2 (carry .t39s/a .t39b): stage the first half of Triton 3.9.0; the route check of D64
#      without a mask at S 8192, 4096 and 2048 again (MHA and GQA 8:1).
#   3 (carry .t39s/b): unpack Triton 3.9.0; under it the same route check, S 2048, 4096, 8192.
#   4 (carry .gpu_carry; v100a, cd1556e): the GPU suite under 3.6; issue 4's D64 shapes without
#      a mask at S 2048 and 4096 with every peer, as far as the budget goes.
set -uo pipefail
: "${OUT:?set OUT to the folder whose files come back}"
: "${STEP:?the call number}"
export HF_HUB_OFFLINE=1 PYTHONPATH=$PWD
quiet() { grep -v -E "leaked|nanobind|refleaks"; }
# route S D CAUSAL BUDGET NAME: the route check of one shape's launches, 16384 tokens a call.
route() {
    local cfg only
    cfg=$([ "$2" = 128 ] && echo '128, 2, 240, 2, False' || echo '128, 2, 160, 3, True')
    only="^gluon \\($cfg\\)( persistent)?( nofix)?"'$'
    timeout $(( $4 + 90 )) python3 gpu/route_check.py --kinds fwd --seqlens "$1" --head-dims "$2" \
        --causal "$3" --heads-per-kv 1 8 --batch $(( 16384 / $1 )) --whole-step --fix-off-too \
        --sustain-s 1 --rounds 3 --only "$only" --budget-s "$4" --out "$OUT/$5.json" 2>&1 \
        | quiet > "$OUT/$5.log"
}
case $STEP in
    1)
        python3 -m benchmarks.runinfo > "$OUT/runinfo.txt"
        nvidia-smi --query-gpu=index,name,driver_version,power.limit --format=csv,noheader \
            > "$OUT/gpu.txt"
        route 8192 128 true 60 d128_causal_s8192
        route 16384 128 true 60 d128_causal_s16384
        route 4096 64 false 50 d64_nomask_s4096
        route 8192 64 false 50 d64_nomask_s8192
        route 2048 64 false 50 d64_nomask_s2048 ;;
    2)
        python3 -m benchmarks.runinfo > "$OUT/runinfo.txt"
        nvidia-smi --query-gpu=index,name,driver_version,power.limit --format=csv,noheader \
            > "$OUT/gpu.txt"
        mkdir -p /tmp/carried_ptxas && cp .t39b/ptxas-blackwell.xz /tmp/carried_ptxas/ || exit 1
        bash gpu/carried_triton_halves.sh first 39 || exit 1
        route 8192 64 false 100 d64_nomask_s8192
        route 4096 64 false 100 d64_nomask_s4096
        route 2048 64 false 100 d64_nomask_s2048 ;;
    3)
        bash gpu/carried_triton_halves.sh second 39 || exit 1
        export PYTHONPATH=/tmp/carried_triton:$PWD TRITON_BACKENDS_IN_TREE=1
        python3 -m benchmarks.runinfo > "$OUT/runinfo39.txt"
        route 2048 64 false 80 d64_nomask_s2048_t39
        route 4096 64 false 80 d64_nomask_s4096_t39
        route 8192 64 false 80 d64_nomask_s8192_t39 ;;
    4)
        CUDA_VISIBLE_DEVICES=0 OUT=$OUT/suite TEST_TIMEOUT_S=250 bash gpu/validate_kernel.sh
        python3 -m benchmarks.runinfo > "$OUT/runinfo.txt"
        SEQLENS="2048 4096" KV_GROUPS="1 8" BUDGET_S=90 timeout 150 \
            bash gpu/issue4_sweep.sh 0:d64-nomask ;;
    *) echo "no call $STEP"; exit 2 ;;
esac

#!/usr/bin/env bash
# Session 96 (one H200, torch 2.11, Triton 3.6): v96a (the Gluon dK/dV reads lse and delta through
# TMA into its ring) against main before it (56ae8b4: its package in .ab/base, its
# flash_bwd_hopper.py in .ab/old_flash_bwd_hopper.py; carry [".gpu_carry", ".ab"]). OUT set.
#   one: the GPU suite at the change; the dK/dV kernel alone against the base's on the same
#        inputs (bits, time); the D64 causal backward's kernel pairings in the whole step.
#   two: the Gluon backward's GPU tests again (a test's assumption mended); D64 causal GQA 8:1 at
#        S 2048, the two dK/dV kernels again (4 rounds); issue 4's d64-causal group, every peer.
#   three: issue 4's d128-nomask and d64-nomask groups, every peer.
set -uo pipefail
: "${OUT:?set OUT to the folder whose files come back}"
: "${STEP:?one}"
export HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false PYTHONPATH=$PWD
case $STEP in
    one)
        python3 -m benchmarks.runinfo > "$OUT/runinfo36.txt"
        CUDA_VISIBLE_DEVICES=0 OUT=$OUT/suite TEST_TIMEOUT_S=290 bash gpu/validate_kernel.sh \
            | tail -n 4
        timeout 120 python3 gpu/dkdv_determinism.py --repeats 5 \
            --base .ab/old_flash_bwd_hopper.py --out "$OUT/dkdv_ab.json" 2>&1 \
            | grep -v -E "leaked|nanobind|refleaks|skipped remainder" > "$OUT/dkdv_ab.log"
        tail -n 12 "$OUT/dkdv_ab.log"
        timeout 130 python3 gpu/route_check.py --kinds routes --seqlens 2048 4096 \
            --head-dims 64 --causal true --heads-per-kv 1 8 --whole-step --only "dq triton" \
            --budget-s 110 --out "$OUT/routes_d64_causal.json" 2>&1 \
            | grep -v -E "leaked|nanobind|refleaks|skipped remainder" > "$OUT/routes.log"
        tail -n 12 "$OUT/routes.log" ;;
    two)
        python3 -m pip install --no-deps -q .gpu_carry/*.whl
        timeout 150 python3 -m pytest -m gpu -q --tb=short -p no:cacheprovider -rfE -n 12 \
            tests/gpu/test_hopper_backward.py > "$OUT/hopper_backward_tests.log" 2>&1
        tail -n 3 "$OUT/hopper_backward_tests.log"
        timeout 80 python3 gpu/route_check.py --kinds routes --seqlens 2048 --head-dims 64 \
            --causal true --heads-per-kv 8 --whole-step --only "dq triton" --rounds 4 \
            --budget-s 60 --out "$OUT/routes_d64_causal_gqa_s2048.json" 2>&1 \
            | grep -v -E "leaked|nanobind|refleaks|skipped remainder" > "$OUT/routes2.log"
        tail -n 3 "$OUT/routes2.log"
        SEQLENS="2048 4096 8192" BUDGET_S=300 bash gpu/issue4_sweep.sh 0:d64-causal ;;
    three)
        SEQLENS="2048 4096 8192" BUDGET_S=265 bash gpu/issue4_sweep.sh 0:d128-nomask 0:d64-nomask ;;
    *) echo "one, two or three, not $STEP"; exit 2 ;;
esac

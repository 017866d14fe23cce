#!/usr/bin/env bash
# Session 97 (one H200, torch 2.11, Triton 3.6), main at v96a plus the benchmarks' tuner fields.
# OUT set.
#   one: the Triton forward's tuner at D64 causal MHA S 2048 (with and without the fix), batch 4
#        and 8, three fresh processes without the disk cache of picks, and every candidate in
#        interleaved rounds; issue 4's d128-causal group with every peer.
#   two (carry [".t39s/a", ".t39b"]): stage ptxas-blackwell (CUDA 13.4) and the first half of
#        the Triton 3.9.0 pack (gpu/carried_triton_halves.sh); training end to end under 3.6,
#        GPT-2 124M and the ~1B Llama model, stable_flash and sdpa, three processes an entry.
#   three (carry [".t39s/b"], the same warm machine): unpack 3.9.0; under it, the D64 causal
#        MHA backward's kernel pairings in the forward + backward (the Triton dK/dV against the
#        Gluon one, which v96a made spill-free under 3.9's ptxas 13.4).
#   four (carry [".t39s/a", ".t39b", ".gpu_carry"], a fresh machine): stage as in two; issue 4's
#        d64-causal and d64-nomask groups at S 8192 (the GQA shapes sessions 95-96 cut).
#   five (carry [".t39s/b", ".gpu_carry"], the same warm machine): unpack 3.9.0; under it the
#        GPU suite (gpu/validate_kernel.sh) with D64 causal MHA on the Gluon dK/dV from 4096 rows.
set -uo pipefail
: "${OUT:?set OUT to the folder whose files come back}"
: "${STEP:?one}"
export HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false PYTHONPATH=$PWD
quiet() { grep -v -E "leaked|nanobind|refleaks|skipped remainder"; }
case $STEP in
    one)
        python3 -m benchmarks.runinfo > "$OUT/runinfo36.txt"
        timeout 260 python3 gpu/autotune_picks.py --seqlen 2048 --batches 4 8 \
            --shapes 64:true:1 --parts fwd fwd_nofix --variants cold:3 --rounds 5 2>&1 \
            | quiet > "$OUT/autotune_picks.log"
        tail -n 4 "$OUT/autotune_picks.log"
        SEQLENS="2048 4096 8192" BUDGET_S=280 bash gpu/issue4_sweep.sh 0:d128-causal ;;
    two)
        mkdir -p /tmp/carried_ptxas && cp .t39b/ptxas-blackwell.xz /tmp/carried_ptxas/ || exit 1
        bash gpu/carried_triton_halves.sh first 39 || exit 1
        nvidia-smi --query-gpu=index,name,driver_version,power.limit --format=csv,noheader \
            > "$OUT/gpu.txt"
        python3 -m benchmarks.bench_e2e --models gpt2-124m llama-1b --processes 3 \
            --impls stable_flash sdpa --gen-impls none --time-budget-s 320 \
            --out "$OUT/train36-e2e.json" > "$OUT/train36.log" 2>&1
        tail -n 12 "$OUT/train36.log" ;;
    three)
        bash gpu/carried_triton_halves.sh second 39 || exit 1
        export PYTHONPATH=/tmp/carried_triton:$PWD TRITON_BACKENDS_IN_TREE=1
        python3 -m benchmarks.runinfo > "$OUT/runinfo39.txt"
        timeout 300 python3 gpu/route_check.py --kinds routes --seqlens 2048 4096 8192 \
            --head-dims 64 --causal true --heads-per-kv 1 --whole-step --only "dq triton" \
            --rounds 3 --budget-s 270 --out "$OUT/routes39_d64_causal_mha.json" 2>&1 \
            | quiet > "$OUT/routes39.log"
        tail -n 12 "$OUT/routes39.log" ;;
    four)
        mkdir -p /tmp/carried_ptxas && cp .t39b/ptxas-blackwell.xz /tmp/carried_ptxas/ || exit 1
        bash gpu/carried_triton_halves.sh first 39 || exit 1
        SEQLENS=8192 BUDGET_S=115 bash gpu/issue4_sweep.sh 0:d64-causal 0:d64-nomask ;;
    five)
        bash gpu/carried_triton_halves.sh second 39 || exit 1
        export PYTHONPATH=/tmp/carried_triton TRITON_BACKENDS_IN_TREE=1
        CUDA_VISIBLE_DEVICES=0 OUT=$OUT/suite39 TEST_TIMEOUT_S=300 bash gpu/validate_kernel.sh \
            | tail -n 6 ;;
    *) echo "one to five, not $STEP"; exit 2 ;;
esac

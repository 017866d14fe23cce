#!/usr/bin/env bash
# Session 93 (one H200, torch 2.11): training and generation end to end through Transformers
# under the machine's Triton 3.6 and under a carried 3.9.0 (torch 2.15's pin; every earlier e2e
# run used 3.6). One call a step, on one warm machine:
#   STEP=stage   carry [".t39s/a", ".t39b"]: stage ptxas-blackwell (CUDA 13.4) and the pack's first
#                half (gpu/carried_triton_halves.sh), then training under 3.6
#   STEP=train39 carry [".t39s/b"]: unpack 3.9.0 (gpu/carried_triton.sh), training under it
#   STEP=gen     generation under 3.9.0 (the unpacked pack stays in /tmp), then under 3.6
# Training: GPT-2 124M (8 x 1024) and the ~1B Llama (2 x 4096), three fresh processes an entry
# in alternating rounds (bench_e2e --processes). OUT set; BUDGET_S bounds each bench_e2e.
set -uo pipefail
: "${OUT:?set OUT to the folder whose files come back}"
: "${STEP:?stage, train39 or gen}"
budget=${BUDGET_S:-300}
export HF_HUB_OFFLINE=1
e2e() {  # $1 the run's name; the rest bench_e2e's arguments
    local name=$1; shift
    PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} python3 -m benchmarks.bench_e2e \
        --models gpt2-124m llama-1b --processes 3 --time-budget-s "$budget" "$@" \
        --out "$OUT/$name-e2e.json" > "$OUT/$name.log" 2>&1
    tail -n 12 "$OUT/$name.log"
}
under39() {
    export PYTHONPATH=/tmp/carried_triton TRITON_BACKENDS_IN_TREE=1
}
case $STEP in
    stage)
        mkdir -p /tmp/carried_ptxas && cp .t39b/ptxas-blackwell.xz /tmp/carried_ptxas/ || exit 1
        bash gpu/carried_triton_halves.sh first 39 || exit 1
        nvidia-smi --query-gpu=index,name,driver_version,power.limit --format=csv,noheader \
            > "$OUT/gpu.txt"
        python3 -m benchmarks.runinfo > "$OUT/runinfo36.txt"
        e2e train36 --impls stable_flash sdpa --gen-impls none ;;
    train39)
        bash gpu/carried_triton_halves.sh second 39 || exit 1
        under39
        python3 -m benchmarks.runinfo > "$OUT/runinfo39.txt"
        e2e train39 --impls stable_flash stable_flash_nofix sdpa --gen-impls none ;;
    gen)
        (under39; e2e gen39 --impls none --gen-impls stable_flash sdpa)
        e2e gen36 --impls none --gen-impls stable_flash sdpa ;;
    *) echo "stage, train39 or gen, not $STEP"; exit 2 ;;
esac

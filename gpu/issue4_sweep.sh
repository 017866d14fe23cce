#!/usr/bin/env bash
# Issue 4's target shapes (bf16, fwd+bwd, S 2048/4096/8192, MHA and GQA 8:1) with every peer,
# one group of six per GPU, all groups at the same time. Each argument is GPU:GROUP[:TREE]:
#   GROUP  d64-causal | d64-nomask | d128-causal | d128-nomask
#   TREE   a source tree to time instead of the repository (e.g. .variants/main78, carried),
#          for same-time A/B pairs; its name tags the output.
# Writes $OUT/gpuN-GROUP[-TREE]-attention.json, its log beside it and gpu.txt.
#   run(command="OUT=$OUT bash gpu/issue4_sweep.sh 0:d64-causal 1:d64-nomask", kind="nvidia-h200-x2")
set -uo pipefail
: "${OUT:?set OUT to the folder whose files come back}"
[ $# -gt 0 ] || { echo "usage: OUT=DIR bash gpu/issue4_sweep.sh GPU:GROUP[:TREE] ..."; exit 2; }
BUDGET_S=${BUDGET_S:-420}
repo=$PWD
sweep() {  # GPU GROUP TREE
    local gpu=$1 group=$2 tree=${3:-} causal d name
    case $group in
        d64-causal) d=64 causal=true ;;   d64-nomask) d=64 causal=false ;;
        d128-causal) d=128 causal=true ;; d128-nomask) d=128 causal=false ;;
        *) echo "unknown group $group (d64-causal, d64-nomask, d128-causal, d128-nomask)"
           return 2 ;;
    esac
    name=gpu$gpu-$group${tree:+-$(basename "$tree")}
    cd "$repo/${tree:-.}" || return 2
    CUDA_VISIBLE_DEVICES=$gpu PYTHONPATH=$PWD python3 -m benchmarks.bench_attention \
        --dtypes bf16 --seqlens 2048 4096 8192 --causal $causal --kv-groups 1 8 \
        --modes fwd_bwd --rounds 5 --sustain-s 1 --sustain-rounds 2 \
        --time-budget-s "$BUDGET_S" --head-dims $d --out "$OUT/$name-attention.json" 2>&1 \
        | grep -v -E "leaked|nanobind|refleaks|skipped remainder" > "$OUT/$name.log"
}
for spec in "$@"; do
    IFS=: read -r gpu group tree <<< "$spec"
    sweep "$gpu" "$group" "$tree" &
done
wait
nvidia-smi --query-gpu=index,name,driver_version,power.limit --format=csv,noheader > "$OUT/gpu.txt"
tail -n 2 "$OUT"/*.log

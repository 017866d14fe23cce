#!/usr/bin/env bash
# Issue 4's target shapes (bf16, fwd+bwd, S 2048/4096/8192/16384, MHA and GQA 8:1) with every
# peer, a group of eight per run; the GPUs run at the same time, each GPU its runs in order. Each
# argument is GPU:GROUP[:TREE]:
#   GROUP  d64-causal | d64-nomask | d128-causal | d128-nomask
#   TREE   a source tree to time instead of the repository (e.g. .variants/main78, carried),
#          for same-time A/B pairs; its name tags the output.
# A GPU:GROUP[:TREE] given again runs again in a fresh process, tagged -run2, -run3, ...
# IMPLS (default: every peer), ROUNDS (default 5), SEQLENS (default "2048 4096 8192 16384";
# the budget cuts the last first) and KV_GROUPS (default "1 8": MHA, then GQA 8:1 at each
# length; "8" alone runs the GQA shapes a budget cut) pass to benchmarks.bench_attention.
# The tree (or the repository) goes first on PYTHONPATH, before what the caller put there (e.g. a
# carried Triton). Writes $OUT/gpuN-GROUP[-TREE][-runK]-attention.json, its log and gpu.txt.
#   run(command="OUT=$OUT bash gpu/issue4_sweep.sh 0:d64-causal 1:d64-nomask",
#       kind="nvidia-h200-x2")
set -uo pipefail
: "${OUT:?set OUT to the folder whose files come back}"
[ $# -gt 0 ] || { echo "usage: OUT=DIR bash gpu/issue4_sweep.sh GPU:GROUP[:TREE] ..."; exit 2; }
BUDGET_S=${BUDGET_S:-420}
repo=$PWD
sweep() {  # GPU GROUP TREE TAG
    local gpu=$1 group=$2 tree=${3:-} tag=${4:-} causal d name
    case $group in
        d64-causal) d=64 causal=true ;;   d64-nomask) d=64 causal=false ;;
        d128-causal) d=128 causal=true ;; d128-nomask) d=128 causal=false ;;
        *) echo "unknown group $group (d64-causal, d64-nomask, d128-causal, d128-nomask)"
           return 2 ;;
    esac
    name=gpu$gpu-$group${tree:+-$(basename "$tree")}$tag
    cd "$repo/${tree:-.}" || return 2
    CUDA_VISIBLE_DEVICES=$gpu PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} \
        python3 -m benchmarks.bench_attention \
        --dtypes bf16 --seqlens ${SEQLENS:-2048 4096 8192 16384} --causal $causal \
        --kv-groups ${KV_GROUPS:-1 8} --modes fwd_bwd --rounds "${ROUNDS:-5}" \
        --sustain-s 1 --sustain-rounds 2 \
        ${IMPLS:+--impls $IMPLS} \
        --time-budget-s "$BUDGET_S" --head-dims $d --out "$OUT/$name-attention.json" 2>&1 \
        | grep -v -E "leaked|nanobind|refleaks|skipped remainder" > "$OUT/$name.log"
}
declare -A seen
for gpu in $(printf '%s\n' "$@" | cut -d: -f1 | sort -u); do
    (for spec in "$@"; do
        IFS=: read -r g group tree <<< "$spec"
        [ "$g" = "$gpu" ] || continue
        seen[$spec]=$(( ${seen[$spec]:-0} + 1 ))
        tag=""; [ "${seen[$spec]}" -gt 1 ] && tag=-run${seen[$spec]}
        sweep "$gpu" "$group" "$tree" "$tag"
    done) &
done
wait
nvidia-smi --query-gpu=index,name,driver_version,power.limit --format=csv,noheader > "$OUT/gpu.txt"
tail -n 2 "$OUT"/*.log

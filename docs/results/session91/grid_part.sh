#!/usr/bin/env bash
# Session 91: issue 4's sweep beyond the 24 shapes of S 2k-8k (seqlen 512, 1024, 16384; head
# dim 256; fp16; the fwd and bwd modes), every peer in the same run, at main. One call runs the
# parts it names, each its own JSON, under a time budget each:
#   OUT=$OUT PARTS="s16k" bash docs/results/session91/grid_part.sh
# TRITON_CACHE_DIR stays /tmp/tc91 across calls, so a warm machine keeps the tuner's picks.
set -uo pipefail
: "${OUT:?set OUT to the folder whose files come back}" "${PARTS:?name the parts}"
mkdir -p "$OUT"
export PYTHONPATH=$PWD HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
export TRITON_CACHE_DIR=${TRITON_CACHE_DIR:-/tmp/tc91}
STAMP=$(date -u +%Y%m%d-%H%M)
COMMON=(--rounds 5 --sustain-s 0 --out-dir "$OUT")
for part in $PARTS; do
    case $part in
        s16k) args=(--dtypes bf16 --seqlens 16384 --head-dims 64 128 --causal true false
                    --kv-groups 1 8 --modes fwd_bwd) budget=480 ;;
        short) args=(--dtypes bf16 --seqlens 512 1024 --head-dims 64 128 --causal true
                     --kv-groups 1 --modes fwd_bwd) budget=200 ;;
        d256) args=(--dtypes bf16 --seqlens 4096 16384 --head-dims 256 --causal true false
                    --kv-groups 1 --modes fwd_bwd) budget=260 ;;
        fp16) args=(--dtypes fp16 --seqlens 4096 --head-dims 64 128 --causal true false
                    --kv-groups 1 --modes fwd_bwd) budget=260 ;;
        modes) args=(--dtypes bf16 --seqlens 4096 --head-dims 64 128 --causal true
                     --kv-groups 1 --modes fwd bwd) budget=200 ;;
        *) echo "unknown part $part"; exit 2 ;;
    esac
    out="$OUT/h200-$STAMP-grid-$part-attention.json"
    timeout -k 10 $((budget + 60)) python3 -m benchmarks.bench_attention "${args[@]}" \
        "${COMMON[@]}" --time-budget-s "$budget" --out "$out" 2> "$OUT/$part.log"
    echo "$part exit status $? ($(date -u +%T))"
done

#!/usr/bin/env bash
# Session 92, call 3, one H200, Triton 3.6 (the machine's): issue 4's grid cells no run had
# covered since the 24-shape work began, every peer in the same run, 5 rounds, at main:
#   d256gqa       bf16, head dim 256, GQA 8:1, S 4096 and 16384, causal or not
#   fp16gqa       fp16, head dims 64 and 128, GQA 8:1, S 4096, causal or not
#   shortnomask   bf16, head dims 64 and 128, MHA, S 512 and 1024, no mask
# Each part its own JSON under $OUT/c3; everything comes back in $OUT/call3.tgz.
set -uo pipefail
: "${OUT:?set OUT to the folder whose files come back}"
W=/tmp/c3
mkdir -p $W
export PYTHONPATH=$PWD HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false TRITON_CACHE_DIR=/tmp/tc92
STAMP=$(date -u +%Y%m%d-%H%M)
for part in d256gqa fp16gqa shortnomask; do
    case $part in
        d256gqa) args=(--dtypes bf16 --seqlens 4096 16384 --head-dims 256 --causal true false
                       --kv-groups 8) budget=200 ;;
        fp16gqa) args=(--dtypes fp16 --seqlens 4096 --head-dims 64 128 --causal true false
                       --kv-groups 8) budget=120 ;;
        shortnomask) args=(--dtypes bf16 --seqlens 512 1024 --head-dims 64 128 --causal false
                           --kv-groups 1) budget=110 ;;
    esac
    timeout -k 10 $((budget + 50)) python3 -m benchmarks.bench_attention "${args[@]}" \
        --modes fwd_bwd --rounds 5 --sustain-s 0 --time-budget-s "$budget" \
        --out "$W/h200-$STAMP-grid-$part-attention.json" 2>&1 \
        | grep -v -E "leaked|nanobind|refleaks|skipped remainder" > "$W/$part.log"
    echo "$part exit status ${PIPESTATUS[0]} ($(date -u +%T))" >> $W/status.txt
done
tar -C /tmp -czf $OUT/call3.tgz c3

#!/usr/bin/env bash
# Session 97 (one H200, torch 2.11, Triton 3.6), main at v96a plus the benchmarks' tuner fields.
# OUT set.
#   one: the Triton forward's tuner at D64 causal MHA S 2048 (with and without the fix), batch 4
#        and 8, three fresh processes without the disk cache of picks, and every candidate in
#        interleaved rounds; issue 4's d128-causal group with every peer.
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
    *) echo "one, not $STEP"; exit 2 ;;
esac

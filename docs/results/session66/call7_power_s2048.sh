#!/usr/bin/env bash
# Session 66, two H200s of one host, the machine's Triton 3.6: route_power.py --table-per-span at
# D64 causal S 2048 (B 8), where the Triton forward is the shipped route with the fix and led the
# Gluon launches by 7-9% in do_bench (session 59): does it keep that lead back to back at the
# power limit? GPU 0 MHA, GPU 1 GQA 8:1, at the same time. OUT set.
set -uo pipefail
: "${OUT:?set OUT to the folder whose files come back}"
export PYTHONPATH=$PWD
for g in 0 1; do
    hk=$((g == 0 ? 32 : 4))
    CUDA_VISIBLE_DEVICES=$g python3 docs/results/session66/route_power.py \
        "$OUT/route_power_s2048_hk$hk.json" --table-per-span --seqlen 2048 --heads-kv $hk 2>&1 \
        | grep -v -E "leaked|nanobind|refleaks" > "$OUT/route_power_s2048_hk$hk.log" &
done
wait
cat "$OUT"/*.log

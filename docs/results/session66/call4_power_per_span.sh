#!/usr/bin/env bash
# Session 66, two H200s of one host, after a call that staged ptxas-blackwell: route_power.py
# with the forward table patched once per timed span (--table-per-span), GPU 0 under the
# machine's Triton 3.6 and GPU 1 under the carried 3.9 at the same time. Carry .t39; OUT set.
set -uo pipefail
: "${OUT:?set OUT to the folder whose files come back}"
clean() { grep -v -E "leaked|nanobind|refleaks"; }
CUDA_VISIBLE_DEVICES=0 PYTHONPATH=$PWD python3 docs/results/session66/route_power.py \
    "$OUT/route_power_span_triton36.json" --table-per-span 2>&1 | clean \
    > "$OUT/route_power_span_triton36.log" &
(
    source gpu/carried_triton.sh > "$OUT/carried_triton.txt" 2>&1 || exit 1
    export PYTHONPATH=$PYTHONPATH:$PWD  # after the carried Triton, never instead of it
    CUDA_VISIBLE_DEVICES=1 python3 docs/results/session66/route_power.py \
        "$OUT/route_power_span_triton39.json" --table-per-span 2>&1 | clean \
        > "$OUT/route_power_span_triton39.log"
)
wait
cat "$OUT"/*.log "$OUT/carried_triton.txt"

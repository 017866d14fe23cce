#!/usr/bin/env bash
# Session 66, two H200s of one host, the machine's Triton 3.6, branch v66a: gpu/route_check.py
# --sustain-s 1 (each forward launch run back to back for 1 s a round, 2 rounds) on the D64
# causal forward with the fix: GPU 0 at S 4096, GPU 1 at S 2048, MHA and GQA 8:1, at the same
# time. OUT set.
set -uo pipefail
: "${OUT:?set OUT to the folder whose files come back}"
export PYTHONPATH=$PWD
for g in 0 1; do
    s=$((g == 0 ? 4096 : 2048))
    CUDA_VISIBLE_DEVICES=$g python3 -m gpu.route_check --kinds fwd --seqlens $s --head-dims 64 \
        --causal true --rounds 2 --sustain-s 1 --budget-s 100 --out "$OUT/route_check_s$s.json" \
        2>&1 | grep -v -E "leaked|nanobind|refleaks" > "$OUT/route_check_s$s.log" &
done
wait
cat "$OUT"/*.log

#!/usr/bin/env bash
# Session 67, two H200s of one host, after call 4 staged ptxas-blackwell, under the carried
# Triton 3.9, branch v67a (its change is for 3.6 only): gpu/route_check.py --whole-step on the
# routes that differ from 3.6's, each variant in a forward + backward, GPU 0 back to back
# (--sustain-s 1, 3 rounds) and GPU 1 with do_bench (5 rounds) at the same time:
#   the D64 causal backward, S 2048 and 4096, MHA and GQA 8:1: the Triton dQ with the Triton or
#     the Gluon dK/dV (3.9 ships the Gluon one with GQA from 2048 rows, the Triton one for MHA);
#   the D64 forward with the fix without a mask, S 2048 and 4096, MHA and GQA 8:1: the Gluon
#     table config one program per tile (shipped under 3.9) or persistent (shipped under 3.6).
# Carry .t39; OUT set.
set -uo pipefail
: "${OUT:?set OUT to the folder whose files come back}"
source gpu/carried_triton.sh > "$OUT/carried_triton.txt" 2>&1 || exit 1
export PYTHONPATH=$PYTHONPATH:$PWD  # after the carried Triton, never instead of it
for g in 0 1; do
    (
        timing=$([ $g = 0 ] && echo "--rounds 3 --sustain-s 1" || echo "--rounds 5")
        name=$([ $g = 0 ] && echo sustained || echo do_bench)
        check() {  # name, route_check arguments...
            local what=$1; shift
            CUDA_VISIBLE_DEVICES=$g python3 -m gpu.route_check --whole-step --head-dims 64 \
                --seqlens 2048 4096 --budget-s 100 $timing "$@" \
                --out "$OUT/${what}_$name.json" 2>&1 \
                | grep -v -E "leaked|nanobind|refleaks" > "$OUT/${what}_$name.log"
        }
        check bwd_d64_causal --kinds routes --causal true --only 'dq triton'
        check fwd_d64_nomask --kinds fwd --causal false --only 'gluon \(128, 2, 160, 3, True\)'
    ) &
done
wait
cat "$OUT/carried_triton.txt" "$OUT"/*.log
cd "$OUT" && tar -cf results.tar *.json *.log carried_triton.txt && rm *.json *.log carried_triton.txt

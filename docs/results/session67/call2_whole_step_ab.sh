#!/usr/bin/env bash
# Session 67, two H200s of one host, the machine's Triton 3.6: the two route changes call 1's
# back-to-back forward and backward timings point to, timed in the forward + backward a training
# step runs (gpu/route_check.py --whole-step), back to back (--sustain-s 1, 3 rounds) and with
# do_bench (5 rounds), the same on both GPUs (two samples):
#   D128 causal forward with the fix, S 2048 and 4096, MHA and GQA 8:1: the table config one
#     program per tile or persistent (shipped below 8192 rows), and the 232-register config both
#     ways;
#   D64 causal backward, S 2048 and 4096, MHA and GQA 8:1: the Triton dQ with the Triton or the
#     Gluon dK/dV (shipped from 4096 rows).
# OUT set.
set -uo pipefail
: "${OUT:?set OUT to the folder whose files come back}"
export PYTHONPATH=$PWD
check() {  # GPU, name, route_check arguments...
    local g=$1 name=$2; shift 2
    CUDA_VISIBLE_DEVICES=$g python3 -m gpu.route_check --whole-step --causal true \
        --seqlens 2048 4096 --budget-s 200 "$@" --out "$OUT/${name}_gpu$g.json" 2>&1 \
        | grep -v -E "leaked|nanobind|refleaks" > "$OUT/${name}_gpu$g.log"
}
for g in 0 1; do
    (
        fwd=(--kinds fwd --head-dims 128 --only 'gluon \(128, 2, 2(40|32), 2, False\)')
        bwd=(--kinds routes --head-dims 64 --only 'dq triton')
        check $g fwd_d128_sustained "${fwd[@]}" --rounds 3 --sustain-s 1
        check $g bwd_d64_sustained "${bwd[@]}" --rounds 3 --sustain-s 1
        check $g fwd_d128_do_bench "${fwd[@]}" --rounds 5
        check $g bwd_d64_do_bench "${bwd[@]}" --rounds 5
    ) &
done
wait
cat "$OUT"/*.log
cd "$OUT" && tar -cf results.tar *.json *.log && rm *.json *.log  # eight files at most come back

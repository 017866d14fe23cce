#!/usr/bin/env bash
# Session 68, call 4, two H200s of one host, the machine's Triton 3.6, main's kernels: the Triton
# dQ's table entries in the forward + backward a training step runs, back to back for 1 s
# (benchmarks/tune_kernel.py --whole-step --sustain-s 1), at the D64 target shapes whose other
# kernels are Gluon launches: without a mask at S 2048, 4096 and 8192, and causal at S 8192
# (MHA and GQA 8:1). The same run on both GPUs at the same time (two samples). OUT set.
set -uo pipefail
: "${OUT:?set OUT to the folder whose files come back}"
export PYTHONPATH=$PWD
for g in 0 1; do
    (
        for s in 2048 4096 8192; do
            cases=(64:0:1 64:0:8)
            [ "$s" = 8192 ] && cases+=(64:1:1 64:1:8)
            CUDA_VISIBLE_DEVICES=$g python3 -m benchmarks.tune_kernel --grid table --whole-step \
                --sustain-s 1 --parts dq --cases "${cases[@]}" --seqlen $s --jobs 8 \
                --time-budget-s 90 --out "$OUT/dq_s${s}_gpu$g.json" 2>&1 \
                | grep -v -E "leaked|nanobind|refleaks" > "$OUT/dq_s${s}_gpu$g.log"
        done
    ) &
done
wait
tail -n 6 "$OUT"/*.log
cd "$OUT" && tar -cf results.tar *.json *.log && rm *.json *.log  # eight files at most come back

#!/usr/bin/env bash
# Session 67, two H200s of one host, the machine's Triton 3.6, branch v67a (D64 causal GQA keeps
# the Triton dK/dV below 8192 query rows). GPU 0: the GPU suite (gpu/validate_kernel.sh), then
# the D64 causal backward's Triton dQ with either dK/dV at S 8192, MHA and GQA 8:1, in the
# forward + backward (gpu/route_check.py --whole-step), back to back and with do_bench. GPU 1
# at the same time: issue 4's D64 causal shapes at S 2048 and 4096 (bench_attention, with 1 s
# back to back), as session 66's call 6 on GPU 1. Needs .gpu_carry. OUT set.
set -uo pipefail
: "${OUT:?set OUT to the folder whose files come back}"
export PYTHONPATH=$PWD
(
    CUDA_VISIBLE_DEVICES=0 OUT="$OUT/suite" TEST_TIMEOUT_S=330 bash gpu/validate_kernel.sh
    for timing in "--rounds 3 --sustain-s 1" "--rounds 5"; do
        name=$([ "$timing" = "--rounds 5" ] && echo do_bench || echo sustained)
        CUDA_VISIBLE_DEVICES=0 python3 -m gpu.route_check --whole-step --causal true \
            --seqlens 8192 --kinds routes --head-dims 64 --only 'dq triton' --budget-s 100 \
            $timing --out "$OUT/bwd_d64_s8192_$name.json" 2>&1 \
            | grep -v -E "leaked|nanobind|refleaks" > "$OUT/bwd_d64_s8192_$name.log"
    done
) &
CUDA_VISIBLE_DEVICES=1 python3 -m benchmarks.bench_attention --dtypes bf16 --head-dims 64 \
    --modes fwd_bwd --rounds 5 --sustain-s 1 --sustain-rounds 2 --time-budget-s 330 \
    --seqlens 2048 4096 --causal true --kv-groups 1 8 \
    --out "$OUT/gpu1-d64-causal-s2048-4096-attention.json" 2>&1 \
    | grep -v -E "leaked|nanobind|refleaks" > "$OUT/sweep_gpu1.log"
wait
tail -n 3 "$OUT"/sweep_gpu1.log; cat "$OUT"/bwd_*.log
cd "$OUT" && tar -cf extras.tar bwd_* sweep_gpu1.log && rm bwd_* sweep_gpu1.log

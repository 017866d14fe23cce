#!/usr/bin/env bash
# Session 78, call 5, two H200s of one host (nvidia-h200-x2), the machine's Triton 3.6: issue 4's
# D64 target shapes without a mask at S 4096 and 8192 (MHA and GQA 8:1) at the same time on both
# GPUs, GPU 0 branch v78a-raw-max, GPU 1 main (.variants/main78, as call 4). The device budget
# left (about 300 s) sets the lengths and the budget. Run with carry [".variants/main78"]. OUT set.
set -uo pipefail
: "${OUT:?set OUT to the folder whose files come back}"
quiet() { grep -v -E "leaked|nanobind|refleaks|skipped remainder"; }
sweep() {  # GPU, output name
    CUDA_VISIBLE_DEVICES=$1 timeout -k 5 225 python3 -m benchmarks.bench_attention --dtypes bf16 \
        --seqlens 4096 8192 --causal false --kv-groups 1 8 --modes fwd_bwd \
        --rounds 5 --sustain-s 1 --sustain-rounds 2 --time-budget-s 190 --head-dims 64 \
        --impls stable_flash stable_flash_nofix sdpa_flash sdpa_cudnn \
        --out "$OUT/$2" 2>&1 | quiet > "$OUT/sweep_gpu$1.log"
}
(export PYTHONPATH=$PWD; sweep 0 gpu0-d64-nomask-v78a-attention.json) &
(cd .variants/main78 && export PYTHONPATH=$PWD && sweep 1 gpu1-d64-nomask-main-attention.json) &
wait
tail -n 1 "$OUT"/sweep_gpu*.log

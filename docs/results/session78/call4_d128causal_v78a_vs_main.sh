#!/usr/bin/env bash
# Session 78, call 4, two H200s of one host (nvidia-h200-x2), the machine's Triton 3.6: issue 4's
# six D128 causal target shapes at the same time on both GPUs, GPU 0 branch v78a-raw-max, GPU 1
# main (`git archive main hf_stable_attn kernels benchmarks pyproject.toml` unpacked into
# .variants/main78, results folder left out). Call 3 ran them beside an A/B on the other GPU.
# Run with carry [".variants/main78"]. OUT set.
set -uo pipefail
: "${OUT:?set OUT to the folder whose files come back}"
quiet() { grep -v -E "leaked|nanobind|refleaks|skipped remainder"; }
sweep() {  # GPU, output name
    CUDA_VISIBLE_DEVICES=$1 python3 -m benchmarks.bench_attention --dtypes bf16 \
        --seqlens 2048 4096 8192 --causal true --kv-groups 1 8 --modes fwd_bwd \
        --rounds 5 --sustain-s 1 --sustain-rounds 2 --time-budget-s 400 --head-dims 128 \
        --out "$OUT/$2" 2>&1 | quiet > "$OUT/sweep_gpu$1.log"
}
(export PYTHONPATH=$PWD; sweep 0 gpu0-d128-causal-v78a-attention.json) &
(cd .variants/main78 && export PYTHONPATH=$PWD && sweep 1 gpu1-d128-causal-main-attention.json) &
wait
nvidia-smi --query-gpu=index,name,driver_version,power.limit --format=csv,noheader > "$OUT/gpu.txt"
tail -n 1 "$OUT"/sweep_gpu*.log

#!/usr/bin/env bash
# Session 79, call 3, two H200s of one host (nvidia-h200-x2), the machine's Triton 3.6, main
# (v78a). GPU 1: training end to end (GPT-2 124M and the ~1B Llama model, stable_flash and sdpa,
# three fresh processes each), the first at v78a. GPU 0: v78a's forwards against main's before
# it, bit for bit: gpu/forward_bits.py in this tree and in .variants/main78 at once (heuristic
# configs, near-tie inputs then drawn cases), compared; then gpu/hopper_fwd_ab.py's checks of
# the Gluon forward against .variants/s77/flash_fwd_hopper_main.py (checks only: --budget-s 1).
# Run with carry [".variants/main78", ".variants/s77"]. OUT set.
set -uo pipefail
: "${OUT:?set OUT to the folder whose files come back}"
export HF_HUB_OFFLINE=1
quiet() { grep -v -E "leaked|nanobind|refleaks|skipped remainder"; }
CUDA_VISIBLE_DEVICES=1 PYTHONPATH=$PWD python3 -m benchmarks.bench_e2e --models gpt2-124m \
    llama-1b --impls stable_flash sdpa --gen-impls none --processes 3 --time-budget-s 380 \
    --out "$OUT/gpu1-e2e.json" 2>&1 | quiet > "$OUT/e2e_gpu1.log" &
export CUDA_VISIBLE_DEVICES=0
PYTHONPATH=$PWD timeout -k 5 250 python3 gpu/forward_bits.py save --budget-s 170 \
    --out /tmp/bits_v78a.safetensors 2>&1 | quiet > "$OUT/bits_v78a.log" &
new=$!
PYTHONPATH=$PWD/.variants/main78:$PWD timeout -k 5 250 python3 gpu/forward_bits.py save \
    --budget-s 170 --out /tmp/bits_main78.safetensors 2>&1 | quiet > "$OUT/bits_main78.log" &
old=$!
wait $new $old
PYTHONPATH=$PWD python3 gpu/forward_bits.py compare /tmp/bits_main78.safetensors \
    /tmp/bits_v78a.safetensors --out "$OUT/forward_bits.json"
PYTHONPATH=$PWD timeout -k 5 170 python3 gpu/hopper_fwd_ab.py \
    --base .variants/s77/flash_fwd_hopper_main.py --budget-s 1 --head-dims 64 --seqlens 4096 \
    --causal true --out "$OUT/hopper_ab_checks.json" 2>&1 | quiet > "$OUT/hopper_ab_checks.log"
echo "hopper_fwd_ab rc=${PIPESTATUS[0]}"
wait
nvidia-smi --query-gpu=index,name,driver_version,power.limit --format=csv,noheader > "$OUT/gpu.txt"
tail -n 2 "$OUT"/bits_*.log "$OUT/hopper_ab_checks.log"; tail -n 12 "$OUT/e2e_gpu1.log"

#!/usr/bin/env bash
# Issue 7 on ONE GPU (about 7-8 minutes with the default MINUTES=2.5; keep it under the 10-minute limit):
#   1. GPT-2 124M, the paper's one-GPU config (524,288 tokens per step), stable_flash, for $MINUTES
#      minutes on the embedded text, recording the batch order;
#   2. the same with sdpa, replaying that order, to the same step (the LR schedule is the config's);
#   3. LoRA on a tiny random Llama with stable_flash in bf16, end to end.
# CPU dry run of the plumbing: GPT2_CONFIG=recipes/configs/gpt2_tiny_cpu.yaml EXTRA_ARGS='--use_cpu true' MINUTES=0.2
# Run from the repo root:  OUT=<dir> PYTHONPATH=$PWD bash gpu/recipes.sh
# Into $OUT: gpt2_stable_flash.csv, gpt2_sdpa.csv, lora_tiny_llama.csv (per-step loss, lr, tokens/s,
# peak GiB), curves.png, summary.json, batch_order.json, recipes.log.
# peft (step 3) is installed from .gpu_carry/peft-*.whl when the machine lacks it.
set -euo pipefail
: "${OUT:?set OUT to the folder for the results}"
MINUTES=${MINUTES:-2.5}
PY=${PYTHON:-python3}
export PYTHONPATH=${PYTHONPATH:-$PWD} HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=true
mkdir -p "$OUT"
WORK=$(mktemp -d)   # caches, checkpoints and models stay out of $OUT
exec > >(tee -a "$OUT/recipes.log") 2>&1
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader || true
$PY -c "import torch, transformers, triton; print('torch', torch.__version__, 'transformers', transformers.__version__, 'triton', triton.__version__)"
$PY -c "import peft" 2>/dev/null || $PY -m pip install --no-deps --no-index -q .gpu_carry/peft-*.whl \
    || echo "WARNING: no peft and no .gpu_carry/peft-*.whl: step 3 (LoRA) will be skipped"

GPT2=(recipes/pretrain_gpt2.py --config "${GPT2_CONFIG:-recipes/configs/gpt2_124m_1gpu.yaml}" --dataset embedded --tokenizer auto
      --data_cache_dir "$WORK/cache" --save_strategy no --logging_steps 1 --disable_tqdm true ${EXTRA_ARGS:-})

echo "== 1. GPT-2 124M, stable_flash, $MINUTES min, recording the batch order"
$PY "${GPT2[@]}" --attn stable_flash --max_minutes "$MINUTES" --output_dir "$WORK/stable_flash" \
    --record_batches "$OUT/batch_order.json" --metrics_csv "$OUT/gpt2_stable_flash.csv"
STEPS=$($PY -c "import json, sys; print(json.load(open(sys.argv[1]))['global_step'])" "$WORK/stable_flash/trainer_state.json")

echo "== 2. GPT-2 124M, sdpa, replaying the same batches to step $STEPS"
$PY "${GPT2[@]}" --attn sdpa --stop_at_step "$STEPS" --max_minutes "$($PY -c "print($MINUTES + 0.5)")" \
    --output_dir "$WORK/sdpa" --replay_batches "$OUT/batch_order.json" --metrics_csv "$OUT/gpt2_sdpa.csv"

echo "== 3. LoRA on a tiny Llama (stable_flash, bf16)"
if $PY -c "import peft" 2>/dev/null; then
    $PY recipes/tiny_llama.py "$WORK/tiny_llama"
    $PY recipes/finetune_lora.py --config recipes/configs/llama_tiny_lora.yaml --model_name_or_path "$WORK/tiny_llama" \
        --output_dir "$WORK/lora" --data_cache_dir "$WORK/cache" --metrics_csv "$OUT/lora_tiny_llama.csv" \
        --disable_tqdm true ${EXTRA_ARGS:-}
    ls "$WORK/lora/adapter_model.safetensors"
    $PY recipes/plot_curves.py "$OUT/lora_tiny_llama.csv:lora_tiny_llama"
else
    echo "SKIPPED: peft is not installed (carry .gpu_carry/peft-*.whl)"
fi

echo "== summary (GPT-2 124M, one GPU, same replayed batches; tokens/s leave out the first step)"
$PY recipes/plot_curves.py --png "$OUT/curves.png" --json "$OUT/summary.json" \
    "$OUT/gpt2_stable_flash.csv:stable_flash" "$OUT/gpt2_sdpa.csv:sdpa"

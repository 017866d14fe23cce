#!/usr/bin/env bash
# Issue 7 on a 2-GPU machine (about 6-7 minutes with the default MINUTES=2.5), both runs through accelerate launch:
#   1. GPT-2 124M, one-GPU config (micro-batch 32 x 16 accumulation), stable_flash, on GPU 0 with
#      recipes/accelerate/single_gpu.yaml for $MINUTES minutes, recording the batch order;
#   2. the same recipe with recipes/accelerate/ddp_2gpu.yaml (micro-batch 32 x 2 GPUs x 8 accumulation:
#      the same 524,288-token global batch), replaying that order to the same step.
# The loss curves must match (same samples in every optimizer step); tokens/s give the scaling.
# CPU dry run of the plumbing: GPT2_CONFIG=recipes/configs/gpt2_tiny_cpu.yaml EXTRA_ARGS='--use_cpu true' MINUTES=0.2 DDP_ACCUM=1
# Run from the repo root:  OUT=<dir> PYTHONPATH=$PWD bash gpu/recipes_multi.sh
# Into $OUT: gpt2_1gpu.csv, gpt2_ddp2.csv, curves_multi.png, summary_multi.json, batch_order.json, recipes_multi.log.
set -euo pipefail
: "${OUT:?set OUT to the folder for the results}"
MINUTES=${MINUTES:-2.5}
DDP_ACCUM=${DDP_ACCUM:-8}   # half the one-GPU run's 16: the same global batch on 2 GPUs
PY=${PYTHON:-python3}
export PYTHONPATH=${PYTHONPATH:-$PWD} HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=true
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1  # keep NVLink multicast off
mkdir -p "$OUT"
WORK=$(mktemp -d)
exec > >(tee -a "$OUT/recipes_multi.log") 2>&1
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader || true
LAUNCH=($PY -m accelerate.commands.launch)
GPT2=(recipes/pretrain_gpt2.py --config "${GPT2_CONFIG:-recipes/configs/gpt2_124m_1gpu.yaml}" --dataset embedded --tokenizer auto
      --attn stable_flash --data_cache_dir "$WORK/cache" --save_strategy no --logging_steps 1 --disable_tqdm true ${EXTRA_ARGS:-})

echo "== 1. one GPU (single_gpu.yaml), $MINUTES min, recording the batch order"
CUDA_VISIBLE_DEVICES=0 "${LAUNCH[@]}" --config_file recipes/accelerate/single_gpu.yaml "${GPT2[@]}" \
    --max_minutes "$MINUTES" --output_dir "$WORK/one" --record_batches "$OUT/batch_order.json" --metrics_csv "$OUT/gpt2_1gpu.csv"
STEPS=$($PY -c "import json, sys; print(json.load(open(sys.argv[1]))['global_step'])" "$WORK/one/trainer_state.json")

echo "== 2. DDP on 2 GPUs (ddp_2gpu.yaml), same global batch, replaying to step $STEPS"
"${LAUNCH[@]}" --config_file recipes/accelerate/ddp_2gpu.yaml "${GPT2[@]}" --gradient_accumulation_steps "$DDP_ACCUM" \
    --stop_at_step "$STEPS" --max_minutes "$MINUTES" --output_dir "$WORK/ddp2" --replay_batches "$OUT/batch_order.json" \
    --metrics_csv "$OUT/gpt2_ddp2.csv"

echo "== summary (|dloss| = largest loss difference from the one-GPU run at the same step; scaling = tokens/s ratio)"
$PY recipes/plot_curves.py --png "$OUT/curves_multi.png" --json "$OUT/summary_multi.json" \
    "$OUT/gpt2_1gpu.csv:1_gpu" "$OUT/gpt2_ddp2.csv:ddp_2_gpus"
$PY -c "import json, sys; s = json.load(open(sys.argv[1])); r = s['ddp_2_gpus']['median_tokens_per_s'] / s['1_gpu']['median_tokens_per_s']; print(f'scaling 1 -> 2 GPUs: {r:.2f}x ({r / 2:.0%} efficiency)')" "$OUT/summary_multi.json"

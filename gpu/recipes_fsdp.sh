#!/usr/bin/env bash
# Issue 7: the GPT-2 recipe through `accelerate launch --config_file recipes/accelerate/fsdp.yaml` on 2 GPUs
# (about 3 minutes). It replays the batch order of the committed one-GPU/DDP run
# (docs/results/recipes_multi/batch_order.json, micro-batch 32 x 2 GPUs x 8 accumulation = the same
# 524,288-token global batch), so the FSDP loss curve must match those runs step for step:
#   1. FSDP2 on 2 GPUs to step 14, saving a checkpoint at step 7 (full state dict, safetensors);
#   2. FSDP2 again, resumed from checkpoint-7, to step 14 (steps 8-14 must match run 1).
# Run from the repo root:  OUT=<dir> PYTHONPATH=$PWD bash gpu/recipes_fsdp.sh
# Into $OUT: gpt2_fsdp2.csv, gpt2_fsdp2_resumed.csv, checkpoint_files.txt, summary_fsdp.json,
# curves_fsdp.png, recipes_fsdp.log.
set -euo pipefail
: "${OUT:?set OUT to the folder for the results}"
PY=${PYTHON:-python3}
REF=docs/results/recipes_multi
export PYTHONPATH=${PYTHONPATH:-$PWD} HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=true
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1  # keep NVLink multicast off
mkdir -p "$OUT"
WORK=$(mktemp -d)
exec > >(tee -a "$OUT/recipes_fsdp.log") 2>&1
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader || true
LAUNCH=($PY -m accelerate.commands.launch --config_file recipes/accelerate/fsdp.yaml --num_processes 2)
GPT2=(recipes/pretrain_gpt2.py --config recipes/configs/gpt2_124m_1gpu.yaml --dataset embedded --tokenizer auto
      --attn stable_flash --data_cache_dir "$WORK/cache" --logging_steps 1 --disable_tqdm true
      --gradient_accumulation_steps 8 --replay_batches "$REF/batch_order.json" --stop_at_step 14
      --output_dir "$WORK/fsdp")

echo "== 1. FSDP2 on 2 GPUs (fsdp.yaml), replaying the committed batch order to step 14, checkpoint at step 7"
"${LAUNCH[@]}" "${GPT2[@]}" --save_strategy steps --save_steps 7 --metrics_csv "$OUT/gpt2_fsdp2.csv"
find "$WORK/fsdp/checkpoint-7" -maxdepth 1 -type f -printf '%f %s\n' | sort | tee "$OUT/checkpoint_files.txt"

echo "== 2. FSDP2 resumed from checkpoint-7 to step 14"
"${LAUNCH[@]}" "${GPT2[@]}" --save_strategy no --resume_from_checkpoint "$WORK/fsdp/checkpoint-7" \
    --metrics_csv "$OUT/gpt2_fsdp2_resumed.csv"

echo "== summary (max_abs_loss_diff_vs_first: against the committed one-GPU run at the same steps)"
$PY recipes/plot_curves.py --png "$OUT/curves_fsdp.png" --json "$OUT/summary_fsdp.json" \
    "$REF/gpt2_1gpu.csv:1_gpu" "$REF/gpt2_ddp2.csv:ddp_2_gpus" "$OUT/gpt2_fsdp2.csv:fsdp2_2_gpus" \
    "$OUT/gpt2_fsdp2_resumed.csv:fsdp2_resumed_at_7"
cat "$OUT/summary_fsdp.json"

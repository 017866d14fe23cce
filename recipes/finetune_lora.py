"""LoRA fine-tuning (PEFT) of a causal LM such as Llama-3.1-8B with stable_flash attention, in bf16.

    # Llama-3.1-8B from a local folder (or its hub name, with access), Alpaca data from the hub
    python recipes/finetune_lora.py --config recipes/configs/llama31_8b_lora.yaml \
        --model_name_or_path /models/Llama-3.1-8B
    # the same on 4 GPUs
    accelerate launch --config_file recipes/accelerate/ddp_4gpu.yaml recipes/finetune_lora.py \
        --config recipes/configs/llama31_8b_lora.yaml --model_name_or_path /models/Llama-3.1-8B
    # a smoke test with a tiny random Llama and the embedded text, no download
    python recipes/tiny_llama.py runs/tiny_llama
    python recipes/finetune_lora.py --config recipes/configs/llama_tiny_lora.yaml

The tokenizer is the model's own (`--tokenizer` overrides it). Texts are packed to block_size like
pretraining (instruction rows become Alpaca prompts, see recipes/corpus.py). The adapter is saved
as adapter_model.safetensors in output_dir; `--resume_from_checkpoint last` continues a run.
"""

from __future__ import annotations

import logging
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # `python recipes/finetune_lora.py` from anywhere

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, Trainer, TrainingArguments, set_seed

from recipes.config import ConfigError, DataArguments, RunArguments, parse_config
from recipes.corpus import PackedDataset, tokenize_to_cache
from recipes.training import apply_fix_options, attention_kwargs, end_distributed, global_batch, train_and_save

logger = logging.getLogger("recipes.finetune_lora")


@dataclass
class LoraArguments:
    """The base model and the LoRA adapter."""

    model_name_or_path: str | None = field(default=None, metadata={"help": "Base model folder or hub name (required)."})
    dtype: Literal["bfloat16", "float16", "float32"] = field(
        default="bfloat16", metadata={"help": "Base weights dtype."}
    )
    lora_r: int = field(default=16, metadata={"help": "LoRA rank."})
    lora_alpha: int = field(default=32, metadata={"help": "LoRA scaling numerator (scale = alpha / r)."})
    lora_dropout: float = field(default=0.05, metadata={"help": "Dropout on the LoRA input."})
    lora_target_modules: list[str] = field(
        default_factory=lambda: ["q_proj", "k_proj", "v_proj", "o_proj"],
        metadata={"help": "Module names that get adapters."},
    )

    def __post_init__(self):
        if not self.model_name_or_path:
            raise ConfigError("model_name_or_path is required (a local folder or a hub name)")
        if self.lora_r < 1 or self.lora_alpha < 1:
            raise ConfigError("lora_r and lora_alpha must be >= 1")
        if not 0 <= self.lora_dropout < 1:
            raise ConfigError(f"lora_dropout must be in [0, 1), got {self.lora_dropout}")


def build_model(lora: LoraArguments, run: RunArguments):
    """The base model in `lora.dtype` with the chosen attention, wrapped with trainable LoRA adapters."""
    try:
        from peft import LoraConfig, get_peft_model
    except ImportError:
        raise SystemExit("finetune_lora.py needs `peft` (pip install peft)") from None
    model = AutoModelForCausalLM.from_pretrained(
        lora.model_name_or_path, dtype=getattr(torch, lora.dtype), **attention_kwargs(run)
    )
    apply_fix_options(model, run)
    adapter = LoraConfig(
        r=lora.lora_r,
        lora_alpha=lora.lora_alpha,
        lora_dropout=lora.lora_dropout,
        target_modules=lora.lora_target_modules,
        task_type="CAUSAL_LM",
    )
    return get_peft_model(model, adapter)


def main(argv: list[str] | None = None) -> Trainer:
    try:
        lora, run, data, args = parse_config((LoraArguments, RunArguments, DataArguments, TrainingArguments), argv)
        if data.tokenizer == "bpe":
            raise ConfigError("LoRA uses the base model's vocabulary: --tokenizer must be 'auto' or a tokenizer path")
    except ConfigError as e:
        raise SystemExit(f"finetune_lora.py: error: {e}") from None
    logging.basicConfig(
        format="%(asctime)s %(name)s: %(message)s", level=logging.INFO if args.process_index == 0 else logging.WARNING
    )
    set_seed(args.seed)

    tokenizer = AutoTokenizer.from_pretrained(lora.model_name_or_path if data.tokenizer == "auto" else data.tokenizer)
    with args.main_process_first(desc="tokenize and cache"):
        dataset = PackedDataset(
            tokenize_to_cache(data, tokenizer, Path(data.data_cache_dir).expanduser()), data.block_size
        )
    model = build_model(lora, run)
    if len(tokenizer) > model.get_input_embeddings().num_embeddings:
        raise SystemExit(
            f"finetune_lora.py: error: tokenizer has {len(tokenizer)} tokens, the model's vocabulary "
            f"{model.get_input_embeddings().num_embeddings}; use the model's own tokenizer"
        )
    trainable, total = model.get_nb_trainable_parameters()
    logger.info(
        "LoRA r=%d on %s: %d trainable of %d parameters, attn=%s, %d blocks of %d tokens",
        lora.lora_r,
        lora.lora_target_modules,
        trainable,
        total,
        run.attn,
        len(dataset),
        data.block_size,
    )

    tokens_per_step = global_batch(args) * data.block_size
    return train_and_save(model, tokenizer, dataset, data, args, run, tokens_per_step)


if __name__ == "__main__":
    main()
    end_distributed()

"""Pre-train GPT-2 from scratch with transformers' Trainer: the paper's failure case and its fix.

    # the paper's setup (Section 3.1) on 4 GPUs, failing vs fixed attention on identical batches
    accelerate launch --config_file recipes/accelerate/ddp_4gpu.yaml recipes/pretrain_gpt2.py \
        --config recipes/configs/gpt2_124m_paper.yaml --attn sdpa --record_batches runs/order.json
    accelerate launch --config_file recipes/accelerate/ddp_4gpu.yaml recipes/pretrain_gpt2.py \
        --config recipes/configs/gpt2_124m_paper.yaml --attn stable_flash --replay_batches runs/order.json
    # a one-minute CPU smoke test
    python recipes/pretrain_gpt2.py --config recipes/configs/gpt2_tiny_cpu.yaml

Every YAML key is a command-line flag (the command line wins): GPT2Arguments below, RunArguments
and DataArguments in recipes/config.py, and transformers' TrainingArguments. Checkpoints are
safetensors in output_dir; `--resume_from_checkpoint last` continues the newest one.
"""

from __future__ import annotations

import logging
import sys
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # `python recipes/pretrain_gpt2.py` from anywhere

from transformers import AutoModelForCausalLM, GPT2Config, Trainer, TrainingArguments, set_seed

from recipes.config import ConfigError, DataArguments, RunArguments, parse_config
from recipes.corpus import PackedDataset, source_fingerprint, tokenize_to_cache, training_text_sample
from recipes.tokenizer import GPT2_TOKENIZER, load_tokenizer
from recipes.training import apply_fix_options, attention_kwargs, end_distributed, global_batch, train_and_save

logger = logging.getLogger("recipes.pretrain_gpt2")


@dataclass
class GPT2Arguments:
    """Model shape (the context length is DataArguments.block_size)."""

    n_layer: int = field(default=12, metadata={"help": "Transformer blocks."})
    n_head: int = field(default=12, metadata={"help": "Attention heads."})
    n_embd: int = field(default=768, metadata={"help": "Embedding width."})
    attn_dropout: float = field(default=0.0, metadata={"help": "Attention-probability dropout (GPT2Config: 0.1)."})
    dropout: float = field(default=0.0, metadata={"help": "Residual and embedding dropout (GPT2Config: 0.1)."})
    vocab_multiple: int = field(default=64, metadata={"help": "Pad the vocabulary to a multiple (50257 -> 50304)."})

    def __post_init__(self):
        if min(self.n_layer, self.n_head, self.n_embd, self.vocab_multiple) < 1:
            raise ConfigError("n_layer, n_head, n_embd and vocab_multiple must be >= 1")
        if self.n_embd % self.n_head:
            raise ConfigError(f"n_embd ({self.n_embd}) must be divisible by n_head ({self.n_head})")
        if not (0 <= self.attn_dropout < 1 and 0 <= self.dropout < 1):
            raise ConfigError("attn_dropout and dropout must be in [0, 1)")


def build_model(gpt2: GPT2Arguments, run: RunArguments, block_size: int, tokenizer):
    """A freshly initialized GPT2LMHeadModel (GPT-2's init) with the chosen attention."""
    vocab = -(-len(tokenizer) // gpt2.vocab_multiple) * gpt2.vocab_multiple
    config = GPT2Config(
        n_layer=gpt2.n_layer,
        n_head=gpt2.n_head,
        n_embd=gpt2.n_embd,
        n_positions=block_size,
        vocab_size=vocab,
        attn_pdrop=gpt2.attn_dropout,
        resid_pdrop=gpt2.dropout,
        embd_pdrop=gpt2.dropout,
        bos_token_id=tokenizer.eos_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )
    model = AutoModelForCausalLM.from_config(config, **attention_kwargs(run))
    apply_fix_options(model, run)
    return model


def main(argv: list[str] | None = None) -> Trainer:
    try:
        gpt2, run, data, args = parse_config((GPT2Arguments, RunArguments, DataArguments, TrainingArguments), argv)
    except ConfigError as e:
        raise SystemExit(f"pretrain_gpt2.py: error: {e}") from None
    logging.basicConfig(
        format="%(asctime)s %(name)s: %(message)s", level=logging.INFO if args.process_index == 0 else logging.WARNING
    )
    set_seed(args.seed)

    cache = Path(data.data_cache_dir).expanduser()
    with args.main_process_first(desc="tokenize and cache"):  # rank 0 fills the cache, the others read it
        tokenizer = load_tokenizer(
            data.tokenizer,
            own=GPT2_TOKENIZER,
            texts=lambda: training_text_sample(data),
            fingerprint=source_fingerprint(data),
            vocab_size=data.bpe_vocab_size,
            cache_dir=cache,
        )
        dataset = PackedDataset(tokenize_to_cache(data, tokenizer, cache), data.block_size)
    model = build_model(gpt2, run, data.block_size, tokenizer)
    tokens_per_step = global_batch(args) * data.block_size
    logger.info(
        "GPT-2 %.1fM parameters, attn=%s, %d blocks of %d tokens, %d tokens per optimizer step",
        model.num_parameters() / 1e6,
        run.attn,
        len(dataset),
        data.block_size,
        tokens_per_step,
    )

    return train_and_save(model, tokenizer, dataset, data, args, run, tokens_per_step)


if __name__ == "__main__":
    main()
    end_distributed()

"""A tiny random Llama with an offline tokenizer, saved like a real checkpoint (for LoRA smoke tests).

    python recipes/tiny_llama.py runs/tiny_llama      # then: finetune_lora.py --model_name_or_path runs/tiny_llama

The tokenizer is the offline byte-level BPE (recipes/tokenizer.py) trained on the embedded text;
the model is Llama-3-shaped (GQA, RoPE, SwiGLU) but a few hundred thousand parameters.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch
from transformers import LlamaConfig, LlamaForCausalLM

from recipes.corpus import EMBEDDED_DIR, read_text_file
from recipes.tokenizer import train_bpe


def save_tiny_llama(path: str | Path, vocab_size: int = 512, seed: int = 0) -> Path:
    """Save a tiny LlamaForCausalLM (bf16, 2 layers, 4 query / 2 KV heads of 16) and its tokenizer to `path`."""
    tokenizer = train_bpe((read_text_file(f) for f in sorted(EMBEDDED_DIR.glob("*.txt.gz"))[:2]), vocab_size)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=512,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config).to(torch.bfloat16)
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return Path(path)


if __name__ == "__main__":
    print(save_tiny_llama(sys.argv[1] if len(sys.argv) > 1 else "runs/tiny_llama"))

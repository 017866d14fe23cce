"""Tiny models of every supported family, built from configs (no downloads)."""

from __future__ import annotations

import copy

import torch
import transformers

VOCAB = 128
COMMON = dict(vocab_size=VOCAB, max_position_embeddings=128, pad_token_id=0, bos_token_id=1, eos_token_id=2)
DECODER = dict(
    COMMON, hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
    num_key_value_heads=2,
)
WINDOW = 6  # sliding window shorter than the test sequences, so it matters

FAMILIES = {
    "gpt2": ("GPT2Config", "GPT2LMHeadModel", dict(
        vocab_size=VOCAB, n_positions=128, n_embd=64, n_layer=2, n_head=4, attn_pdrop=0.0,
        resid_pdrop=0.0, embd_pdrop=0.0, pad_token_id=0, bos_token_id=1, eos_token_id=2)),
    "llama": ("LlamaConfig", "LlamaForCausalLM", dict(
        DECODER, rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                               "high_freq_factor": 4.0, "original_max_position_embeddings": 32})),
    "mistral": ("MistralConfig", "MistralForCausalLM", dict(DECODER, sliding_window=WINDOW, head_dim=16)),
    "qwen2": ("Qwen2Config", "Qwen2ForCausalLM", dict(DECODER)),
    "qwen3": ("Qwen3Config", "Qwen3ForCausalLM", dict(DECODER, head_dim=16)),
    "gemma2": ("Gemma2Config", "Gemma2ForCausalLM", dict(
        DECODER, head_dim=16, sliding_window=WINDOW, attn_logit_softcapping=5.0,
        final_logit_softcapping=30.0, query_pre_attn_scalar=16)),
    "gemma3": ("Gemma3TextConfig", "Gemma3ForCausalLM", dict(
        DECODER, head_dim=16, sliding_window=WINDOW, query_pre_attn_scalar=16,
        layer_types=["sliding_attention", "full_attention"])),
    "phi3": ("Phi3Config", "Phi3ForCausalLM", dict(DECODER, sliding_window=WINDOW + 10)),
    "gpt_oss": ("GptOssConfig", "GptOssForCausalLM", dict(  # learned attention sinks (s_aux)
        DECODER, head_dim=16, sliding_window=WINDOW, num_local_experts=4, num_experts_per_tok=2,
        layer_types=["sliding_attention", "full_attention"])),
}


def tiny_model(family: str, attn_implementation: str, dtype=torch.float32, seed: int = 0):
    """A freshly initialised tiny model of ``family`` (same weights for the same seed)."""
    config_name, model_name, kwargs = FAMILIES[family]
    config = getattr(transformers, config_name)(**copy.deepcopy(kwargs))
    torch.manual_seed(seed)
    model = getattr(transformers, model_name)(config).to(dtype)
    model.set_attn_implementation(attn_implementation)
    return model


def left_padded_batch(seed: int = 0, lengths=(11, 7, 13)):
    """input_ids (B, S) and attention_mask with left padding; no special tokens inside."""
    g = torch.Generator().manual_seed(seed)
    seqlen = max(lengths)
    ids = torch.randint(3, VOCAB, (len(lengths), seqlen), generator=g)
    mask = torch.zeros_like(ids)
    for row, n in enumerate(lengths):
        mask[row, seqlen - n:] = 1
        ids[row, : seqlen - n] = 0
    return ids, mask


def lm_labels(ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Labels for a causal LM loss on a padded batch: -100 on pads and on the first real token of
    a left-padded row (it would be predicted from a pad row, whose output is undefined)."""
    predictor_is_real = torch.cat([torch.zeros_like(mask[:, :1]), mask[:, :-1]], dim=1)
    return ids.masked_fill((mask == 0) | (predictor_is_real == 0), -100)


def llama31_like(seed: int = 0):
    """A tiny Llama-3.1-shaped model (GQA 4:2, llama3 rope scaling, large init so scores spread),
    attn_implementation="stable_flash"; token 0 (padding) embeds to zero."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    cfg = LlamaConfig(
        hidden_size=64, intermediate_size=128, num_attention_heads=4, num_key_value_heads=2,
        head_dim=16, num_hidden_layers=2, vocab_size=64, max_position_embeddings=128,
        initializer_range=0.5, bos_token_id=0, eos_token_id=0, pad_token_id=0,
        rope_parameters={"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0,
                         "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                         "original_max_position_embeddings": 32},
        attn_implementation="stable_flash",
    )
    return LlamaForCausalLM(cfg)

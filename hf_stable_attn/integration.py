"""Registration of ``attn_implementation="stable_flash"`` in transformers.

The only module that knows transformers internals. Transformers sends every implementation
whose name contains "flash" through its flash-attention path (unpadding, packed sequences,
static-cache masks) and loads that path's functions by name in
``modeling_flash_attention_utils._lazy_imports``; an unknown name is looked up as a hub kernel
and fails. So we:

1. register our attention function and transformers' ``flash_attention_mask`` under our name
   (a custom name without its mask function would silently get no padding mask);
2. wrap ``_lazy_imports`` so that our name resolves to ``flash_attn_func`` /
   ``flash_attn_varlen_func`` of this package, and every other name to transformers' own code;
3. hand the flash path ``position_ids`` only where they can mark packed sequences (its test for
   them costs small kernels on every call in some releases).

Our attention function mirrors transformers' ``flash_attention_forward`` (which cannot serve
GPT-2 in fp32: it looks for an ``nn.Linear`` to pick a dtype), makes the model's options
(``hf_stable_attn.configure``) active while ``_flash_attention_forward`` runs, and hands the
inputs to the observers of ``hf_stable_attn.hooks``. ``tests/test_transformers_contract.py`` fails loudly if a release
moves any of these pieces.
"""

from __future__ import annotations

import logging

import torch
from transformers import AttentionInterface
from transformers import modeling_flash_attention_utils as fa_utils
from transformers.masking_utils import AttentionMaskInterface, flash_attention_mask

from . import hooks
from .interface import flash_attn_func, flash_attn_varlen_func
from .options import _STATE, options_from_config

ATTN_IMPLEMENTATION = "stable_flash"

logger = logging.getLogger(__name__)
_warned_compiled_unpadding = False


@torch.compiler.disable
def _warn_compiled_unpadding() -> None:
    """Say once that a padding mask under ``torch.compile`` is slow here (runs outside the graph:
    the unpadding that follows breaks it anyway)."""
    global _warned_compiled_unpadding
    if not _warned_compiled_unpadding:
        _warned_compiled_unpadding = True
        logger.warning(
            "stable_flash under torch.compile with a padding mask (e.g. generate() with a static "
            "cache, which Transformers compiles) goes through Transformers' unpadding, which "
            "breaks the graph in every layer, as it does for flash_attention_2; on an H100 "
            "static-cache generation ran at about 0.1x sdpa. Generate with the default dynamic "
            "cache, or switch the model to attn_implementation='sdpa' for generation (the fix "
            "matters for training)."
        )


def _target_dtype(query: torch.Tensor, module: torch.nn.Module) -> torch.dtype | None:
    """The dtype fp32 queries are cast to: autocast's, else the layer's weights' (PEFT casts
    norms to fp32); None keeps fp32 (served by the reference path)."""
    if query.dtype != torch.float32:
        return None
    device_type = query.device.type
    if torch.is_autocast_enabled(device_type):
        return torch.get_autocast_dtype(device_type)
    weight = next((p for p in module.parameters() if p.is_floating_point()), None)
    return weight.dtype if weight is not None and weight.dtype != torch.float32 else None


def _without_unused_position_ids(kwargs: dict, query: torch.Tensor) -> dict:
    """``kwargs`` less ``position_ids`` where they cannot mark packed sequences: a batch of more
    than one row, or one query per row (decoding). Transformers' flash path reads them only to
    detect packing, and some releases (5.17) run that test on every call: about three small
    kernels per layer (measured on GPT-2), and for a one-row batch a device sync."""
    if kwargs.get("position_ids") is not None and (query.shape[0] != 1 or query.shape[2] == 1):
        return {**kwargs, "position_ids": None}
    return kwargs


def stable_flash_attention_forward(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    dropout: float = 0.0,
    scaling: float | None = None,
    sliding_window: int | None = None,
    softcap: float | None = None,
    is_causal: bool | None = None,
    **kwargs,
) -> tuple[torch.Tensor, None]:
    """Transformers attention function: query (B, Hq, Sq, D), key/value (B, Hk, Sk, D) ->
    output (B, Sq, Hq, D) and no attention weights."""
    if kwargs.get("output_attentions", False):
        raise ValueError(
            "stable_flash never materializes attention weights, so output_attentions=True is not "
            "supported; run that forward with model.set_attn_implementation('eager'), or use "
            "`hf-stable-attn probe` to inspect scores"
        )
    if attention_mask is not None and attention_mask.dim() != 2:
        raise ValueError(
            f"stable_flash takes padding masks of shape (batch, seq_len); got a {attention_mask.dim()}D "
            "attention mask (a custom or prepared mask). Pass a 2D padding mask (1 = token, 0 = pad), "
            "packed sequences through position_ids, or use attn_implementation='sdpa', 'eager' or "
            "'flex_attention' for arbitrary masks"
        )
    if attention_mask is not None and torch.compiler.is_compiling():
        _warn_compiled_unpadding()
    if hooks.has_observers():
        observed = dict(
            kwargs, dropout=dropout, scaling=scaling, sliding_window=sliding_window,
            softcap=softcap, is_causal=module.is_causal if is_causal is None else is_causal,
        )
        hooks.notify(module, query, key, value, attention_mask, observed)
    head_dim, v_head_dim = query.shape[-1], value.shape[-1]
    if v_head_dim != head_dim:  # e.g. MLA: pad V to the query head dim, crop the output
        value = torch.nn.functional.pad(value, [0, head_dim - v_head_dim])
    previous = _STATE["active"]
    _STATE["active"] = options_from_config(module.config)
    try:
        out = fa_utils._flash_attention_forward(
            query.transpose(1, 2),
            key.transpose(1, 2),
            value.transpose(1, 2),
            attention_mask,
            query_length=query.shape[2],
            is_causal=module.is_causal if is_causal is None else is_causal,
            dropout=dropout,
            softmax_scale=scaling,
            sliding_window=sliding_window,
            softcap=softcap,
            target_dtype=_target_dtype(query, module),
            attn_implementation=module.config._attn_implementation,
            layer_idx=getattr(module, "layer_idx", None),
            **_without_unused_position_ids(kwargs, query),
        )
    finally:
        _STATE["active"] = previous
    return out[..., :v_head_dim], None


def _resolve_stable_flash(original):
    """Wrap transformers' ``_lazy_imports`` so that our name loads our functions."""

    def lazy_imports(implementation, *args, **kwargs):
        if implementation == ATTN_IMPLEMENTATION:
            return (
                flash_attn_func,
                flash_attn_varlen_func,
                None,  # no paged-KV-cache function
                fa_utils._pad_input,
                fa_utils._unpad_input,
            )
        return original(implementation, *args, **kwargs)

    lazy_imports.__wrapped_by_hf_stable_attn__ = original
    return lazy_imports


def register() -> None:
    """Make ``attn_implementation="stable_flash"`` available (idempotent)."""
    AttentionInterface.register(ATTN_IMPLEMENTATION, stable_flash_attention_forward)
    AttentionMaskInterface.register(ATTN_IMPLEMENTATION, flash_attention_mask)
    if not hasattr(fa_utils._lazy_imports, "__wrapped_by_hf_stable_attn__"):
        fa_utils._lazy_imports = _resolve_stable_flash(fa_utils._lazy_imports)

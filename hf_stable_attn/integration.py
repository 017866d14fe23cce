"""Registration of ``attn_implementation="stable_flash"`` in transformers.

The only module that knows transformers internals. Transformers sends every implementation
whose name contains "flash" through its flash-attention path (unpadding, packed sequences,
static-cache masks) and loads that path's functions by name in
``modeling_flash_attention_utils._lazy_imports``; an unknown name is looked up as a hub kernel
and fails. So we:

1. register our attention function and a mask function under our name (a custom name without
   a mask function would silently get no padding mask): transformers' ``flash_attention_mask``,
   except that a decoding step into a static cache gets a mask as long as the cache
   (``stable_flash_mask``);
2. wrap ``_lazy_imports`` so that our name resolves to ``flash_attn_func`` /
   ``flash_attn_varlen_func`` of this package, and every other name to transformers' own code;
3. keep our name on models that list their own flash kernels (``_keeps_our_name``: gpt-oss,
   for which Transformers swaps any name containing "flash" for vllm-flash-attn3);
4. send a call through that path only where it does something for us (``_flash_path_needed``:
   packed sequences) and hand it ``position_ids`` only where they can mark packed sequences
   (its test for them costs small kernels on every call in some releases);
5. serve every other call ourselves (``_attend``): no padding, and padding masks, which go to
   the kernel as a key padding mask. The flash path would unpad them in every layer
   (``nonzero``, an ``.item()`` sync, gathers): a graph break under ``torch.compile``
   (generation with a static cache, which Transformers compiles, ran ten times slower), and in
   eager GPT-2 training 0.85-0.90x ``sdpa`` against 0.97-0.98x through the kernel's mask
   (docs/kernel_notes.md, v15b). This also skips the path's host time, which a decoding step
   notices;
6. update a paged cache that continuous batching hands the attention function, as
   Transformers 5.19-5.23 do (``_with_paged_cache``).

Our attention function mirrors transformers' ``flash_attention_forward`` (which cannot serve
GPT-2 in fp32: it looks for an ``nn.Linear`` to pick a dtype), makes the model's options
(``hf_stable_attn.configure``) active while the attention runs, and hands the
inputs to the observers of ``hf_stable_attn.hooks``. ``tests/test_transformers_contract.py`` fails loudly if a release
moves any of these pieces.
"""

from __future__ import annotations

import functools

import torch
from torch.compiler import is_compiling
from transformers import AttentionInterface, PreTrainedModel
from transformers import modeling_flash_attention_utils as fa_utils
from transformers.generation.continuous_batching import PagedAttentionCache
from transformers.masking_utils import (AttentionMaskInterface, causal_mask_function,
                                        flash_attention_mask)

from . import hooks
from .interface import attend_heads_first, flash_attn_func, flash_attn_varlen_func
from .options import _STATE, options_from_config

ATTN_IMPLEMENTATION = "stable_flash"


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


def _may_mark_packing(query: torch.Tensor, kwargs: dict) -> bool:
    """Whether ``position_ids`` are given where they can mark packed sequences: a one-row batch
    of several queries (query (B, Hq, Sq, D))."""
    return kwargs.get("position_ids") is not None and query.shape[0] == 1 and query.shape[2] > 1


def _without_unused_position_ids(kwargs: dict, query: torch.Tensor) -> dict:
    """``kwargs`` less ``position_ids`` where they cannot mark packed sequences (a batch of more
    than one row, or one query per row). Transformers' flash path reads them only to detect
    packing, and some releases (5.17) run that test on every call: about three small kernels per
    layer (measured on GPT-2), and for a one-row batch a device sync."""
    if kwargs.get("position_ids") is not None and not _may_mark_packing(query, kwargs):
        return {**kwargs, "position_ids": None}
    return kwargs


# Keywords with which models hand Transformers' flash path packed sequences or a paged cache.
_VARLEN_KWARGS = ("cu_seq_lens_q", "cu_seq_lens_k", "max_length_q", "max_length_k", "block_table")


def _flash_path_needed(query: torch.Tensor, attention_mask: torch.Tensor | None,
                       kwargs: dict) -> bool:
    """Whether this call needs Transformers' flash path: packed sequences (its varlen keywords,
    or ``position_ids`` in a one-row batch of several queries without a padding mask).
    Everything else, padding masks included, goes straight to our kernel (``_attend``), which
    saves the path's unpadding and host time: a decode step's attention cost 116 us of host time
    per layer against SDPA's 24 (docs/kernel_notes.md, v12)."""
    if any(kwargs.get(name) is not None for name in _VARLEN_KWARGS):
        return True
    return attention_mask is None and _may_mark_packing(query, kwargs)


def _with_paged_cache(module: torch.nn.Module, key: torch.Tensor, value: torch.Tensor,
                      kwargs: dict) -> tuple[torch.Tensor, torch.Tensor]:
    """key/value (1, Hk, Sk, D) with the rows of a paged cache that comes in ``kwargs``.

    Continuous batching (``generate_batch``) in Transformers 5.19-5.23 hands the attention
    function its ``PagedAttentionCache`` as ``cache``, to be updated first (their own attention
    functions do; 5.24 updates it in the model's layer and passes no such keyword). ``update``
    writes this step's rows, returns every row of the packed sequences, and sets this layer's
    ``cu_seq_lens_k`` and ``max_length_k`` in ``kwargs`` (given per layer type)."""
    cache = kwargs.pop("cache", None)
    if not isinstance(cache, PagedAttentionCache):
        return key, value
    return cache.update(key_states=key, value_states=value, layer_idx=module.layer_idx,
                        kwargs=kwargs)


def _attend(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    dropout: float,
    scaling: float | None,
    sliding_window: int | None,
    softcap: float | None,
    is_causal: bool,
    s_aux: torch.Tensor | None,
) -> torch.Tensor:
    """What Transformers' flash path computes for one padded batch, without it: query
    (B, Hq, Sq, D), key/value (B, Hk, Sk, D) -> output (B, Sq, Hq, D). A padding mask
    ``attention_mask`` (B, M), M <= Sk (a static cache's rows past M are not filled yet), becomes
    the kernel's key padding mask instead of unpadding (which has data-dependent shapes and an
    ``.item()``: graph breaks under ``torch.compile``); padding queries among several per row
    give 0, as after unpadding. A mask longer than its filled rows (``stable_flash_mask``) comes
    with one query per row."""
    keys = None
    if attention_mask is not None:
        filled = attention_mask.shape[1]
        key, value = key[:, :, :filled], value[:, :, :filled]
        keys = attention_mask.bool()
    target = _target_dtype(query, module)
    if target is not None:
        query, key, value = query.to(target), key.to(target), value.to(target)
    window = (-1, -1)
    if sliding_window is not None and key.shape[2] > sliding_window:
        window = (sliding_window - 1, sliding_window - 1)  # as Transformers' flash path
    out = attend_heads_first(
        query, key, value, dropout_p=dropout, softmax_scale=scaling, causal=is_causal,
        window_size=window, softcap=softcap or 0.0, s_aux=s_aux, key_padding_mask=keys,
    )
    seqlen_q = query.shape[2]
    if keys is None or seqlen_q == 1:  # unpadding keeps a single query per row too
        return out
    return out * keys[:, -seqlen_q:, None, None]


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
    causal = module.is_causal if is_causal is None else is_causal
    key, value = _with_paged_cache(module, key, value, kwargs)
    if hooks.has_observers():
        observed = dict(
            kwargs, dropout=dropout, scaling=scaling, sliding_window=sliding_window,
            softcap=softcap, is_causal=causal,
        )
        hooks.notify(module, query, key, value, attention_mask, observed)
    head_dim, v_head_dim = query.shape[-1], value.shape[-1]
    if v_head_dim != head_dim:  # e.g. MLA: pad V to the query head dim, crop the output
        value = torch.nn.functional.pad(value, [0, head_dim - v_head_dim])
    previous = _STATE["active"]
    _STATE["active"] = options_from_config(module.config)
    try:
        if not _flash_path_needed(query, attention_mask, kwargs):
            out = _attend(
                module, query, key, value, attention_mask, dropout, scaling, sliding_window,
                softcap, causal, kwargs.get("s_aux"),
            )
            return _cropped(out, v_head_dim), None
        out = fa_utils._flash_attention_forward(
            query.transpose(1, 2),
            key.transpose(1, 2),
            value.transpose(1, 2),
            attention_mask,
            query_length=query.shape[2],
            is_causal=causal,
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
    return _cropped(out, v_head_dim), None


def _cropped(out: torch.Tensor, head_dim: int) -> torch.Tensor:
    """``out`` (B, S, H, D) cut to ``head_dim``, untouched where it already has it (a slicing
    view would add a node to the autograd graph)."""
    return out if out.shape[-1] == head_dim else out[..., :head_dim]


def stable_flash_mask(batch_size: int, q_length: int, kv_length: int, *args,
                      mask_function=causal_mask_function,
                      attention_mask: torch.Tensor | None = None, config=None, **kwargs):
    """Transformers' ``flash_attention_mask`` (a (B, M) padding mask or None; under
    ``torch.compile`` the mask even where it has no zeros, as telling would break the graph),
    except on a decoding step (one query) into a static cache, where M < ``kv_length``: there
    the mask is extended with zeros (the cache's unfilled rows) to ``kv_length``, and
    ``_attend`` masks those keys instead of cutting them off. So every decoding step hands a compiled model a
    mask of one shape; a new length per token made CUDA graphs (Transformers compiles
    static-cache generation with ``mode="reduce-overhead"``) record a graph per token. Left as
    is where a sliding window shorter than the cache may apply (a model with a window, a layer
    whose mask is not the plain causal one): there the window must count from the last filled
    row, which only the cut keys give."""
    if is_compiling():  # its test for an all-ones mask (``.all()``) would break the graph
        mask = None if attention_mask is None else attention_mask[:, -kv_length:]
    else:
        mask = flash_attention_mask(batch_size, q_length, kv_length, *args,
                                    mask_function=mask_function, attention_mask=attention_mask,
                                    **kwargs)
    if mask is None or q_length != 1 or mask.shape[1] >= kv_length:
        return mask
    window = getattr(config, "sliding_window", None)
    if window is not None and kv_length > window and mask_function is not causal_mask_function:
        return mask
    return torch.nn.functional.pad(mask, (0, kv_length - mask.shape[1]))


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


def _keeps_our_name(check):
    """Wrap ``PreTrainedModel._check_and_adjust_attn_implementation`` so that a model listing
    its own flash kernels (``_compatible_flash_implementations``; gpt-oss's vllm-flash-attn3,
    for its attention sinks) keeps our name: Transformers swaps any name containing "flash" that
    the list lacks for the list's first entry. Our name joins the model's list for that check."""

    @functools.wraps(check)
    def checked(self, attn_implementation, *args, **kwargs):
        own = getattr(self, "_compatible_flash_implementations", None)
        if attn_implementation != ATTN_IMPLEMENTATION or not own:
            return check(self, attn_implementation, *args, **kwargs)
        shadowed = vars(self).get("_compatible_flash_implementations")
        self._compatible_flash_implementations = [*own, ATTN_IMPLEMENTATION]
        try:
            return check(self, attn_implementation, *args, **kwargs)
        finally:
            if shadowed is None:
                del self._compatible_flash_implementations
            else:
                self._compatible_flash_implementations = shadowed

    checked.__wrapped_by_hf_stable_attn__ = check
    return checked


def register() -> None:
    """Make ``attn_implementation="stable_flash"`` available (idempotent)."""
    AttentionInterface.register(ATTN_IMPLEMENTATION, stable_flash_attention_forward)
    AttentionMaskInterface.register(ATTN_IMPLEMENTATION, stable_flash_mask)
    if not hasattr(fa_utils._lazy_imports, "__wrapped_by_hf_stable_attn__"):
        fa_utils._lazy_imports = _resolve_stable_flash(fa_utils._lazy_imports)
    check = PreTrainedModel._check_and_adjust_attn_implementation
    if not hasattr(check, "__wrapped_by_hf_stable_attn__"):
        PreTrainedModel._check_and_adjust_attn_implementation = _keeps_our_name(check)

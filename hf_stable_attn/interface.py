"""``flash_attn_func`` and ``flash_attn_varlen_func``: drop-ins for flash-attn's functions.

Code written against flash-attn runs on ours by changing the import; the fix's options are
extra keyword arguments. Unset options come from ``hf_stable_attn.options`` (the running
model's ``configure`` settings, else the process defaults: fix on, beta 2, dtype-derived
tie tolerance, backend "auto").
"""

from __future__ import annotations

import torch
from torch import Tensor
from torch.compiler import is_compiling

from . import ops
from .options import current_options
from .shift_rule import shift_params


def _unsupported(alibi_slopes, block_table) -> None:
    if alibi_slopes is not None:
        raise NotImplementedError(
            "hf_stable_attn does not implement ALiBi (alibi_slopes); use attn_implementation='sdpa' or 'eager' for ALiBi models"
        )
    if block_table is not None:
        raise NotImplementedError(
            "hf_stable_attn does not implement a paged KV cache (block_table); generate with a dynamic or static cache"
        )


def _run(q, k, v, packed, cu_q, cu_k, max_q, max_k, dropout_p, softmax_scale, causal,
         window_size, softcap, deterministic, stabilize, beta, tie_tolerance, backend,
         key_padding_mask=None, heads_first=False, sinks=None):
    options = current_options().updated(
        stabilize=stabilize, beta=beta, tie_tolerance=tie_tolerance, backend=backend
    )
    chosen = ops.resolve_backend(options.backend, q)
    ops.validate_inputs(q, k, v, chosen, packed, key_padding_mask, heads_first, sinks)
    ops.validate_options(softmax_scale, softcap, dropout_p)
    rows = None
    if packed:
        max_q, max_k, end_q, end_k = ops.validate_packing(q, k, cu_q, cu_k, max_q, max_k)
        if end_q < q.shape[0] or end_k < k.shape[0]:  # rows in no sequence: no kernel sees them
            rows = q.shape[0]
            q, k, v = q[:end_q], k[:end_k], v[:end_k]
    if softmax_scale is None:
        softmax_scale = q.shape[-1] ** -0.5
    left, right = (int(w) for w in window_size)
    # Under torch.compile the cache is bypassed: Dynamo would trace through it anyway (and
    # warn that it ignores it); a compiled graph runs this once, at tracing.
    rule = shift_params.__wrapped__ if is_compiling() else shift_params
    shift = rule(q.dtype, options.stabilize, options.beta, options.tie_tolerance)
    out, lse = ops.attention(
        q, k, v, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, max_seqlen_q=max_q, max_seqlen_k=max_k,
        softmax_scale=softmax_scale, causal=causal, window_left=left, window_right=right,
        softcap=float(softcap or 0.0), dropout_p=float(dropout_p), shift=shift, backend=chosen,
        deterministic=deterministic, key_padding_mask=key_padding_mask, heads_first=heads_first,
        sinks=sinks,
    )
    return (out, lse) if rows is None else _with_unused_rows(out, lse, rows)


def _with_unused_rows(out: Tensor, lse: Tensor, rows: int) -> tuple[Tensor, Tensor]:
    """Packed ``out`` (T, H, D) and ``lse`` (H, T) extended to ``rows`` query rows, the rows in
    no sequence given 0 and lse +inf (as rows that see no key): their gradients are 0."""
    tail = rows - out.shape[0]
    out = torch.cat([out, out.new_zeros(tail, *out.shape[1:])])
    return out, torch.cat([lse, lse.new_full((lse.shape[0], tail), float("inf"))], dim=1)


def flash_attn_func(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    dropout_p: float = 0.0,
    softmax_scale: float | None = None,
    causal: bool = False,
    window_size: tuple[int, int] = (-1, -1),
    softcap: float = 0.0,
    alibi_slopes: Tensor | None = None,
    deterministic: bool = True,
    return_attn_probs: bool = False,
    *,
    s_aux: Tensor | None = None,
    stabilize: bool | None = None,
    beta: float | None = None,
    tie_tolerance: float | None = None,
    backend: str | None = None,
    key_padding_mask: Tensor | None = None,
):
    """Stabilized attention on padded batches.

    Args:
        q: (batch, seqlen_q, nheads, headdim), bf16/fp16 (fp32 on the reference path).
        k, v: (batch, seqlen_k, nheads_k, headdim); nheads % nheads_k == 0 (MQA/GQA).
        dropout_p: attention dropout probability (0 at evaluation).
        softmax_scale: scale of q k^T, default 1/sqrt(headdim).
        causal: causal mask aligned to the bottom right when seqlen_q != seqlen_k.
        window_size: (left, right) sliding window, -1 for unbounded.
        softcap: > 0 applies ``softcap * tanh(S / softcap)``.
        alibi_slopes: not supported (clear error).
        s_aux: attention sinks (nheads,), one logit per query head that joins every row's
            softmax denominator and gives no value (gpt-oss's ``sinks``); differentiable.
        deterministic: accepted for flash-attn compatibility; the backward is always
            deterministic (no atomics).
        return_attn_probs: also return the log-sum-exp (batch, nheads, seqlen_q) and None.
        stabilize, beta, tie_tolerance, backend: the fix's options (see ``StableAttnOptions``).
        key_padding_mask: bool (batch, seqlen_k), False = padding: those keys are never
            attended (an extension of flash-attn's API; positions stay those of the padded
            layout, so causal and window masks count padding too). A row that sees no key
            gives 0.

    Returns:
        out (batch, seqlen_q, nheads, headdim); with ``return_attn_probs`` ``(out, lse, None)``.
    """
    _unsupported(alibi_slopes, None)
    out, lse = _run(
        q, k, v, False, None, None, q.shape[1], k.shape[1], dropout_p, softmax_scale, causal,
        window_size, softcap, deterministic, stabilize, beta, tie_tolerance, backend,
        key_padding_mask, sinks=s_aux,
    )
    return (out, lse, None) if return_attn_probs else out


def attend_heads_first(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    *,
    dropout_p: float,
    softmax_scale: float | None,
    causal: bool,
    window_size: tuple[int, int],
    softcap: float,
    s_aux: Tensor | None = None,
    key_padding_mask: Tensor | None = None,
) -> Tensor:
    """``flash_attn_func`` on Transformers' layout, for the registered attention function:
    query (B, Hq, Sq, D), key/value (B, Hk, Sk, D) -> out (B, Sq, Hq, D). Taking the layout as
    it comes saves the graph three transposes (host time in the forward and the backward).
    ``s_aux``: attention sinks (Hq,), as ``flash_attn_func``'s."""
    out, _ = _run(
        query, key, value, False, None, None, query.shape[2], key.shape[2], dropout_p,
        softmax_scale, causal, window_size, softcap, deterministic=True, stabilize=None,
        beta=None, tie_tolerance=None, backend=None, key_padding_mask=key_padding_mask,
        heads_first=True, sinks=s_aux,
    )
    return out


def flash_attn_varlen_func(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    cu_seqlens_q: Tensor,
    cu_seqlens_k: Tensor,
    max_seqlen_q: int,
    max_seqlen_k: int,
    dropout_p: float = 0.0,
    softmax_scale: float | None = None,
    causal: bool = False,
    window_size: tuple[int, int] = (-1, -1),
    softcap: float = 0.0,
    alibi_slopes: Tensor | None = None,
    deterministic: bool = True,
    return_attn_probs: bool = False,
    block_table: Tensor | None = None,
    *,
    s_aux: Tensor | None = None,
    stabilize: bool | None = None,
    beta: float | None = None,
    tie_tolerance: float | None = None,
    backend: str | None = None,
):
    """Stabilized attention on packed sequences (no padding).

    Args:
        q: (total_q, nheads, headdim); k, v: (total_k, nheads_k, headdim).
        cu_seqlens_q, cu_seqlens_k: int32 (batch + 1,) cumulative sequence lengths, from 0;
            rows past the last sequence belong to none: their output is 0 (lse +inf) and their
            gradients 0.
        max_seqlen_q, max_seqlen_k: the longest sequence of each (ints, or 0-d tensors).
        The offsets and lengths are checked against each other and the tensors (a clear error
        instead of rows a kernel would skip or memory it would misread); on a GPU that reads
        them from the device once per call.
        Other arguments as ``flash_attn_func`` (``s_aux`` included); block_table (paged KV
        cache) is not supported.

    Returns:
        out (total_q, nheads, headdim); with ``return_attn_probs`` ``(out, lse, None)`` where
        lse is (nheads, total_q).
    """
    _unsupported(alibi_slopes, block_table)
    if cu_seqlens_q.dtype != torch.int32 or cu_seqlens_k.dtype != torch.int32:
        cu_seqlens_q, cu_seqlens_k = cu_seqlens_q.to(torch.int32), cu_seqlens_k.to(torch.int32)
    out, lse = _run(
        q, k, v, True, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, dropout_p,
        softmax_scale, causal, window_size, softcap, deterministic, stabilize, beta,
        tie_tolerance, backend, sinks=s_aux,
    )
    return (out, lse, None) if return_attn_probs else out

"""The attention as ``torch.library`` custom ops, the ``autograd.Function`` joining them, and
backend dispatch.

``hf_stable_attn::fwd`` and ``hf_stable_attn::bwd`` are opaque to ``torch.compile`` (fake
implementations give their shapes), so a compiled model traces them with no graph break; in
eager mode their implementations are called directly (``_dispatch_free``). Both run either the
Triton kernel (``hf_stable_attn.kernels``) or the PyTorch reference path; the caller picks which
with ``backend``.
"""

from __future__ import annotations

import functools
import inspect
import logging
import math
import os
from typing import Optional

import torch
from torch import Tensor

from .reference import reference_backward, reference_forward
from .shift_rule import ShiftParams
from .sinks import sinks_grad

logger = logging.getLogger(__name__)

MAX_HEAD_DIM = 256
KERNEL_DTYPES = (torch.bfloat16, torch.float16)
REFERENCE_DTYPES = (torch.bfloat16, torch.float16, torch.float32)


@functools.cache  # a per-call import statement costs host time on every attention call
def _kernels():
    """The Triton launchers (imported on first use: triton is only needed on that path)."""
    from . import kernels

    return kernels


def _masking(cu_q, cu_k, max_q, max_k, scale, causal, left, right, softcap, dropout_p, seed,
             key_padding_mask) -> dict:
    """The masking and dropout keywords that both backends' forward and backward take."""
    return dict(
        cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, max_seqlen_q=max_q, max_seqlen_k=max_k,
        softmax_scale=scale, causal=causal, window_left=left, window_right=right,
        softcap=softcap, dropout_p=dropout_p, seed=int(seed.item()) if seed is not None else 0,
        key_padding_mask=key_padding_mask,
    )


def _forward_impl(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    cu_seqlens_q: Optional[Tensor],
    cu_seqlens_k: Optional[Tensor],
    max_seqlen_q: int,
    max_seqlen_k: int,
    softmax_scale: float,
    causal: bool,
    window_left: int,
    window_right: int,
    softcap: float,
    dropout_p: float,
    seed: Optional[Tensor],
    stabilize: bool,
    beta: float,
    tie_window: float,
    min_gap: float,
    max_gap: float,
    deterministic: bool,
    backend: str,
    key_padding_mask: Optional[Tensor] = None,
    sinks: Optional[Tensor] = None,
) -> tuple[Tensor, Tensor]:
    """Forward; ``deterministic`` is only recorded for the backward. ``sinks`` (Hq,) or None:
    attention sinks, folded into ``out`` and ``lse`` (``hf_stable_attn.sinks``)."""
    masking = _masking(
        cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, softmax_scale, causal,
        window_left, window_right, softcap, dropout_p, seed, key_padding_mask,
    )
    if backend == "triton":
        out, lse = _kernels().flash_attn_fwd(
            q, k, v, **masking, stabilize=stabilize, beta=beta, tie_window=tie_window,
            min_gap=min_gap, max_gap=max_gap, sinks=sinks,
        )
    else:
        params = ShiftParams(stabilize, beta, tie_window, min_gap, max_gap)
        out, lse = reference_forward(q, k, v, **masking, shift=params, sinks=sinks)
    return out.contiguous(), lse.contiguous()


_fwd = torch.library.custom_op("hf_stable_attn::fwd", _forward_impl, mutates_args=())


@_fwd.register_fake
def _fwd_fake(q, k, v, cu_seqlens_q, cu_seqlens_k, *args):
    if cu_seqlens_q is None:
        lse = q.new_empty(q.shape[0], q.shape[2], q.shape[1], dtype=torch.float32)
    else:
        lse = q.new_empty(q.shape[1], q.shape[0], dtype=torch.float32)
    return q.new_empty(q.shape), lse


def _backward_impl(
    dout: Tensor,
    q: Tensor,
    k: Tensor,
    v: Tensor,
    out: Tensor,
    lse: Tensor,
    cu_seqlens_q: Optional[Tensor],
    cu_seqlens_k: Optional[Tensor],
    max_seqlen_q: int,
    max_seqlen_k: int,
    softmax_scale: float,
    causal: bool,
    window_left: int,
    window_right: int,
    softcap: float,
    dropout_p: float,
    seed: Optional[Tensor],
    deterministic: bool,
    backend: str,
    key_padding_mask: Optional[Tensor] = None,
    rowsum_p_dp: bool = False,
) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """``(dq, dk, dv, p_dp)``: ``p_dp`` each row's sum of ``P * dP`` (fp32, lse's layout) with
    ``rowsum_p_dp``, else empty."""
    masking = _masking(
        cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, softmax_scale, causal,
        window_left, window_right, softcap, dropout_p, seed, key_padding_mask,
    )
    dout = dout.contiguous()
    p_dp = torch.empty_like(lse) if rowsum_p_dp else lse.new_empty(0)
    p_dp_out = p_dp if rowsum_p_dp else None
    if backend == "triton":
        grads = _kernels().flash_attn_bwd(
            dout, q, k, v, out, lse, **masking, deterministic=deterministic, p_dp_out=p_dp_out
        )
    else:
        grads = reference_backward(dout, q, k, v, out, lse, **masking, p_dp_out=p_dp_out)
    return (*(g.contiguous() for g in grads), p_dp)


_bwd = torch.library.custom_op("hf_stable_attn::bwd", _backward_impl, mutates_args=())
_BACKWARD_SIGNATURE = inspect.signature(_backward_impl)


@_bwd.register_fake
def _bwd_fake(*args, **kwargs):
    call = _BACKWARD_SIGNATURE.bind(*args, **kwargs)
    call.apply_defaults()
    q, k, v, lse = (call.arguments[name] for name in ("q", "k", "v", "lse"))
    p_dp = lse.new_empty(lse.shape if call.arguments["rowsum_p_dp"] else 0)
    return q.new_empty(q.shape), k.new_empty(k.shape), v.new_empty(v.shape), p_dp


def _dispatch_free(*tensors: Optional[Tensor]) -> bool:
    """Whether the ops' implementations may run without the dispatcher (which costs tens of
    microseconds of host time per call): eager mode, plain tensors, no dispatch mode (fake
    tensors) and no functorch transform. Otherwise, and always under torch.compile, the custom
    ops are called."""
    if torch.compiler.is_compiling() or torch._C._len_torch_dispatch_stack():
        return False
    return all(
        t is None or (type(t) is Tensor and not torch._C._functorch.is_functorch_wrapped_tensor(t))
        for t in tensors
    )


def _run_forward(q, k, v, cu_q, cu_k, seed, static, kpm, sinks) -> tuple[Tensor, Tensor]:
    """The forward op (or, when ``_dispatch_free``, its implementation) on ``attention``'s
    packed ``static`` arguments, key padding mask ``kpm`` and detached ``sinks``."""
    forward = _forward_impl if _dispatch_free(q, k, v, cu_q, cu_k, kpm, sinks) else _fwd
    return forward(q, k, v, cu_q, cu_k, *static[:8], seed, *static[8:], kpm, sinks)


class _Attention(torch.autograd.Function):
    """Autograd of the two ops: ``forward`` runs ``hf_stable_attn::fwd`` and saves what
    ``hf_stable_attn::bwd`` needs. An ``autograd.Function`` rather than ``register_autograd``,
    whose wrapper re-binds the op's 21 arguments on every call (hundreds of microseconds of host
    time per layer measured on the GPU host; docs/kernel_notes.md, host overhead).
    ``lse`` is returned without a gradient (as flash-attn's). With ``heads_first`` the inputs
    are (B, H, S, D) and their gradients are returned in that layout. ``sinks`` (Hq,) or None:
    attention sinks, folded into the output by the forward and given a gradient."""

    @staticmethod
    def forward(ctx, q, k, v, sinks, cu_q, cu_k, seed, static, kpm, heads_first):
        (max_q, max_k, scale, causal, left, right, softcap, dropout_p, stabilize, beta,
         tie_window, min_gap, max_gap, deterministic, backend) = static
        ctx.heads_first = heads_first
        q, k, v, out, lse = _attention_forward(q, k, v, sinks, cu_q, cu_k, seed, static, kpm,
                                               heads_first)
        ctx.save_for_backward(q, k, v, sinks, out, lse, cu_q, cu_k, seed, kpm)
        ctx.static = (max_q, max_k, scale, causal, left, right, softcap, dropout_p,
                      deterministic, backend)
        ctx.mark_non_differentiable(lse)
        return out, lse

    @staticmethod
    def backward(ctx, dout, _dlse):
        q, k, v, sinks, out, lse, cu_q, cu_k, seed, kpm = ctx.saved_tensors
        (max_q, max_k, scale, causal, left, right, softcap, dropout_p, deterministic,
         backend) = ctx.static
        backward = _backward_impl if _dispatch_free(dout, q, k, v, cu_q, cu_k, kpm) else _bwd
        want_dsinks = ctx.needs_input_grad[3]
        *grads, p_dp = backward(
            dout, q, k, v, out, lse, cu_q, cu_k, max_q, max_k, scale, causal, left, right,
            softcap, dropout_p, seed, deterministic, backend, kpm, want_dsinks,
        )
        if ctx.heads_first:
            grads = _seq_first(*grads)  # back to the inputs' (B, H, S, D)
        dsinks = sinks_grad(p_dp, lse, sinks) if want_dsinks else None
        return (*grads, dsinks, None, None, None, None, None, None)


def _attention_forward(q, k, v, sinks, cu_q, cu_k, seed, static, kpm, heads_first):
    """``attention``'s forward with or without autograd: ``(q, k, v, out, lse)`` with q, k, v
    in the kernels' layout (``heads_first`` ones transposed to (B, S, H, D)) and the ``sinks``
    folded into ``out`` and ``lse``."""
    if heads_first:
        q, k, v = _seq_first(q, k, v)
    out, lse = _run_forward(q, k, v, cu_q, cu_k, seed, static, kpm,
                            None if sinks is None else sinks.detach())
    return q, k, v, out, lse


def _seq_first(*tensors: Tensor) -> tuple[Tensor, ...]:
    """(B, H, S, D) views of (B, S, H, D) tensors, or the other way round."""
    return tuple(t.transpose(1, 2) for t in tensors)


def auto_backend(is_cuda: bool, dtype: torch.dtype) -> str:
    """The backend ``'auto'`` picks for tensors of ``dtype``: 'triton' for CUDA bf16/fp16,
    else 'reference'."""
    return "triton" if is_cuda and dtype in KERNEL_DTYPES else "reference"


def resolve_backend(backend: str, q: Tensor) -> str:
    """``auto_backend`` for ``'auto'`` (the reference path on CUDA logged once per dtype), else
    ``backend``."""
    if backend != "auto":
        return backend
    chosen = auto_backend(q.is_cuda, q.dtype)
    if q.is_cuda and chosen == "reference":
        _log_reference_on_cuda(q.dtype)
    return chosen


_warned_dtypes: set[torch.dtype] = set()


def _log_reference_on_cuda(dtype: torch.dtype) -> None:
    """Warn, once per dtype, that CUDA inputs of ``dtype`` take the slow reference path."""
    if dtype not in _warned_dtypes:
        _warned_dtypes.add(dtype)
        logger.warning(
            "hf_stable_attn: the Triton kernel runs bf16/fp16; %s CUDA inputs use the (slow) "
            "reference path. Load the model in bfloat16 or use autocast for speed.",
            dtype,
        )


def validate_inputs(q: Tensor, k: Tensor, v: Tensor, backend: str, packed: bool,
                    key_padding_mask: Optional[Tensor] = None, heads_first: bool = False,
                    sinks: Optional[Tensor] = None) -> None:
    """Raise a clear error for inputs the op cannot honour (dense ``heads_first`` inputs are
    (B, H, S, D); ``sinks`` must be one floating logit per query head, on q's device)."""
    rank = 3 if packed else 4
    layout = ("(total_tokens, heads, head_dim)" if packed else
              "(batch, heads, seqlen, head_dim)" if heads_first else
              "(batch, seqlen, heads, head_dim)")
    heads, seq = (1, 2) if heads_first else (-2, 1)
    for name, t in (("q", q), ("k", k), ("v", v)):
        if t.dim() != rank:
            raise ValueError(f"{name} must be {layout}, got shape {tuple(t.shape)}")
    if not (q.device == k.device == v.device):
        raise ValueError(
            f"q, k, v are on different devices ({q.device}, {k.device}, {v.device}); move them to one device"
        )
    if not (q.dtype == k.dtype == v.dtype):
        raise TypeError(f"q, k, v must share a dtype, got {q.dtype}, {k.dtype}, {v.dtype}")
    allowed = KERNEL_DTYPES if backend == "triton" else REFERENCE_DTYPES
    if q.dtype not in allowed:
        raise TypeError(
            f"dtype {q.dtype} is not supported by the {backend} backend; use one of {allowed}"
        )
    if q.shape[-1] > MAX_HEAD_DIM or v.shape[-1] != q.shape[-1] or k.shape[-1] != q.shape[-1]:
        raise ValueError(
            f"head dims must be equal and <= {MAX_HEAD_DIM}, got q {q.shape[-1]}, k {k.shape[-1]}, v {v.shape[-1]}"
        )
    if q.shape[heads] % k.shape[heads] != 0 or k.shape[heads] != v.shape[heads]:
        raise ValueError(
            f"query heads ({q.shape[heads]}) must be a multiple of key/value heads "
            f"({k.shape[heads]}, {v.shape[heads]})"
        )
    if not packed and (q.shape[0] != k.shape[0] or k.shape[0] != v.shape[0]
                       or k.shape[seq] != v.shape[seq]):
        raise ValueError(
            f"batch/seqlen mismatch: q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)}"
        )
    if key_padding_mask is not None:
        if packed:
            raise ValueError("key_padding_mask is for padded batches; packed sequences have no padding")
        if tuple(key_padding_mask.shape) != (k.shape[0], k.shape[seq]):
            raise ValueError(
                f"key_padding_mask must be (batch, seqlen_k) = {(k.shape[0], k.shape[seq])}, "
                f"got {tuple(key_padding_mask.shape)}"
            )
        if key_padding_mask.device != k.device:
            raise ValueError(f"key_padding_mask is on {key_padding_mask.device}, keys on {k.device}")
        if key_padding_mask.is_floating_point() or key_padding_mask.is_complex():
            raise TypeError(
                f"key_padding_mask must be bool (True = attend) or 0/1 integers; got "
                f"{key_padding_mask.dtype}, which an additive mask (0 = attend, -inf = pad) "
                f"would turn around: pass mask == 0 for one of those"
            )
    if sinks is not None:
        if sinks.dim() != 1 or sinks.shape[0] != q.shape[heads]:
            raise ValueError(
                f"s_aux (attention sinks) must be one logit per query head, shape "
                f"({q.shape[heads]},); got {tuple(sinks.shape)}"
            )
        if not sinks.is_floating_point():
            raise TypeError(f"s_aux must be a floating tensor, got {sinks.dtype}")
        if sinks.device != q.device:
            raise ValueError(f"s_aux is on {sinks.device}, the queries on {q.device}; move it there")


# HF_STABLE_ATTN_CHECK_PACKING=0: packed calls trust their cu_seqlens and max_seqlen (no
# device read where max_seqlen are ints; see validate_packing).
CHECK_PACKING = os.environ.get("HF_STABLE_ATTN_CHECK_PACKING", "1") != "0"


def validate_options(softmax_scale, softcap, dropout_p) -> None:
    """Raise a clear error for attention options no path computes correctly: a scale that is not
    a finite number > 0 (the kernels' scores, shift and log-sum-exp assume it), a softcap that
    is negative or infinite (0 turns it off), or a dropout probability outside [0, 1) (1 would
    divide by zero)."""
    if softmax_scale is not None and not (math.isfinite(softmax_scale) and softmax_scale > 0):
        raise ValueError(f"softmax_scale must be a finite number > 0 (None: 1/sqrt(head_dim)); "
                         f"got {softmax_scale}")
    if softcap is not None and not (math.isfinite(softcap) and softcap >= 0):
        raise ValueError(f"softcap must be a finite number >= 0 (0 turns it off); got {softcap}")
    if not 0.0 <= dropout_p < 1.0:
        raise ValueError(f"dropout_p must be in [0, 1); got {dropout_p}")


def validate_packing(q: Tensor, k: Tensor, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
                     max_seqlen_k) -> tuple[int, int, int, int]:
    """Check packed sequences' ``cu_seqlens`` (int (N + 1,) each, on q's device) against q, k
    ((T, H, D)) and the longest lengths; return ``(max_seqlen_q, max_seqlen_k, end_q, end_k)``
    as Python ints, the ends being ``cu_seqlens[-1]`` (rows from there on belong to no
    sequence). A kernel trusts these values: a length past ``max_seqlen`` leaves its last rows
    unwritten and offsets past the tokens read other memory, so a mistake would be a silent
    wrong answer. The offsets are read from the device in one transfer, which also turns tensor
    ``max_seqlen``s (Transformers' packed path passes 0-d tensors) into ints: no extra
    synchronization there, one per call for int lengths on a GPU; the checks run on the host.
    Under ``torch.compile``, or with ``CHECK_PACKING`` off, only the shapes are checked and the
    sequences are taken to cover every row (rows past the last one are then left unwritten, as
    in flash-attn)."""
    for name, cu in (("cu_seqlens_q", cu_seqlens_q), ("cu_seqlens_k", cu_seqlens_k)):
        if (not isinstance(cu, Tensor) or cu.dim() != 1 or cu.numel() < 2
                or cu.dtype not in (torch.int32, torch.int64)):
            got = (f"{cu.dtype} tensor of shape {tuple(cu.shape)}" if isinstance(cu, Tensor)
                   else type(cu).__name__)
            raise ValueError(f"{name} must be a 1-D int32 tensor of batch + 1 cumulative "
                             f"sequence lengths (0 first); got a {got}")
        if cu.device != q.device:
            raise ValueError(f"{name} is on {cu.device}, the queries on {q.device}; move it there")
    if cu_seqlens_q.numel() != cu_seqlens_k.numel():
        raise ValueError(f"cu_seqlens_q and cu_seqlens_k must describe the same number of "
                         f"sequences; got {cu_seqlens_q.numel() - 1} and "
                         f"{cu_seqlens_k.numel() - 1}")
    if max_seqlen_q is None or max_seqlen_k is None:
        raise ValueError("max_seqlen_q and max_seqlen_k are required with cu_seqlens: the "
                         "longest query and key sequence lengths")
    if torch.compiler.is_compiling() or not CHECK_PACKING:
        return max_seqlen_q, max_seqlen_k, q.shape[0], k.shape[0]
    offsets_q, offsets_k, max_q, max_k = _read_packing(cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
                                                       max_seqlen_k)
    for side, offsets, longest, tokens in (("q", offsets_q, max_q, q.shape[0]),
                                           ("k", offsets_k, max_k, k.shape[0])):
        steps = [b - a for a, b in zip(offsets, offsets[1:])]
        first, least, end, most = offsets[0], min(steps), offsets[-1], max(steps)
        if first != 0 or least < 0:
            raise ValueError(f"cu_seqlens_{side} must start at 0 and never decrease (cumulative "
                             f"lengths); got first {first}, a step of {least}")
        if end > tokens:
            raise ValueError(f"cu_seqlens_{side} ends at {end}, past the {tokens} tokens of "
                             f"{side} (its first dimension)")
        if most > longest:
            raise ValueError(f"a sequence in cu_seqlens_{side} has {most} tokens, more than "
                             f"max_seqlen_{side}={longest}; pass the longest length ({most})")
    return max_q, max_k, offsets_q[-1], offsets_k[-1]


def _read_packing(cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k):
    """``(offsets_q, offsets_k, max_q, max_k)`` as Python ints, read from the device in one
    transfer: each distinct tensor once (Transformers passes the same offsets and length for q
    and k), concatenated only where there are several (one copy kernel fewer otherwise; on one
    H200 the read of one offset vector took 15 us, of two concatenated 23 us)."""
    lengths = [m for m in (max_seqlen_q, max_seqlen_k) if isinstance(m, Tensor)]
    for m in lengths:
        if m.numel() != 1:
            raise ValueError(f"max_seqlen_q and max_seqlen_k must be ints or one-element tensors; "
                             f"got a tensor of shape {tuple(m.shape)}")
    reads = list({id(t): t for t in (cu_seqlens_q, cu_seqlens_k, *lengths)}.values())
    flat = [t.reshape(-1).long() if t.is_floating_point() else t.reshape(-1) for t in reads]
    values = (flat[0] if len(flat) == 1 else torch.cat(flat)).tolist()
    read, start = {}, 0
    for t in reads:
        read[id(t)] = values[start:start + t.numel()]
        start += t.numel()
    max_q, max_k = (read[id(m)][0] if isinstance(m, Tensor) else int(m)
                    for m in (max_seqlen_q, max_seqlen_k))
    return read[id(cu_seqlens_q)], read[id(cu_seqlens_k)], max_q, max_k


def attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    *,
    cu_seqlens_q: Optional[Tensor],
    cu_seqlens_k: Optional[Tensor],
    max_seqlen_q: int,
    max_seqlen_k: int,
    softmax_scale: float,
    causal: bool,
    window_left: int,
    window_right: int,
    softcap: float,
    dropout_p: float,
    shift: ShiftParams,
    backend: str,
    deterministic: bool = True,
    key_padding_mask: Optional[Tensor] = None,
    heads_first: bool = False,
    sinks: Optional[Tensor] = None,
) -> tuple[Tensor, Tensor]:
    """Differentiable stabilized attention; returns ``(out, lse)``. Layouts: docs/design.md;
    ``key_padding_mask`` (dense layout, bool (B, Sk)): keys never attended where False;
    ``sinks`` (Hq,): one attention-sink logit per query head (``hf_stable_attn.sinks``).
    ``heads_first``: dense q, k, v come as (B, H, S, D) (Transformers' layout), still with out
    (B, Sq, Hq, D); they are transposed inside the autograd function, so the graph gets no
    transpose nodes (each costs host time in the forward and the backward)."""
    seed = None
    if dropout_p > 0.0:
        seed = torch.randint(0, 2**62, (), dtype=torch.int64)
    static = (
        int(max_seqlen_q), int(max_seqlen_k), float(softmax_scale), bool(causal),
        int(window_left), int(window_right), float(softcap), float(dropout_p), shift.stabilize,
        shift.beta, shift.tie_window, shift.min_gap, shift.max_gap, bool(deterministic), backend,
    )
    if torch.is_grad_enabled() and (q.requires_grad or k.requires_grad or v.requires_grad or (
            sinks is not None and sinks.requires_grad)):
        return _Attention.apply(q, k, v, sinks, cu_seqlens_q, cu_seqlens_k, seed, static,
                                key_padding_mask, heads_first)
    return _attention_forward(q, k, v, sinks, cu_seqlens_q, cu_seqlens_k, seed, static,
                              key_padding_mask, heads_first)[3:]  # e.g. generation

"""Learned attention sinks (gpt-oss's ``sinks``, flash-attn's ``s_aux``): one logit per query
head that joins every row's softmax denominator and gives no value.

The kernels run without them and the sink folds into their result afterwards, exactly (softmax
is shift invariant): with the call's log-sum-exp ``lse`` per row, ``lse' = logaddexp(lse,
sink)`` and ``out' = out * exp(lse - lse')``. The backward kernels then run on ``(out', lse')``
unchanged: their ``P = exp(S - lse')`` and ``delta = rowsum(dout * out')`` are the sink
attention's. The sink's own gradient is ``-sum over rows of exp(sink - lse') * delta'`` with
``delta' = rowsum(P * dP)``, which the backward sums in fp32 over each row's keys: equal to
``rowsum(dout * out')`` in exact arithmetic, but that form carries the rounding of ``out'`` to
bf16, which does not average out over the keys (it put dsinks up to 6x further from float64 than
plain bf16 PyTorch on an H200, session 36). Rows that see no key keep ``lse = +inf`` and output
0, as without sinks (all their weight is the sink's, which gives no value).

Layouts: ``out`` (B, Sq, Hq, D) with ``lse`` (B, Hq, Sq), or packed (T, Hq, D) with (Hq, T).
"""

from __future__ import annotations

import torch
from torch import Tensor


def _per_row(x: Tensor) -> Tensor:
    """lse-layout (B, Hq, Sq) / (Hq, T) values as (B, Sq, Hq, 1) / (T, Hq, 1), ``out``'s."""
    return x.transpose(-1, -2).unsqueeze(-1)


def fold_sinks(out: Tensor, lse: Tensor, sinks: Tensor, kernel: bool = False
               ) -> tuple[Tensor, Tensor]:
    """The attention with sinks from the same call's ``out`` and fp32 ``lse`` without them:
    ``(out', lse')`` in the same layouts and dtypes. ``out`` is scaled in place (computed in
    fp32, rounded once); with ``kernel`` (CUDA tensors) ``lse`` too, by one Triton kernel
    (``hf_stable_attn.kernels.sinks_fold``) instead of PyTorch's elementwise ops."""
    if kernel:
        from .kernels.sinks_fold import fold_sinks_cuda

        fold_sinks_cuda(out, lse, sinks.detach().contiguous())
        return out, lse
    sink = sinks.detach().float().view(-1, 1)  # broadcasts over (B, Hq, Sq) and (Hq, T)
    seen = torch.isfinite(lse)
    folded = torch.where(seen, torch.logaddexp(lse, sink), lse)
    kept = torch.where(seen, torch.exp(lse - folded), 1.0)
    return out.mul_(_per_row(kept)), folded


def sinks_grad(p_dp: Tensor, lse: Tensor, sinks: Tensor) -> Tensor:
    """d loss / d ``sinks`` (Hq,) from each row's ``rowsum(P * dP)`` and the folded ``lse``
    (``fold_sinks``'s), both fp32 (B, Hq, Sq) or (Hq, T)."""
    weight = torch.exp(sinks.detach().float().view(-1, 1) - lse)  # 0 where lse is +inf
    grad = -(weight * p_dp).movedim(-2, 0)
    return grad.reshape(grad.shape[0], -1).sum(1).to(sinks.dtype)

"""Learned attention sinks (gpt-oss's ``sinks``, flash-attn's ``s_aux``): one logit per query
head that joins every row's softmax denominator and gives no value.

The forward folds the sink into its result exactly (softmax is shift invariant): from the row's
log-sum-exp ``lse`` without it, ``lse' = logaddexp(lse, sink)`` and ``out' = out * exp(lse -
lse')``, computed on the fp32 accumulator before the output is rounded (the kernels' epilogues,
``reference_forward`` through ``fold_sinks``). The shift rule sees the keys only: the sink gives
no value, so it cannot bias ``P @ V``. The backward kernels then run on ``(out', lse')``
unchanged: their ``P = exp(S - lse')`` and ``delta = rowsum(dout * out')`` are the sink
attention's. The sink's own gradient is ``-sum over rows of exp(sink - lse') * delta'`` with
``delta' = rowsum(P * dP)``, which the backward sums in fp32 over each row's keys: equal to
``rowsum(dout * out')`` in exact arithmetic, but that form carries the rounding of ``out'`` to
bf16, which does not average out over the keys (it put dsinks up to 6x further from float64 than
plain bf16 PyTorch on an H200, session 36). Rows that see no key keep ``lse = +inf`` and output
0, as without sinks (all their weight is the sink's, which gives no value).
"""

from __future__ import annotations

import torch
from torch import Tensor


def fold_sinks(out: Tensor, lse: Tensor, sink: Tensor) -> tuple[Tensor, Tensor]:
    """``(out', lse')``: the attention with sinks from fp32 ``out`` (..., S, D) and ``lse``
    (..., S) without them; ``sink`` fp32, broadcastable to ``lse`` (one logit per head)."""
    seen = torch.isfinite(lse)
    folded = torch.where(seen, torch.logaddexp(lse, sink), lse)
    kept = torch.where(seen, torch.exp(lse - folded), 1.0)
    return out * kept[..., None], folded


def sinks_grad(p_dp: Tensor, lse: Tensor, sinks: Tensor) -> Tensor:
    """d loss / d ``sinks`` (Hq,) from each row's ``rowsum(P * dP)`` and the folded ``lse``
    (``fold_sinks``'s), both fp32 (B, Hq, Sq) or (Hq, T)."""
    weight = torch.exp(sinks.detach().float().view(-1, 1) - lse)  # 0 where lse is +inf
    grad = -(weight * p_dp).movedim(-2, 0)
    return grad.reshape(grad.shape[0], -1).sum(1).to(sinks.dtype)

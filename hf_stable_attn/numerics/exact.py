"""The high-precision side of every comparison: float64 attention on the same bf16 inputs.

``delta_hp``, ``O_hp`` and ``dQ_hp`` are computed in float64 from the very tensors the
low-precision implementation sees, so every difference is that implementation's rounding, not
a difference of inputs. Dense layout only (``(B, S, H, D)``), optional causal mask.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..shift_rule import tie_window
from .inputs import Inputs


@dataclass(frozen=True)
class Exact:
    """float64 results: out, dq ``(B, S, H, D)``; pk ``(B, H, S, D)`` (``P @ K``, the paper's
    rank-1 factor); delta ``(B, H, S)``; and the score structure the low-precision kernels see."""

    out: torch.Tensor
    dq: torch.Tensor
    pk: torch.Tensor
    delta: torch.Tensor
    tied_frac: float  # rows whose top-2 fp32 scores are within the dtype's tie window
    exact_tie_frac: float  # rows whose maximum is repeated exactly (P == 1 twice)


def causal_mask(seqlen: int, device) -> torch.Tensor:
    """Bool ``(S, S)``: key ``j`` visible to query ``i`` iff ``j <= i``."""
    i = torch.arange(seqlen, device=device)
    return i[None, :] <= i[:, None]


def tie_fractions(inputs: Inputs, scale: float, causal: bool) -> tuple[float, float]:
    """Fractions of rows that are tied (within the tie window) and exactly tied, judged on the
    fp32 scores of the low-precision q and k (what a kernel compares)."""
    q, k = (x.float().transpose(1, 2) for x in (inputs.q, inputs.k))
    s = torch.matmul(q, k.transpose(-1, -2)) * scale
    if causal:
        s = s.masked_fill(~causal_mask(s.shape[-1], s.device), float("-inf"))
    top = s.topk(2, dim=-1).values
    gap = top[..., 0] - top[..., 1]  # a row with one visible key: inf, never tied
    window = tie_window(inputs.q.dtype)
    return (gap <= window).double().mean().item(), (gap == 0).double().mean().item()


def exact_attention(inputs: Inputs, scale: float, causal: bool) -> Exact:
    """float64 forward and backward (autograd) of softmax attention on ``inputs``."""
    q = inputs.q.double().transpose(1, 2).requires_grad_()
    k, v = (x.double().transpose(1, 2) for x in (inputs.k, inputs.v))
    dout = inputs.dout.double().transpose(1, 2)
    s = torch.matmul(q, k.transpose(-1, -2)) * scale
    if causal:
        s = s.masked_fill(~causal_mask(s.shape[-1], s.device), float("-inf"))
    p = torch.softmax(s, dim=-1)
    out = torch.matmul(p, v)
    (dq,) = torch.autograd.grad(out, q, dout)
    with torch.no_grad():
        pk = torch.matmul(p, k)
        delta = (dout * out).sum(-1)
    tied, exact_tied = tie_fractions(inputs, scale, causal)
    return Exact(
        out=out.detach().transpose(1, 2),
        dq=dq.transpose(1, 2),
        pk=pk.detach(),
        delta=delta.detach(),
        tied_frac=tied,
        exact_tie_frac=exact_tied,
    )

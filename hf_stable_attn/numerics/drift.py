"""Error metrics: does a rounding error cancel like noise or accumulate like a bias?

The paper's quantity is ``e[T] = (delta_lp - delta_hp)[T]`` with ``delta = rowsum(dO * O)``:
the weight-gradient error is ``alpha * sum_T e[T] (PK)[T]^T X[T]`` (Eq. 2), and because the rank-1
terms are alike across tokens (Eq. 3), what matters is ``sum_T e[T]``. For a head with errors
``e`` over its tokens the *drift score* is

    drift = sum_T e[T] / sqrt(sum_T e[T]^2)

Independent zero-mean errors give a random walk, ``|drift| ~ 0.8`` (half-normal mean) whatever
the token count; a one-signed error of ``T`` tokens gives ``|drift| ~ sqrt(T)``. Rows of one head
share its sink, so a head is one sample: aggregate over many independent heads.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import torch

# Mean |drift| above which a set of heads is called biased. Unbiased noise gives ~0.8 per head
# (0.8 +- 0.6 / sqrt(heads) on average), a bias of T tokens ~sqrt(T): 3 separates them for T >= 64.
BIAS_THRESHOLD = 3.0


def delta_rowsum(dout: torch.Tensor, out: torch.Tensor, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """``delta = rowsum(dO * O)`` computed in ``dtype`` (fp32 as FlashAttention-2 does).

    dout, out: ``(B, S, H, D)``. Returns ``(B, H, S)``.
    """
    return (dout.to(dtype) * out.to(dtype)).sum(-1).transpose(1, 2)


def drift_score(err: torch.Tensor) -> torch.Tensor:
    """Signed drift ``sum e / sqrt(sum e^2)`` over the last dim; 0 where every error is 0, NaN
    where an error is not finite.

    err: ``(..., T)`` any float dtype. Returns ``(...)`` float64.
    """
    e = err.double()
    norm = e.square().sum(-1).sqrt()
    total = e.sum(-1)
    return torch.where(norm == 0, 0.0, total / norm)


def rank1_direction(pk: torch.Tensor) -> torch.Tensor:
    """Unit direction shared by the rows of ``PK`` per head (the paper's ``R``, Eq. 3).

    pk: ``(B, H, S, D)``. Returns ``(B, H, 1, D)``: the normalised mean row.
    """
    mean = pk.double().mean(-2, keepdim=True)
    return mean / mean.norm(dim=-1, keepdim=True).clamp_min(torch.finfo(torch.float64).tiny)


def dq_along_rank1(dq_lp: torch.Tensor, dq_hp: torch.Tensor, pk: torch.Tensor) -> torch.Tensor:
    """Per-token dQ error projected on the head's rank-1 direction.

    dq_lp, dq_hp: ``(B, S, H, D)``; pk: ``(B, H, S, D)`` (``P @ K`` in high precision).
    Returns ``(B, H, S)`` float64: ``<dQ_lp[T] - dQ_hp[T], R>`` (its drift score says whether
    the dQ error adds up along ``R`` across tokens, as Eq. 1-3 predict from a biased delta).
    """
    err = (dq_lp.double() - dq_hp.double()).transpose(1, 2)
    return (err * rank1_direction(pk)).sum(-1)


@dataclass(frozen=True)
class DriftSummary:
    """Statistics over independent heads (all floats are plain Python numbers, JSON-ready)."""

    heads: int
    drift_abs_mean: float  # mean over heads of |drift| (noise ~0.8, bias ~sqrt(T))
    drift_signed_mean: float  # mean signed drift (a bias with one sign in every head)
    biased_heads: float  # fraction of heads with |drift| > BIAS_THRESHOLD
    err_mean: float  # mean error per token
    err_rms: float  # RMS error per token (the noise level; the fix's cost shows here)

    @property
    def biased(self) -> bool:
        """The verdict: errors accumulate instead of cancelling (NaN counts as biased)."""
        return not self.drift_abs_mean <= BIAS_THRESHOLD

    def as_dict(self) -> dict:
        return asdict(self) | {"biased": self.biased}


def summarize(err: torch.Tensor) -> DriftSummary:
    """Summarise per-token errors ``err (B, H, T)`` (one head per (b, h)) into a DriftSummary."""
    heads_err = err.reshape(-1, err.shape[-1]).double()
    drift = drift_score(heads_err)
    return DriftSummary(
        heads=heads_err.shape[0],
        drift_abs_mean=drift.abs().mean().item(),
        drift_signed_mean=drift.mean().item(),
        biased_heads=(drift.abs() > BIAS_THRESHOLD).double().mean().item(),
        err_mean=heads_err.mean().item(),
        err_rms=heads_err.square().mean().sqrt().item(),
    )


def cumulative_error(err: torch.Tensor, points: int = 256) -> list[float]:
    """Mean over heads of the running sum of ``err (B, H, T)`` over tokens (the paper's Fig. 5a),
    sampled at no more than ``points`` evenly spaced token counts (always including the last)."""
    curve = err.reshape(-1, err.shape[-1]).double().cumsum(-1).mean(0)
    idx = torch.linspace(0, curve.numel() - 1, min(points, curve.numel())).round().long()
    return curve[idx].tolist()

"""The stabilized softmax shift (the paper's Algorithm 3), as constants and one scalar rule.

Both the reference path and the Triton kernel apply the same rule; this module is its single
definition. Everything here is in natural-log units of the (scaled, soft-capped) scores ``S``;
a kernel that works in base 2 multiplies every constant by ``log2(e)``.

Per query row, over the keys it may attend to, let ``m1`` be the largest score and ``m2`` the
second largest (a repeated maximum gives ``m2 == m1``). The row is *tied* when
``m1 - m2 <= tie_window``: then ``exp(S - m1)`` would round to exactly 1.0 in the input dtype at
two or more places, which is what biases ``P @ V`` (paper, Section 3.3.2). For a tied row the
shift moves from ``m1`` to

    target = beta * m1 if m1 > 0 else 0          (the paper's rule)
    gap    = max(max_gap * tanh((target - m1) / max_gap), min_gap)
    shift  = m1 + gap

so the largest exponent is ``-gap < 0``. The guards are ours: ``min_gap`` keeps ``exp(-gap)``
from rounding back to 1.0 when ``|m1|`` is tiny (the paper's rule fails at ``m1 == 0``), and the
soft ceiling ``max_gap * tanh(raw / max_gap)`` keeps the row from underflowing (the authors'
code returns garbage once ``(beta - 1) * m1`` passes ~87 in fp32, and fp16 ``P`` underflows far
earlier). The ceiling is soft on purpose: a hard clamp gives every dominant row the same gap,
the fixed offset whose consistent rounding the paper's Appendix C warns about (our numerics lab
measured exactly that bias at beta 8 with a hard clamp). For gaps well below ``max_gap`` the
rule is the paper's to within ``(raw / max_gap)^2 / 3`` relative.
Untied rows keep the ordinary shift ``m1``. Softmax is shift invariant, so the result is exact in
real arithmetic and the backward pass, which uses the log-sum-exp, is unchanged.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import torch

DEFAULT_BETA = 2.0

# Significand precision (stored bits + 1) of the dtype that P is rounded to before P @ V.
_SIGNIFICAND_BITS = {torch.bfloat16: 8, torch.float16: 11, torch.float32: 24}
# Largest exponent gap whose exp() stays a normal number with room to spare in that dtype.
_MAX_GAP = {torch.bfloat16: 64.0, torch.float16: 8.0, torch.float32: 64.0}


def tie_window(dtype: torch.dtype) -> float:
    """Score distance below the row maximum at which ``exp`` still rounds to 1.0 in ``dtype``.

    Below 1.0 the dtype's spacing is ``2**-p`` (p = significand bits), so round-to-nearest maps
    ``x`` to 1.0 for ``x >= 1 - 2**-(p+1)`` and ``exp(-d)`` becomes 1.0 for
    ``d <= -ln(1 - 2**-(p+1))``: 1.955e-3 for bf16, 2.44e-4 for fp16.
    """
    if dtype not in _SIGNIFICAND_BITS:
        raise TypeError(f"no tie window for dtype {dtype}; use bfloat16, float16 or float32")
    return -math.log1p(-(2.0 ** -(_SIGNIFICAND_BITS[dtype] + 1)))


@dataclass(frozen=True)
class ShiftParams:
    """The scalars a kernel needs to apply the rule: all in natural-log score units."""

    stabilize: bool
    beta: float
    tie_window: float
    min_gap: float
    max_gap: float
    shift_single: bool = False  # experimental: also shift rows whose maximum is unique

    def scaled(self, factor: float) -> "ShiftParams":
        """The same rule in other units (``factor = log2(e)`` for a base-2 kernel)."""
        return ShiftParams(
            self.stabilize,
            self.beta,
            self.tie_window * factor,
            self.min_gap * factor,
            self.max_gap * factor,
            self.shift_single,
        )


@functools.lru_cache(maxsize=64)  # called once per attention call; the arguments repeat
def shift_params(
    dtype: torch.dtype,
    stabilize: bool = True,
    beta: float = DEFAULT_BETA,
    tie_tolerance: float | None = None,
    shift_single: bool = False,
) -> ShiftParams:
    """Validate the user's options and derive the rule's constants for inputs of ``dtype``.

    Args:
        dtype: dtype of q/k/v (``P`` is rounded to it before ``P @ V``).
        stabilize: apply the fix (False gives plain FlashAttention-2 numerics).
        beta: the paper's multiplier for positive tied maxima, > 1 (the paper uses 2 to 8).
        tie_tolerance: override of the tie window in score units; default derived from ``dtype``.
        shift_single: experimental, apply the shift to every row, not only tied ones (the
            soft ``max_gap`` ceiling is the guard against the underflow of the paper's Appendix C).
    """
    if not beta > 1.0 or not math.isfinite(beta):
        raise ValueError(f"beta must be a finite number > 1 (the paper uses 2..8), got {beta}")
    window = tie_window(dtype) if tie_tolerance is None else float(tie_tolerance)
    if not (window >= 0.0 and math.isfinite(window)):
        raise ValueError(f"tie_tolerance must be a finite number >= 0, got {tie_tolerance}")
    # Four windows below the max, exp(-gap) rounds to a value clearly below 1.0.
    min_gap = 4.0 * tie_window(dtype)
    return ShiftParams(
        bool(stabilize), float(beta), window, min_gap, _MAX_GAP[dtype], bool(shift_single)
    )


def row_shift(m1: torch.Tensor, m2: torch.Tensor, params: ShiftParams) -> torch.Tensor:
    """The shift for rows with running top-2 scores ``m1 >= m2`` (fp32, any shape).

    Rows with no visible key yet (``m1 == -inf``) keep ``-inf``; callers mask those entries.
    """
    if not params.stabilize:
        return m1
    finite = m1 > float("-inf")
    tied = finite & (m2 > float("-inf")) & (m1 - m2 <= params.tie_window)
    if params.shift_single:
        tied = finite
    target = torch.where(m1 > 0, params.beta * m1, torch.zeros_like(m1))
    gap = (params.max_gap * torch.tanh((target - m1) / params.max_gap)).clamp_min(params.min_gap)
    return torch.where(tied, m1 + gap, m1)


def merge_top2(
    m1: torch.Tensor, m2: torch.Tensor, t1: torch.Tensor, t2: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Merge two running (max, second max) pairs: the largest two of {m1, m2, t1, t2}."""
    return torch.maximum(m1, t1), torch.maximum(torch.minimum(m1, t1), torch.maximum(m2, t2))


def tile_top2(s: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Largest and second largest value along the last dim (a repeated max counts twice).

    ``s`` (..., n) fp32 with -inf for masked entries; n == 1 gives ``t2 = -inf``.
    """
    if s.shape[-1] == 1:
        return s[..., 0], torch.full_like(s[..., 0], float("-inf"))
    top = torch.topk(s, 2, dim=-1).values
    return top[..., 0], top[..., 1]

"""Attention inputs with controlled score structure, for measuring rounding bias.

Every (batch, head) pair is an independent draw: its own sink direction, keys, values and
upstream gradient, so statistics across heads are over independent samples (rows of one head
share the sink and are not). Layout is flash-attn's: ``q, k, v, dout (B, S, H, D)`` in the
requested dtype.

Scores are built in units of the softmax scale ``1/sqrt(D)``: ordinary keys give scores of
order 1; a *sink* key lies along a per-head direction ``u`` that every query also leans towards,
so it scores about ``sink_logit`` above the rest (the attention-sink pattern of the paper's
Appendix D). Copying the sink key to several positions makes exact repeated row maxima
(``P == 1`` more than once in a row); nudging a copy by one ulp makes near-ties inside the bf16
tie window instead.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class Case:
    """One score structure.

    kind: ``random`` (no sink), ``sink`` (exact copies of the sink key), ``near_tie`` (copies
    nudged by one bf16 ulp in one coordinate, so the scores differ by ~1e-3) or ``tile_split``
    (exact copies placed ``block_n`` apart, one per key tile of the kernel).
    copies: number of sink positions (1 = a single dominating maximum).
    """

    name: str
    kind: str
    copies: int = 0
    sink_logit: float = 6.0


# sink_logit 6 leaves the other keys about half the attention mass at S = 256; 12 makes the sink
# dominate (others ~1e-3 of the mass), as trained attention sinks do.
CASES = {
    c.name: c
    for c in (
        Case("random", "random"),
        Case("single", "sink", 1),
        Case("single_dom", "sink", 1, 12.0),
        Case("sink2", "sink", 2),
        Case("sink4", "sink", 4),
        Case("sink8", "sink", 8),
        Case("sink2_dom", "sink", 2, 12.0),
        Case("sink8_dom", "sink", 8, 12.0),
        Case("near_tie2", "near_tie", 2),
        Case("near_tie2_dom", "near_tie", 2, 12.0),
        Case("tile_split2_dom", "tile_split", 2, 12.0),
        Case("tile_split4_dom", "tile_split", 4, 12.0),
    )
}


@dataclass(frozen=True)
class Inputs:
    """q, k, v, dout ``(B, S, H, D)`` and the sink positions used (empty for ``random``)."""

    q: torch.Tensor
    k: torch.Tensor
    v: torch.Tensor
    dout: torch.Tensor
    sink_positions: tuple[int, ...]


def sink_positions(case: Case, seqlen: int, block_n: int) -> tuple[int, ...]:
    """Where the sink key sits: the first positions, or one per key tile for ``tile_split``."""
    if case.kind == "random":
        return ()
    stride = block_n if case.kind == "tile_split" else 1
    positions = tuple(i * stride for i in range(case.copies))
    if positions[-1] >= seqlen:
        raise ValueError(f"case {case.name} needs seqlen > {positions[-1]}, got {seqlen}")
    return positions


def make_inputs(
    case: Case,
    *,
    batch: int,
    heads: int,
    seqlen: int,
    head_dim: int,
    seed: int,
    block_n: int = 128,
    v_mean: float = -1.0,
    dout_mean: float = -1.0,
    dtype: torch.dtype = torch.bfloat16,
    device: str | torch.device = "cpu",
) -> Inputs:
    """Draw ``batch * heads`` independent heads of ``case``.

    v_mean / dout_mean: mean of every feature of V and dO (entries are N(mean, 1)); the paper's
    failing head has V and dO negative in the same feature dimensions, which makes the error of
    ``delta = rowsum(dO * O)`` one-signed.
    """
    gen = torch.Generator(device="cpu").manual_seed(seed)
    shape = (batch, seqlen, heads, head_dim)

    def normal(*size: int) -> torch.Tensor:
        return torch.randn(size, generator=gen, dtype=torch.float32)

    q, k = normal(*shape), normal(*shape)
    v, dout = normal(*shape) + v_mean, normal(*shape) + dout_mean
    positions = sink_positions(case, seqlen, block_n)
    if positions:
        u = normal(batch, 1, heads, head_dim)
        u = u / u.norm(dim=-1, keepdim=True)
        # q.u ~ N(sink_logit, 1): with k_sink = sqrt(D) u the scaled score is q.u.
        q = q + case.sink_logit * u
        sink = (math.sqrt(head_dim) * u).to(dtype)
        k = k.to(dtype)
        for i in positions:
            k[:, i : i + 1] = sink
        if case.kind == "near_tie":
            # One ulp in coordinate 0 of every copy after the first: the scores then differ by
            # about q_0 * ulp / sqrt(D) ~ 1e-3, inside the bf16 tie window for most rows
            # (one ulp more magnitude: the stored bit pattern + 1).
            for i in positions[1:]:
                k[:, i, :, 0] = (k[:, i, :, 0].view(torch.int16) + 1).view(dtype)
    as_dtype = dict(dtype=dtype, device=device)
    return Inputs(
        q.to(**as_dtype),
        k.to(**as_dtype),
        v.to(**as_dtype),
        dout.to(**as_dtype),
        positions,
    )

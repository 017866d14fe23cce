"""Counter-based attention dropout, bit-identical to Triton's ``tl.rand(seed, offset)``.

The keep decision of score ``(b, h, i, j)`` is a pure function of ``(seed, offset)`` with

    offset = ((b * num_heads_q + h) * max_seqlen_q + i) * max_seqlen_k + j      (int64)

where ``b`` is the batch index (the sequence index for packed inputs), ``h`` the query head and
``i``/``j`` the positions inside that sequence. Nothing is stored between forward and backward:
both recompute the mask from the seed. This module is the PyTorch half (Philox-4x32-10, the
generator Triton uses), so the reference path drops exactly the entries the kernel drops.
"""

from __future__ import annotations

import torch

_MASK32 = 0xFFFFFFFF
_KEY_A, _KEY_B = 0x9E3779B9, 0xBB67AE85
_ROUND_A, _ROUND_B = 0xD2511F53, 0xCD9E8D57


def _mulhilo(a: int, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(high, low) 32-bit halves of ``a * b`` for uint32 values held in int64 tensors."""
    b_hi, b_lo = b >> 16, b & 0xFFFF
    a_hi, a_lo = a >> 16, a & 0xFFFF
    lo_lo = a_lo * b_lo
    mid1 = a_hi * b_lo
    mid2 = a_lo * b_hi
    hi_hi = a_hi * b_hi
    carry = ((lo_lo >> 16) + (mid1 & 0xFFFF) + (mid2 & 0xFFFF)) >> 16
    high = (hi_hi + (mid1 >> 16) + (mid2 >> 16) + carry) & _MASK32
    low = (a * b) & _MASK32
    return high, low


def philox_uint32(seed: int, offset: torch.Tensor) -> torch.Tensor:
    """First output word of Philox-4x32-10 at counter ``(offset_lo, offset_hi, 0, 0)``.

    ``offset``: int64 tensor of any shape. Returns uint32 values in an int64 tensor.
    """
    c0 = offset & _MASK32
    c1 = (offset >> 32) & _MASK32
    c2 = torch.zeros_like(offset)
    c3 = torch.zeros_like(offset)
    k0, k1 = seed & _MASK32, (seed >> 32) & _MASK32
    for _ in range(10):
        hi_b, lo_b = _mulhilo(_ROUND_B, c2)
        hi_a, lo_a = _mulhilo(_ROUND_A, c0)
        c0, c1, c2, c3 = hi_b ^ c1 ^ k0, lo_b, hi_a ^ c3 ^ k1, lo_a
        k0, k1 = (k0 + _KEY_A) & _MASK32, (k1 + _KEY_B) & _MASK32
    return c0


def uniform_from_offsets(seed: int, offset: torch.Tensor) -> torch.Tensor:
    """``tl.rand(seed, offset)``: float32 uniforms in [0, 1), same shape as ``offset``."""
    x = philox_uint32(int(seed), offset.to(torch.int64))
    x = torch.where(x >= 2**31, x - 2**32, x)  # bitcast to int32
    x = torch.where(x < 0, -x - 1, x)  # ~x for negatives
    return x.to(torch.float32) * torch.tensor(4.6566127342e-10, dtype=torch.float32)


def dropout_offsets(
    batch: int, heads: int, max_seqlen_q: int, max_seqlen_k: int, device: torch.device | str = "cpu"
) -> torch.Tensor:
    """Counter of every score: int64 (batch, heads, max_seqlen_q, max_seqlen_k)."""
    b = torch.arange(batch, device=device, dtype=torch.int64).view(-1, 1, 1, 1)
    h = torch.arange(heads, device=device, dtype=torch.int64).view(1, -1, 1, 1)
    i = torch.arange(max_seqlen_q, device=device, dtype=torch.int64).view(1, 1, -1, 1)
    j = torch.arange(max_seqlen_k, device=device, dtype=torch.int64).view(1, 1, 1, -1)
    return ((b * heads + h) * max_seqlen_q + i) * max_seqlen_k + j


def keep_mask(
    seed: int, p: float, batch: int, heads: int, max_seqlen_q: int, max_seqlen_k: int, device="cpu"
) -> torch.Tensor:
    """Bool (batch, heads, max_seqlen_q, max_seqlen_k): True where the score is kept."""
    offsets = dropout_offsets(batch, heads, max_seqlen_q, max_seqlen_k, device)
    return uniform_from_offsets(seed, offsets) >= p

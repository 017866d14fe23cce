"""Tiled PyTorch implementation of the stabilized flash attention (Algorithm 3) and its backward.

This is the CPU path of the plugin and the oracle of the Triton kernel: it models the kernel's
numerics (scores and running statistics in fp32, ``P`` rounded to the input dtype before
``P @ V``, fp32 accumulation, output rounded back; the FlashAttention-2 backward from the
log-sum-exp and ``delta = rowsum(dO * O)``). See docs/design.md for the masking conventions.

Internally every input is brought to a padded, grouped layout ``(N, Hk, G, S, D)`` (``G`` query
heads per KV head, so GQA never copies K/V) with per-sequence lengths.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch

from .dropout import keep_mask
from .shift_rule import ShiftParams, merge_top2, row_shift, shift_params, tile_top2
from .sinks import fold_sinks

NEG_INF = float("-inf")


@dataclass(frozen=True)
class ReferenceNumerics:
    """Switches that isolate where low precision enters (the paper's Section 3.2).

    pv_fp32: ``P`` is not rounded to the input dtype before ``P @ V``.
    out_fp32: the forward output stays fp32 (so ``delta`` sees an fp32 ``O``).
    delta_from_dp: the backward uses ``delta = rowsum(dP * P)`` instead of ``rowsum(dO * O)``.
    normalize_by_rounded_p: ``l`` sums the dtype-rounded ``P`` (flash-attention PR #2721's idea).
    """

    pv_fp32: bool = False
    out_fp32: bool = False
    delta_from_dp: bool = False
    normalize_by_rounded_p: bool = False


@dataclass(frozen=True)
class _Layout:
    """Sequence lengths of a (possibly packed) batch: ``lens_q``/``lens_k`` int64 (N,), and
    which keys a dense batch may attend (``key_ok``, bool (N, max_k), or None for all)."""

    lens_q: torch.Tensor
    lens_k: torch.Tensor
    max_q: int
    max_k: int
    cu_q: torch.Tensor | None
    cu_k: torch.Tensor | None
    key_ok: torch.Tensor | None = None


def _layout(q, k, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
            key_padding_mask=None) -> _Layout:
    if cu_seqlens_q is None:
        n, sq, sk = q.shape[0], q.shape[1], k.shape[1]
        full = torch.ones(n, dtype=torch.int64, device=q.device)
        key_ok = None if key_padding_mask is None else key_padding_mask.bool()
        return _Layout(full * sq, full * sk, sq, sk, None, None, key_ok)
    if key_padding_mask is not None:
        raise ValueError("key_padding_mask is for the dense layout; packed sequences have no padding")
    lens_q = (cu_seqlens_q[1:] - cu_seqlens_q[:-1]).to(torch.int64)
    lens_k = (cu_seqlens_k[1:] - cu_seqlens_k[:-1]).to(torch.int64)
    return _Layout(lens_q, lens_k, int(max_seqlen_q), int(max_seqlen_k), cu_seqlens_q, cu_seqlens_k)


def _pad(x: torch.Tensor, cu: torch.Tensor | None, lens: torch.Tensor, max_len: int) -> torch.Tensor:
    """(T, H, D) packed -> (N, max_len, H, D) zero padded; dense input is returned as is."""
    if cu is None:
        return x
    n = lens.numel()
    out = x.new_zeros(n, max_len, *x.shape[1:])
    pos = torch.arange(max_len, device=x.device)
    valid = pos[None, :] < lens[:, None]
    out[valid] = x[: int(cu[-1])]
    return out


def _unpad(x: torch.Tensor, cu: torch.Tensor | None, lens: torch.Tensor, total: int) -> torch.Tensor:
    """(N, max_len, H, ...) -> (total, H, ...), rows past ``cu[-1]`` (if any) are zero."""
    if cu is None:
        return x
    pos = torch.arange(x.shape[1], device=x.device)
    valid = pos[None, :] < lens[:, None]
    out = x.new_zeros(total, *x.shape[2:])
    out[: int(cu[-1])] = x[valid]
    return out


def _grouped(x: torch.Tensor, heads_kv: int) -> torch.Tensor:
    """(N, S, H, D) -> (N, Hk, H // Hk, S, D) as a view (no copy of K/V)."""
    n, s, h, d = x.shape
    return x.view(n, s, heads_kv, h // heads_kv, d).permute(0, 2, 3, 1, 4)


def _visible(layout: _Layout, start: int, stop: int, causal: bool, left: int, right: int):
    """Bool (N, 1, 1, max_q, stop - start): which keys of the tile each query row may see."""
    dev = layout.lens_q.device
    i = torch.arange(layout.max_q, device=dev).view(1, -1, 1)
    j = torch.arange(start, stop, device=dev).view(1, 1, -1)
    lq = layout.lens_q.view(-1, 1, 1)
    lk = layout.lens_k.view(-1, 1, 1)
    diag = i + lk - lq  # key position of query row i (bottom-right alignment)
    ok = (i < lq) & (j < lk)
    if layout.key_ok is not None:
        ok = ok & layout.key_ok[:, None, start:stop]
    if causal:
        right = 0
    if right >= 0:
        ok = ok & (j <= diag + right)
    if left >= 0:
        ok = ok & (j >= diag - left)
    return ok[:, None, None]


def _scores(qf, kf_tile, scale: float, softcap: float):
    """fp32 scores (N, Hk, G, Sq, n) = scale * q k^T, soft-capped when ``softcap > 0``."""
    s = torch.matmul(qf, kf_tile.transpose(-1, -2)) * scale
    if softcap > 0:
        s = softcap * torch.tanh(s / softcap)
    return s


def _keep_scale(seed: int, p: float, layout: _Layout, heads_q: int, heads_kv: int, device):
    """Dropout multiplier ``keep / (1 - p)`` as fp32 (N, Hk, G, max_q, max_k), or None."""
    if p <= 0.0:
        return None
    keep = keep_mask(seed, p, layout.lens_q.numel(), heads_q, layout.max_q, layout.max_k, device)
    g = heads_q // heads_kv
    keep = keep.view(keep.shape[0], heads_kv, g, layout.max_q, layout.max_k)
    return keep.to(torch.float32) / (1.0 - p)


class _Prepared:
    """Inputs in the grouped padded layout, shared by forward and backward."""

    def __init__(self, q, k, v, cu_q, cu_k, max_q, max_k, softmax_scale, key_padding_mask=None):
        if cu_q is None and q.dim() != 4:
            raise ValueError(f"dense q must be (batch, seqlen, heads, head_dim), got {tuple(q.shape)}")
        self.heads_q, self.heads_kv = q.shape[-2], k.shape[-2]
        self.total_q, self.total_k = q.shape[0], k.shape[0]
        self.layout = lay = _layout(q, k, cu_q, cu_k, max_q, max_k, key_padding_mask)
        self.scale = softmax_scale if softmax_scale is not None else q.shape[-1] ** -0.5
        self.q = self.grouped_q(q)
        self.k = _grouped(_pad(k, lay.cu_k, lay.lens_k, lay.max_k), self.heads_kv)
        self.v = _grouped(_pad(v, lay.cu_k, lay.lens_k, lay.max_k), self.heads_kv)

    def grouped_q(self, x: torch.Tensor) -> torch.Tensor:
        """A query-side tensor (q, out, dout) -> (N, Hk, G, max_q, D)."""
        lay = self.layout
        return _grouped(_pad(x, lay.cu_q, lay.lens_q, lay.max_q), self.heads_kv)

    def rows(self, x: torch.Tensor) -> torch.Tensor:
        """Grouped (N, Hk, G, S, D) -> the caller's layout (B, S, Hq, D) or (Tq, Hq, D)."""
        n, hk, g, s = x.shape[:4]
        flat = x.reshape(n, hk * g, s, *x.shape[4:]).transpose(1, 2)
        return _unpad(flat, self.layout.cu_q, self.layout.lens_q, self.total_q)

    def kv_rows(self, x: torch.Tensor) -> torch.Tensor:
        """Grouped (N, Hk, S, D) key-side gradient -> (B, S, Hk, D) or (Tk, Hk, D)."""
        return _unpad(x.transpose(1, 2), self.layout.cu_k, self.layout.lens_k, self.total_k)

    def lse_layout(self, lse: torch.Tensor) -> torch.Tensor:
        """(N, Hk, G, S) -> (B, Hq, Sq) dense or (Hq, Tq) packed."""
        n, hk, g, s = lse.shape
        flat = lse.reshape(n, hk * g, s)
        if self.layout.cu_q is None:
            return flat
        return _unpad(flat.transpose(1, 2), self.layout.cu_q, self.layout.lens_q, self.total_q).t()

    def lse_grouped(self, lse: torch.Tensor) -> torch.Tensor:
        """Inverse of ``lse_layout``: -> (N, Hk, G, S)."""
        lay = self.layout
        if lay.cu_q is not None:
            lse = _pad(lse.t(), lay.cu_q, lay.lens_q, lay.max_q).transpose(1, 2)
        n, h, s = lse.shape
        return lse.reshape(n, self.heads_kv, h // self.heads_kv, s)


def _check(q, k, v):
    if not (q.dtype == k.dtype == v.dtype):
        raise TypeError(f"q, k, v must share a dtype, got {q.dtype}, {k.dtype}, {v.dtype}")
    if q.shape[-2] % k.shape[-2] != 0:
        raise ValueError(
            f"query heads ({q.shape[-2]}) must be a multiple of key/value heads ({k.shape[-2]})"
        )


def reference_forward(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    cu_seqlens_q: torch.Tensor | None = None,
    cu_seqlens_k: torch.Tensor | None = None,
    max_seqlen_q: int | None = None,
    max_seqlen_k: int | None = None,
    softmax_scale: float | None = None,
    causal: bool = False,
    window_left: int = -1,
    window_right: int = -1,
    softcap: float = 0.0,
    dropout_p: float = 0.0,
    seed: int = 0,
    key_padding_mask: torch.Tensor | None = None,
    shift: ShiftParams | None = None,
    block_n: int = 128,
    numerics: ReferenceNumerics = ReferenceNumerics(),
    return_shift: bool = False,
    observe_p: Callable[[torch.Tensor, torch.Tensor, int], None] | None = None,
    sinks: torch.Tensor | None = None,
):
    """Stabilized FlashAttention-2 forward, tiled over keys in blocks of ``block_n``.

    Args:
        q: (B, Sq, Hq, D) or packed (Tq, Hq, D); k, v: (B, Sk, Hk, D) or (Tk, Hk, D).
        cu_seqlens_q/k: int32 (N + 1,) cumulative lengths for the packed layout, else None.
        key_padding_mask: dense layout only, bool (B, Sk): False keys are never attended.
        shift: the rule's constants (``shift_rule.shift_params``); None = fix on, beta 2.
        observe_p: debug callback ``(p_rounded, shift, tile_start)`` with the ``P`` tile
            (N, Hk, G, Sq, n) exactly as it enters ``P @ V`` and the row shift used for it.
        sinks: None, or attention sinks (Hq,): one logit per query head in every row's
            denominator, folded in before the output is rounded (``sinks.fold_sinks``).

    Returns:
        out like ``q`` (fp32 with ``numerics.out_fp32``), lse fp32 (B, Hq, Sq) or (Hq, Tq)
        (``+inf`` on rows that see no key; the sinks' included), and with ``return_shift`` the
        final row shift.
    """
    _check(q, k, v)
    params = shift if shift is not None else shift_params(q.dtype)
    prep = _Prepared(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, softmax_scale,
                     key_padding_mask)
    lay = prep.layout
    qf = prep.q.float()
    rows_shape = qf.shape[:-1]
    m1 = torch.full(rows_shape, NEG_INF, device=q.device)
    m2 = torch.full(rows_shape, NEG_INF, device=q.device)
    cur = torch.full(rows_shape, NEG_INF, device=q.device)
    l = torch.zeros(rows_shape, device=q.device)
    acc = torch.zeros(*rows_shape, prep.v.shape[-1], device=q.device)
    keep = _keep_scale(seed, dropout_p, lay, prep.heads_q, prep.heads_kv, q.device)
    pv_dtype = torch.float32 if numerics.pv_fp32 else q.dtype

    for start in range(0, lay.max_k, block_n):
        stop = min(start + block_n, lay.max_k)
        kf = prep.k[:, :, :, start:stop].float()
        vf = prep.v[:, :, :, start:stop].float()
        visible = _visible(lay, start, stop, causal, window_left, window_right)
        s = _scores(qf, kf, prep.scale, softcap).masked_fill(~visible, NEG_INF)
        m1, m2 = merge_top2(m1, m2, *tile_top2(s))
        new = row_shift(m1, m2, params)
        alpha = torch.where(cur == NEG_INF, torch.zeros_like(cur), torch.exp(cur - new))
        p = torch.where(visible, torch.exp(s - new[..., None]), torch.zeros_like(s))
        p_used = p if keep is None else p * keep[..., start:stop]
        p_used = p_used.to(pv_dtype)
        if observe_p is not None:
            observe_p(p_used, new, start)
        row_sum = (p.to(q.dtype).float() if numerics.normalize_by_rounded_p else p).sum(-1)
        l = l * alpha + row_sum
        acc = acc * alpha[..., None] + torch.matmul(p_used.float(), vf)
        cur = new

    seen = l > 0
    out = torch.where(seen[..., None], acc / torch.where(seen, l, 1.0)[..., None], 0.0)
    lse = torch.where(seen, cur + torch.log(torch.where(seen, l, 1.0)), float("inf"))
    if sinks is not None:
        sink = sinks.detach().float().view(1, prep.heads_kv, -1, 1)  # lse's (N, Hk, G, Sq)
        out, lse = fold_sinks(out, lse, sink)
    out = prep.rows(out.to(torch.float32 if numerics.out_fp32 else q.dtype))
    result = (out, prep.lse_layout(lse))
    if return_shift:
        result += (prep.lse_layout(torch.where(seen, cur, float("inf"))),)
    return result


def reference_backward(
    dout: torch.Tensor,
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    out: torch.Tensor,
    lse: torch.Tensor,
    *,
    cu_seqlens_q: torch.Tensor | None = None,
    cu_seqlens_k: torch.Tensor | None = None,
    max_seqlen_q: int | None = None,
    max_seqlen_k: int | None = None,
    softmax_scale: float | None = None,
    causal: bool = False,
    window_left: int = -1,
    window_right: int = -1,
    softcap: float = 0.0,
    dropout_p: float = 0.0,
    seed: int = 0,
    key_padding_mask: torch.Tensor | None = None,
    block_n: int = 128,
    numerics: ReferenceNumerics = ReferenceNumerics(),
    p_dp_out: torch.Tensor | None = None,
):
    """FlashAttention-2 backward: recompute ``P = exp(S - lse)`` tile by tile.

    Args: as ``reference_forward``, plus ``dout``/``out`` shaped like ``q`` and ``lse`` as
    returned by the forward; ``p_dp_out``: None, or fp32 like ``lse``, which receives each
    row's sum of ``P * dP`` (as the kernel's dQ computes it). Returns ``(dq, dk, dv)`` in the
    dtypes and layouts of q, k, v.
    """
    _check(q, k, v)
    prep = _Prepared(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, softmax_scale,
                     key_padding_mask)
    lay = prep.layout
    hk = prep.heads_kv
    dof = prep.grouped_q(dout).float()
    of = prep.grouped_q(out).float()
    lse_g = prep.lse_grouped(lse.float())[..., None]
    qf = prep.q.float()
    keep = _keep_scale(seed, dropout_p, lay, prep.heads_q, hk, q.device)
    dtype = q.dtype

    def tile(start, stop):
        kf = prep.k[:, :, :, start:stop].float()
        vf = prep.v[:, :, :, start:stop].float()
        visible = _visible(lay, start, stop, causal, window_left, window_right)
        s = _scores(qf, kf, prep.scale, softcap)
        p = torch.where(visible, torch.exp(s - lse_g), torch.zeros_like(s))
        drop = None if keep is None else keep[..., start:stop]
        dp = torch.matmul(dof, vf.transpose(-1, -2))
        return kf, s, p, drop, dp

    tiles = [(s, min(s + block_n, lay.max_k)) for s in range(0, lay.max_k, block_n)]
    if numerics.delta_from_dp:
        delta = sum(
            ((p if drop is None else p * drop) * dp).sum(-1)
            for _, _, p, drop, dp in (tile(a, b) for a, b in tiles)
        )
    else:
        delta = (dof * of).sum(-1)

    dq = torch.zeros_like(qf)
    dk = torch.zeros(prep.k.shape[0], hk, lay.max_k, prep.k.shape[-1], device=q.device)
    dv = torch.zeros(prep.v.shape[0], hk, lay.max_k, prep.v.shape[-1], device=q.device)
    p_dp = None if p_dp_out is None else torch.zeros_like(lse_g[..., 0])
    for start, stop in tiles:
        kf, s, p, drop, dp = tile(start, stop)
        p_drop = p if drop is None else p * drop
        if p_dp is not None:
            p_dp += (p_drop * dp).sum(-1)
        dv[:, :, start:stop] = torch.matmul(p_drop.to(dtype).float().transpose(-1, -2), dof).sum(2)
        ds = p * ((dp if drop is None else dp * drop) - delta[..., None])
        if softcap > 0:
            ds = ds * (1.0 - (s / softcap) ** 2)
        ds = ds.to(dtype).float()
        dq += torch.matmul(ds, kf) * prep.scale
        dk[:, :, start:stop] = torch.matmul(ds.transpose(-1, -2), qf).sum(2) * prep.scale

    if p_dp is not None:
        p_dp_out.copy_(prep.lse_layout(p_dp))
    return prep.rows(dq.to(dtype)), prep.kv_rows(dk.to(k.dtype)), prep.kv_rows(dv.to(v.dtype))

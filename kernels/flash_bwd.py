"""FlashAttention-2 backward, deterministic (no atomics): a dQ kernel (one program per query
tile and head, looping over key tiles), which also computes and stores
``delta = rowsum(dO * O)``, then a dK/dV kernel (one program per key tile and KV head, looping
over the group's query heads and the query tiles). Where that makes too few programs to fill the
GPU (GQA/MQA with few KV heads), each KV head's query heads are split over ``splits`` programs
that write fp32 partial dK/dV, summed afterwards in a fixed order (still deterministic).

``P = exp2(s - lse * log2(e))`` is recomputed from the forward's log-sum-exp, so the stabilized
shift needs nothing here; dropout's keep mask is recomputed from the seed.

On Hopper, ``flash_attn_bwd`` hands the dQ and dK/dV of the calls ``flash_bwd_hopper.routes``
to that module's warp-specialized Gluon kernels (same delta and partial sums; the dK/dV's group
split by that module's rule).

On request the dQ kernel also sums ``P * dP`` over each row's keys in fp32: ``rowsum(dO * O)``
without the rounding of ``O`` to bf16, whose error does not average out over a row's keys.
Attention sinks' gradient needs that precision (``hf_stable_attn.sinks``).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from . import _common, _prepared
from ._common import (
    COMPILE_OPTIONS, HOST_DESCRIPTORS, INTERPRET, LOG2E, TiledLaunch, block_d, ceil_div,
    check_grid, dot, keep_mask, head_sources, key_mask_args, key_tiles, last_dim_contiguous,
    load_rows, lse_layout, on_device_of, release_below, rounded, runs_range, runtime_ints_jit,
    scheduled_tile, scores, seq_bucket, seq_layout, seeded_jit, sequence_bounds, sm_count,
    tma_mode, tma_ready, vector_readable, visible,
)

try:
    from . import flash_bwd_hopper
except ImportError:  # a Triton without Gluon's Hopper API: every call takes the Triton kernel
    flash_bwd_hopper = None

LOG2E_C = tl.constexpr(LOG2E)


@triton.jit
def _query_tile(q_src, do_src, LSE, DELTA, l_base, b, h, start_m, offs_m, stride_qs, stride_ds,
                offs_d, d_ok, seqlen_q, MASKED: tl.constexpr, EVEN_D: tl.constexpr,
                TMA_MODE: tl.constexpr, TRANSPOSED: tl.constexpr, LSE_TMA: tl.constexpr):
    """One query tile of the dK/dV's loop, rows ``offs_m`` (BLOCK_M,) from ``start_m``: ``(q,
    do, lse2, delta)``, q (BLOCK_M, BLOCK_D) or with TRANSPOSED (BLOCK_D, BLOCK_M), do (BLOCK_M,
    BLOCK_D), the rows' log-sum-exp in log2 units and ``delta``; rows past the sequence (MASKED)
    read lse +inf and delta 0. With LSE_TMA, ``LSE`` and ``DELTA`` are ``vector_descriptor``s
    (one bulk copy a vector; else Triton 3.6 copies each thread's values of the transposed
    tiles one by one, docs/kernel_notes.md, session 62) of batch entry ``b``, head ``h``."""
    row_ok = offs_m < seqlen_q
    rows = offs_m.to(tl.int64)
    q = load_rows(q_src, start_m, rows, row_ok, stride_qs, offs_d, d_ok, MASKED, EVEN_D, TMA_MODE,
                  TRANSPOSED)
    do = load_rows(do_src, start_m, rows, row_ok, stride_ds, offs_d, d_ok, MASKED, EVEN_D,
                   TMA_MODE)
    if LSE_TMA:
        lse2 = LSE.load([b, h, start_m]).reshape(offs_m.shape) * LOG2E_C
        delta = DELTA.load([b, h, start_m]).reshape(offs_m.shape)
        if MASKED:  # the copies read zeros past the sequence
            lse2 = tl.where(row_ok, lse2, float("inf"))
            delta = tl.where(row_ok, delta, 0.0)
    elif MASKED:
        lse2 = tl.load(LSE + l_base + offs_m, mask=row_ok, other=float("inf")) * LOG2E_C
        delta = tl.load(DELTA + l_base + offs_m, mask=row_ok, other=0.0)
    else:
        lse2 = tl.load(LSE + l_base + offs_m) * LOG2E_C
        delta = tl.load(DELTA + l_base + offs_m)
    return q, do, lse2, delta


@triton.jit
def _row_probs(s, lse2, offs_m, start_n, offs_n, key_ok, seqlen_q, seqlen_k, window_left,
               window_right, MASKED: tl.constexpr, HAS_WL: tl.constexpr, HAS_WR: tl.constexpr,
               HAS_KPM: tl.constexpr):
    """P (BLOCK_M, BLOCK_N) = exp2(s - lse2) for scores ``s`` in log2 units and the rows'
    ``lse2`` (BLOCK_M,): 0 where the mask hides key ``start_n + offs_n`` (MASKED; ``offs_n`` a
    ``tl.arange``) or ``key_ok`` (BLOCK_N,) is false (HAS_KPM). The scores rows first, as the dQ
    and the rows-first dK/dV tiles hold them."""
    p = tl.exp2(s - lse2[:, None])
    if MASKED:
        ok = visible(offs_m, start_n, offs_n, seqlen_q, seqlen_k, window_left, window_right,
                     HAS_WL, HAS_WR)
        p = tl.where(ok, p, 0.0)
    if HAS_KPM:
        p = tl.where(key_ok[None, :], p, 0.0)
    return p


@triton.jit
def _dkdv_tiles(
    dk, dv, k, v, key_ok, q_src, do_src, LSE, DELTA, l_base, stride_qs, stride_ds,
    offs_n, start_n, offs_d, d_ok, b, h, lo, hi, seqlen_q, seqlen_k, max_seqlen_q, max_seqlen_k,
    num_heads_q, qk_scale, softcap, window_left, window_right, dropout_p, drop_scale, seed,
    MASKED: tl.constexpr, HAS_WL: tl.constexpr, HAS_WR: tl.constexpr,
    HAS_SOFTCAP: tl.constexpr, HAS_DROPOUT: tl.constexpr, HAS_KPM: tl.constexpr,
    DOT_FP32: tl.constexpr, EVEN_D: tl.constexpr, BLOCK_M: tl.constexpr, TMA_MODE: tl.constexpr,
    ROWS_FIRST: tl.constexpr, LSE_TMA: tl.constexpr,
):
    """Query tiles ``[lo, hi)`` of one head against the resident key tile ``offs_n`` (``start_n``
    onwards). Unmasked tiles lie inside the sequence and the window; with HAS_KPM, keys whose
    ``key_ok`` (BLOCK_N,) is false get no probability in any tile. Q/dO come from
    ``q_src``/``do_src`` (``head_sources``) as TMA_MODE says.

    The scores are transposed, (BLOCK_N, BLOCK_M), so no register tile needs a transpose; with
    ROWS_FIRST they are (BLOCK_M, BLOCK_N), S = Q K^T and dP = dO V^T, and P^T and dS^T reach dV
    and dK as A operands through shared memory. At 128 rows and 8 warps each warpgroup then
    computes 64 rows of S once, where Triton's layout of the transposed (64, 64) scores has both
    warpgroups compute the same rows (v44b)."""
    offs_m0 = tl.arange(0, BLOCK_M)
    for start_m in range(lo, hi, BLOCK_M):
        offs_m = start_m + offs_m0
        q, do, lse2, delta = _query_tile(q_src, do_src, LSE, DELTA, l_base, b, h, start_m,
                                         offs_m, stride_qs, stride_ds, offs_d, d_ok, seqlen_q,
                                         MASKED, EVEN_D, TMA_MODE, not ROWS_FIRST, LSE_TMA)
        if ROWS_FIRST:
            s = scores(dot(q, tl.trans(k), DOT_FP32), qk_scale, softcap, HAS_SOFTCAP)  # (M, N)
            p = _row_probs(s, lse2, offs_m, start_n, offs_n - start_n, key_ok, seqlen_q,
                           seqlen_k, window_left, window_right, MASKED, HAS_WL, HAS_WR, HAS_KPM)
            dp = dot(do, tl.trans(v), DOT_FP32)  # (M, N)
            if HAS_DROPOUT:
                keep = keep_mask(seed, dropout_p, b, h, num_heads_q, max_seqlen_q, max_seqlen_k,
                                 offs_m, offs_n)
                dv += dot(tl.trans(rounded(tl.where(keep, p * drop_scale, 0.0), do.dtype)), do,
                          DOT_FP32)
                dp = tl.where(keep, dp * drop_scale, 0.0)
            else:
                dv += dot(tl.trans(rounded(p, do.dtype)), do, DOT_FP32)
            ds = p * (dp - delta[:, None])
            if HAS_SOFTCAP:
                t = s * (1.0 / (softcap * LOG2E_C))
                ds = ds * (1.0 - t * t)
            dk += dot(tl.trans(rounded(ds, q.dtype)), q, DOT_FP32)
        else:  # q is Q^T, (BLOCK_D, BLOCK_M)
            s_t = scores(dot(k, q, DOT_FP32), qk_scale, softcap, HAS_SOFTCAP)  # (N, M)
            p_t = tl.exp2(s_t - lse2[None, :])
            if MASKED:
                ok_t = visible(offs_n, start_m, offs_m0, seqlen_q, seqlen_k, window_left,
                               window_right, HAS_WL, HAS_WR, True)
                p_t = tl.where(ok_t, p_t, 0.0)
            if HAS_KPM:
                p_t = tl.where(key_ok[:, None], p_t, 0.0)
            dp_t = dot(v, tl.trans(do), DOT_FP32)  # (N, M)
            if HAS_DROPOUT:
                keep_t = keep_mask(seed, dropout_p, b, h, num_heads_q, max_seqlen_q,
                                   max_seqlen_k, offs_m, offs_n, True)
                dv += dot(rounded(tl.where(keep_t, p_t * drop_scale, 0.0), do.dtype), do,
                          DOT_FP32)
                dp_t = tl.where(keep_t, dp_t * drop_scale, 0.0)
            else:
                dv += dot(rounded(p_t, do.dtype), do, DOT_FP32)
            ds_t = p_t * (dp_t - delta[None, :])
            if HAS_SOFTCAP:
                t = s_t * (1.0 / (softcap * LOG2E_C))
                ds_t = ds_t * (1.0 - t * t)
            dk += dot(rounded(ds_t, q.dtype), tl.trans(q), DOT_FP32)
    return dk, dv


@seeded_jit
def _dkdv_kernel(
    Q, K, V, DO, LSE, DELTA, DK, DV, CU_Q, CU_K, KPM,
    stride_qb, stride_qs, stride_qh,
    stride_kb, stride_ks, stride_kh,
    stride_vb, stride_vs, stride_vh,
    stride_db, stride_ds, stride_dh,
    stride_dkb, stride_dks, stride_dkh,
    stride_dvb, stride_dvs, stride_dvh,
    stride_split_dk, stride_split_dv,
    stride_lb, stride_lh, stride_kpm,
    seqlen_q_dense, seqlen_k_dense, max_seqlen_q, max_seqlen_k,
    num_heads_q, num_heads_k, group, splits, head_dim,
    softmax_scale, qk_scale, softcap, window_left, window_right,
    dropout_p, drop_scale, seed,
    IS_VARLEN: tl.constexpr, HAS_WL: tl.constexpr, HAS_WR: tl.constexpr,
    HAS_SOFTCAP: tl.constexpr, HAS_DROPOUT: tl.constexpr, HAS_KPM: tl.constexpr,
    DOT_FP32: tl.constexpr, EVEN_D: tl.constexpr, BLOCK_D: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, USE_TMA: tl.constexpr,
    ROWS_FIRST_MIN_M: tl.constexpr, VECTOR_TMA: tl.constexpr, GROUP_PROGRAMS: tl.constexpr,
):
    TMA_MODE: tl.constexpr = tma_mode(USE_TMA, IS_VARLEN)
    # Causal D64 TMA configs take ``scheduled_tile``'s groups, heaviest (first) key tiles
    # first, of about GROUP_PROGRAMS programs: 0.4-2.9% faster forward + backward at S 2048-4096
    # on an H200, where the pointer config (32, 64, 4, 2) ran 6-8% slower (docs/kernel_notes.md,
    # v71a). Others keep the grid's own order, each column's heaviest key tile first.
    GROUPED: tl.constexpr = HAS_WR and GROUP_PROGRAMS > 0 and USE_TMA and BLOCK_D == 64
    tile, column = scheduled_tile(GROUPED, GROUP_PROGRAMS)
    if GROUPED:
        tile = tl.num_programs(0) - 1 - tile
    start_n = tile * BLOCK_N
    split = column % splits  # this program's share of the group's query heads
    bh = column // splits
    b = bh // num_heads_k
    hk = bh % num_heads_k
    q_start, seqlen_q, k_start, seqlen_k = sequence_bounds(CU_Q, CU_K, b, seqlen_q_dense,
                                                           seqlen_k_dense, IS_VARLEN)
    if start_n >= seqlen_k:
        return
    b64 = b.to(tl.int64)
    offs_n = start_n + tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, BLOCK_D)
    d_ok = offs_d < head_dim
    kv_mask = (offs_n[:, None] < seqlen_k) & d_ok[None, :]
    krows = (k_start + offs_n).to(tl.int64)[:, None]
    k = tl.load(K + b64 * stride_kb + hk * stride_kh + krows * stride_ks + offs_d[None, :],
                mask=kv_mask, other=0.0)
    v = tl.load(V + b64 * stride_vb + hk * stride_vh + krows * stride_vs + offs_d[None, :],
                mask=kv_mask, other=0.0)
    key_ok = offs_n < seqlen_k
    if HAS_KPM:
        key_ok = tl.load(KPM + b64 * stride_kpm + offs_n, mask=key_ok, other=0) != 0

    # Query rows that see this key tile: [lo, full_lo) and [full_hi, hi) straddle a window
    # edge or the sequence end, [full_lo, full_hi) see every key of it (keys past the sequence
    # are loaded as 0 and never stored, so they need no mask).
    diag = seqlen_k - seqlen_q
    lo = 0
    hi = seqlen_q
    full_lo = 0
    full_hi = hi
    if HAS_WR:
        lo = tl.maximum(start_n - diag - window_right, 0)
        lo = (lo // BLOCK_M) * BLOCK_M
        full_lo = tl.cdiv(tl.maximum(start_n + BLOCK_N - 1 - diag - window_right, 0), BLOCK_M) * BLOCK_M
    if HAS_WL:
        hi = tl.maximum(tl.minimum(start_n + BLOCK_N - diag + window_left, seqlen_q), 0)
        full_hi = (tl.maximum(start_n - diag + window_left + 1, 0) // BLOCK_M) * BLOCK_M
    if HAS_KPM:  # a tile of padding keys only gets zero gradients: no query tile to visit
        hi = tl.where(tl.max(key_ok.to(tl.int32), 0) > 0, hi, lo)
    full_lo = tl.minimum(full_lo, hi)
    full_hi = tl.minimum(full_hi, (seqlen_q // BLOCK_M) * BLOCK_M)
    full_hi = tl.maximum(tl.minimum(full_hi, hi), full_lo)

    dk = tl.zeros([BLOCK_N, BLOCK_D], tl.float32)
    dv = tl.zeros([BLOCK_N, BLOCK_D], tl.float32)
    consts = (seqlen_q, seqlen_k, max_seqlen_q, max_seqlen_k, num_heads_q, qk_scale, softcap,
              window_left, window_right, dropout_p, drop_scale, seed)
    heads_per_split = group // splits
    ROWS_FIRST: tl.constexpr = ROWS_FIRST_MIN_M > 0 and BLOCK_M >= ROWS_FIRST_MIN_M
    LSE_TMA: tl.constexpr = VECTOR_TMA and TMA_MODE == HOST_DESCRIPTORS
    for g in range(split * heads_per_split, (split + 1) * heads_per_split):
        h = hk * group + g
        q_src, do_src = head_sources(Q, DO, b, h, q_start, stride_qb, stride_qh, stride_qs,
                                     stride_db, stride_dh, stride_ds, seqlen_q, head_dim, BLOCK_M,
                                     BLOCK_D, TMA_MODE)
        l_base = b64 * stride_lb + h * stride_lh + q_start
        args = (k, v, key_ok, q_src, do_src, LSE, DELTA, l_base, stride_qs, stride_ds,
                offs_n, start_n, offs_d, d_ok, b, h)
        dk, dv = _dkdv_tiles(dk, dv, *args, lo, full_lo, *consts, True, HAS_WL, HAS_WR,
                             HAS_SOFTCAP, HAS_DROPOUT, HAS_KPM, DOT_FP32, EVEN_D, BLOCK_M, TMA_MODE,
                             ROWS_FIRST, LSE_TMA)
        dk, dv = _dkdv_tiles(dk, dv, *args, full_lo, full_hi, *consts, False, HAS_WL, HAS_WR,
                             HAS_SOFTCAP, HAS_DROPOUT, HAS_KPM, DOT_FP32, EVEN_D, BLOCK_M, TMA_MODE,
                             ROWS_FIRST, LSE_TMA)
        if runs_range(full_hi, hi, TMA_MODE):  # a partial last tile, or a window edge
            dk, dv = _dkdv_tiles(dk, dv, *args, full_hi, hi, *consts, True, HAS_WL, HAS_WR,
                                 HAS_SOFTCAP, HAS_DROPOUT, HAS_KPM, DOT_FP32, EVEN_D, BLOCK_M,
                                 TMA_MODE, ROWS_FIRST, LSE_TMA)

    dk = dk * softmax_scale
    dk_ptrs = (DK + split * stride_split_dk + b64 * stride_dkb + hk * stride_dkh
               + krows * stride_dks + offs_d[None, :])
    dv_ptrs = (DV + split * stride_split_dv + b64 * stride_dvb + hk * stride_dvh
               + krows * stride_dvs + offs_d[None, :])
    tl.store(dk_ptrs, rounded(dk, DK.dtype.element_ty), mask=kv_mask)
    tl.store(dv_ptrs, rounded(dv, DV.dtype.element_ty), mask=kv_mask)


@triton.jit
def _dq_tiles(
    dq, p_dp, q, do, lse2, delta, k_src, v_src, kpm_row, stride_ks, stride_vs,
    offs_m, offs_d, d_ok, b, h, lo, hi, seqlen_q, seqlen_k, max_seqlen_q, max_seqlen_k,
    num_heads_q, qk_scale, softcap, window_left, window_right, dropout_p, drop_scale, seed,
    MASKED: tl.constexpr, HAS_WL: tl.constexpr, HAS_WR: tl.constexpr,
    HAS_SOFTCAP: tl.constexpr, HAS_DROPOUT: tl.constexpr, HAS_KPM: tl.constexpr,
    DOT_FP32: tl.constexpr, EVEN_D: tl.constexpr, BLOCK_N: tl.constexpr, TMA_MODE: tl.constexpr,
    ROWSUM_P_DP: tl.constexpr,
):
    """Key tiles ``[lo, hi)`` for a resident query tile: ``(dq, p_dp)`` with ROWSUM_P_DP adding
    each row's sum of ``P * dP`` (after dropout) to ``p_dp`` (BLOCK_M,). Unmasked tiles lie
    inside the sequence and the window; HAS_KPM reads the key padding mask row ``kpm_row`` in
    every tile. K/V from descriptors or pointers as in the forward."""
    offs_n = tl.arange(0, BLOCK_N)
    for start_n in range(lo, hi, BLOCK_N):
        cols = start_n + offs_n
        col_ok = cols < seqlen_k
        rows = cols.to(tl.int64)
        k = load_rows(k_src, start_n, rows, col_ok, stride_ks, offs_d, d_ok, MASKED, EVEN_D,
                      TMA_MODE)
        v = load_rows(v_src, start_n, rows, col_ok, stride_vs, offs_d, d_ok, MASKED, EVEN_D,
                      TMA_MODE)
        s = scores(dot(q, tl.trans(k), DOT_FP32), qk_scale, softcap, HAS_SOFTCAP)
        p = _row_probs(s, lse2, offs_m, start_n, offs_n, col_ok, seqlen_q, seqlen_k,
                       window_left, window_right, MASKED, HAS_WL, HAS_WR, False)
        if HAS_KPM:  # read after the exps, as in the timed kernels (not inside _row_probs)
            key_ok = tl.load(kpm_row + cols, mask=col_ok, other=0) != 0
            p = tl.where(key_ok[None, :], p, 0.0)
        dp = dot(do, tl.trans(v), DOT_FP32)
        if HAS_DROPOUT:
            keep = keep_mask(seed, dropout_p, b, h, num_heads_q, max_seqlen_q, max_seqlen_k,
                             offs_m, cols)
            dp = tl.where(keep, dp * drop_scale, 0.0)
        if ROWSUM_P_DP:  # P * dP once, for the sum and for dS (one more add per score)
            p_times_dp = p * dp
            p_dp += tl.sum(p_times_dp, 1)
            ds = p_times_dp - p * delta[:, None]
        else:
            ds = p * (dp - delta[:, None])
        if HAS_SOFTCAP:
            t = s * (1.0 / (softcap * LOG2E_C))
            ds = ds * (1.0 - t * t)
        dq += dot(rounded(ds, k.dtype), k, DOT_FP32)
    return dq, p_dp


@seeded_jit
def _dq_kernel(
    Q, K, V, O, DO, LSE, DELTA, P_DP, DQ, CU_Q, CU_K, KPM,
    stride_qb, stride_qs, stride_qh,
    stride_kb, stride_ks, stride_kh,
    stride_vb, stride_vs, stride_vh,
    stride_ob, stride_os, stride_oh,
    stride_db, stride_ds, stride_dh,
    stride_dqb, stride_dqs, stride_dqh,
    stride_lb, stride_lh, stride_kpm,
    seqlen_q_dense, seqlen_k_dense, max_seqlen_q, max_seqlen_k,
    num_heads_q, group, head_dim,
    softmax_scale, qk_scale, softcap, window_left, window_right,
    dropout_p, drop_scale, seed,
    IS_VARLEN: tl.constexpr, HAS_WL: tl.constexpr, HAS_WR: tl.constexpr,
    HAS_SOFTCAP: tl.constexpr, HAS_DROPOUT: tl.constexpr, HAS_KPM: tl.constexpr,
    DOT_FP32: tl.constexpr, EVEN_D: tl.constexpr, BLOCK_D: tl.constexpr,
    ROWSUM_P_DP: tl.constexpr, GROUP_PROGRAMS: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, USE_TMA: tl.constexpr,
):
    TMA_MODE: tl.constexpr = tma_mode(USE_TMA, IS_VARLEN)
    # Heaviest first where a causal mask makes tiles uneven.
    tile, bh = scheduled_tile(HAS_WR, GROUP_PROGRAMS)
    start_m = tile * BLOCK_M
    b = bh // num_heads_q
    h = bh % num_heads_q
    q_start, seqlen_q, k_start, seqlen_k = sequence_bounds(CU_Q, CU_K, b, seqlen_q_dense,
                                                           seqlen_k_dense, IS_VARLEN)
    if start_m >= seqlen_q:
        return
    hk = h // group
    b64 = b.to(tl.int64)
    offs_m = start_m + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, BLOCK_D)
    d_ok = offs_d < head_dim
    qrows = (q_start + offs_m).to(tl.int64)[:, None]
    q_mask = (offs_m[:, None] < seqlen_q) & d_ok[None, :]
    q = tl.load(Q + b64 * stride_qb + h * stride_qh + qrows * stride_qs + offs_d[None, :],
                mask=q_mask, other=0.0)
    do = tl.load(DO + b64 * stride_db + h * stride_dh + qrows * stride_ds + offs_d[None, :],
                 mask=q_mask, other=0.0)
    o = tl.load(O + b64 * stride_ob + h * stride_oh + qrows * stride_os + offs_d[None, :],
                mask=q_mask, other=0.0)
    # delta = rowsum(dO * O), stored for the dK/dV kernel, which runs after this one.
    delta = tl.sum(o.to(tl.float32) * do.to(tl.float32), 1)
    l_off = b64 * stride_lb + h * stride_lh + q_start + offs_m
    tl.store(DELTA + l_off, delta, mask=offs_m < seqlen_q)
    lse = tl.load(LSE + l_off, mask=offs_m < seqlen_q, other=float("inf"))
    lse2 = lse * LOG2E_C
    k_src, v_src = head_sources(K, V, b, hk, k_start, stride_kb, stride_kh, stride_ks,
                                stride_vb, stride_vh, stride_vs, seqlen_k, head_dim, BLOCK_N,
                                BLOCK_D, TMA_MODE)
    lo, full_lo, full_hi, hi = key_tiles(start_m, seqlen_q, seqlen_k, window_left, window_right,
                                         HAS_WL, HAS_WR, BLOCK_M, BLOCK_N)

    dq = tl.zeros([BLOCK_M, BLOCK_D], tl.float32)
    p_dp = tl.zeros([BLOCK_M], tl.float32)
    args = (q, do, lse2, delta, k_src, v_src, KPM + b64 * stride_kpm, stride_ks, stride_vs,
            offs_m, offs_d, d_ok, b, h)
    consts = (seqlen_q, seqlen_k, max_seqlen_q, max_seqlen_k, num_heads_q, qk_scale, softcap,
              window_left, window_right, dropout_p, drop_scale, seed)
    if runs_range(lo, full_lo, TMA_MODE):  # before a window: empty without one
        dq, p_dp = _dq_tiles(dq, p_dp, *args, lo, full_lo, *consts, True, HAS_WL, HAS_WR,
                             HAS_SOFTCAP, HAS_DROPOUT, HAS_KPM, DOT_FP32, EVEN_D, BLOCK_N,
                             TMA_MODE, ROWSUM_P_DP)
    if runs_range(full_lo, full_hi, TMA_MODE):
        dq, p_dp = _dq_tiles(dq, p_dp, *args, full_lo, full_hi, *consts, False, HAS_WL, HAS_WR,
                             HAS_SOFTCAP, HAS_DROPOUT, HAS_KPM, DOT_FP32, EVEN_D, BLOCK_N,
                             TMA_MODE, ROWSUM_P_DP)
    if runs_range(full_hi, hi, TMA_MODE):
        dq, p_dp = _dq_tiles(dq, p_dp, *args, full_hi, hi, *consts, True, HAS_WL, HAS_WR,
                             HAS_SOFTCAP, HAS_DROPOUT, HAS_KPM, DOT_FP32, EVEN_D, BLOCK_N,
                             TMA_MODE, ROWSUM_P_DP)
    if ROWSUM_P_DP:
        tl.store(P_DP + l_off, p_dp, mask=offs_m < seqlen_q)

    dq = dq * softmax_scale
    tl.store(DQ + b64 * stride_dqb + h * stride_dqh + qrows * stride_dqs + offs_d[None, :],
             rounded(dq, DQ.dtype.element_ty), mask=q_mask)


# (BLOCK_M, BLOCK_N, num_warps, num_stages[, use TMA[, register cap]]) per padded head dim; the
# first entry is the one launched without autotuning. Chosen from benchmarks/tune_kernel.py
# sweeps on an H200 (docs/kernel_notes.md, v5 and v6). Head dims 16 and 32 from one table sweep
# (S 2048, causal and not, session 58): with the dK/dV's (32, 128, 4, 3) the backward took 7-17%
# less time than with the former first entry, (64, 64, 4, 3); its (64, 128, 8, 3), 20-49% behind,
# was dropped; with the dQ's (64, 64, 4, 3) 1-6% less than with (128, 64, 8, 3). The spill-free
# capped dK/dV entries (D16 (32, 128, 4, 3) at 168, D32 (32, 64, 4, 2) at 128) ran level with
# their uncapped twins and were not kept. D256's dK/dV TMA entry spills less than the same tile
# through pointers (908 against 1324 bytes, sm_90a) and ran the backward 1.6-7% faster than the
# best pointer entry at 4096 rows on an H200; the spill-free TMA dQ tiles tried there (64 rows,
# 8 warps) ran the backward 25-59% slower and are not listed (session 43). D64's capped entries
# fit one more program per SM on sm_90a (dK/dV at 168 registers: 3 instead of 2, 8 bytes of
# stack for spills; dQ at 128: 2 instead of 1, 32 bytes): at S 1024, causal, they ran the
# backward 2-5% (dK/dV) and up to 4% (dQ, MHA) faster than the same tiles uncapped on an H200
# (kernel_notes.md, session 57).
_DKDV_CONFIGS = {
    16: [(32, 128, 4, 3), (32, 64, 4, 2), (64, 64, 4, 3)],
    32: [(32, 128, 4, 3), (32, 64, 4, 2), (64, 64, 4, 3)],
    64: [(64, 64, 4, 3, True), (64, 64, 4, 3), (32, 64, 4, 2), (64, 128, 8, 3),
         (32, 64, 4, 3, True), (32, 64, 4, 2, False, 168)],
    128: [(32, 64, 4, 3, True), (64, 128, 8, 3), (32, 64, 4, 3), (64, 64, 4, 2),
          (64, 128, 8, 3, True)],
    256: [(128, 64, 8, 1), (128, 64, 8, 1, True), (64, 64, 8, 2), (32, 64, 8, 3),
          (32, 64, 8, 2), (64, 64, 8, 2, True)],
}
# Padded head dim -> the smallest BLOCK_M whose dK/dV tiles compute the scores rows first
# (``_dkdv_tiles`` with ROWS_FIRST); other head dims and tiles compute them transposed. At 128
# rows and 8 warps each warpgroup computes its own 64 rows of S and dP, where the transposed
# (64, 64) scores are computed by both warpgroups; head dim 256's backward ran 18-20% faster on
# an H200 with its 128-row entries (S 4096, docs/kernel_notes.md, v44b, session 45). Its
# 32-row entries rows first had up to 4x the gradient error of the transposed ones on that GPU
# (not in the interpreter), so rows first is kept to tiles of at least 16 rows a warp.
_ROWS_FIRST_MIN_M = {256: 128}
# Dense TMA configs read lse and delta through host descriptors (``vector_descriptor``) under
# Triton before 3.9 (v62a): 3.6 copies each thread's values of the transposed tiles' vectors
# one by one, 32 cp.async a query tile, where 3.9 copies one value a thread; through
# descriptors 3.6's loop over unmasked query tiles builds with none and 400 instructions
# against 446 (3.9: 384), while 3.9's own build with descriptors has 9 barriers against 5 (D64
# (64, 64, 4, 3, TMA), sm_90a, docs/kernel_notes.md, session 62). Timed under 3.6 (session 63,
# two H200s, the whole backward with the Triton dK/dV at D64 S 2048 and 4096): +1.9% to +8.2%.
_VECTOR_TMA = release_below(triton.__version__, (3, 9))
_DQ_CONFIGS = {
    16: [(64, 64, 4, 3), (128, 32, 4, 3), (128, 64, 4, 3), (128, 64, 8, 3)],
    32: [(64, 64, 4, 3), (128, 32, 4, 3), (128, 64, 8, 3), (128, 64, 4, 3)],
    64: [(128, 64, 4, 3, True), (128, 64, 8, 3), (128, 64, 4, 3), (64, 64, 4, 3),
         (128, 64, 8, 3, False, 128)],
    128: [(128, 64, 8, 3, True), (128, 64, 8, 3), (128, 32, 4, 3), (128, 128, 8, 2),
          (64, 64, 4, 2), (64, 32, 4, 3, True)],
    256: [(128, 32, 8, 3), (64, 32, 4, 3), (64, 64, 4, 2), (128, 32, 8, 2)],
}
# Head dim 256 launches the dK/dV compiled with ``group`` and ``splits`` as runtime ints even
# when they are 1 (MHA): on an H200 (S 4096, causal MHA) the whole backward ran 8-19% faster at
# three of the table's four entries than with the kernel specialized on them (level at
# (32, 64, 8, 2), and without a mask); at head dim 64 the same change ran 1-14% slower per
# entry, at 128 the best entry 1% slower (docs/kernel_notes.md, v43b, sessions 43-44).
_dkdv_kernel_runtime_group = runtime_ints_jit(_dkdv_kernel, ("group", "splits"))
_dkdv_launch = TiledLaunch(_dkdv_kernel, _DKDV_CONFIGS,
                           variants={256: _dkdv_kernel_runtime_group},
                           descriptors={"Q": "BLOCK_M", "DO": "BLOCK_M"},
                           vector_descriptors={"LSE": "BLOCK_M", "DELTA": "BLOCK_M"})
_dq_launch = TiledLaunch(_dq_kernel, _DQ_CONFIGS, descriptors={"K": "BLOCK_N", "V": "BLOCK_N"})


def flash_attn_bwd(dout, q, k, v, out, lse, *, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
                   max_seqlen_k, softmax_scale, causal, window_left, window_right, softcap,
                   dropout_p, seed, deterministic=True, key_padding_mask=None, p_dp_out=None):
    """Gradients of ``flash_attn_fwd``: returns (dq, dk, dv) shaped like q, k, v.

    Always deterministic (no atomics); ``deterministic`` is accepted for the contract.
    ``lse`` must be the forward's (fp32, lse layout); dout/out like q; ``key_padding_mask`` the
    forward's (masked keys get zero dK/dV). ``p_dp_out``: None, or fp32 like ``lse``, which
    receives each row's sum of ``P * dP`` (the Triton dQ kernel computes it; the Gluon one does
    not, so such calls take the Triton dQ).

    Dense calls without a mask or ``p_dp_out`` launch the plan of their first call with the same
    signature (``_prepared``), if it took this module's kernels.
    """
    del deterministic
    signature = None
    if (_prepared.active() and cu_seqlens_q is None and key_padding_mask is None
            and p_dp_out is None and lse.is_contiguous()
            and all(t.stride(-1) == 1 for t in (dout, q, k, v, out))):
        signature = ("bwd", *_prepared.layout(dout, q, k, v, out, lse), q.device, softmax_scale,
                     causal, window_left, window_right, softcap, dropout_p,
                     _prepared.seed_width(seed))
        plan = _prepared.lookup(signature)
        if plan is not None:
            return plan(dout, q, k, v, out, lse, seed)
    varlen = cu_seqlens_q is not None
    dout, q, k, v, out = (last_dim_contiguous(t) for t in (dout, q, k, v, out))
    head_dim = q.shape[-1]
    hq, hk = q.shape[-2], k.shape[-2]
    if causal:
        window_right = 0
    if varlen:
        batch = cu_seqlens_q.numel() - 1
        sq, sk = int(max_seqlen_q), int(max_seqlen_k)
    else:
        batch, sq, sk = q.shape[0], q.shape[1], k.shape[1]
        max_seqlen_q, max_seqlen_k = sq, sk
    check_grid(batch, hq)
    lse = lse.contiguous()
    delta = torch.empty_like(lse)
    dq = torch.empty_like(q)
    bd = block_d(head_dim)
    cu_q = cu_seqlens_q if varlen else lse
    cu_k = cu_seqlens_k if varlen else lse
    lse_strides = lse_layout(lse, varlen)
    kpm, stride_kpm, has_kpm = key_mask_args(key_padding_mask, batch, sk, varlen, lse)

    has_softcap = softcap is not None and softcap > 0
    qk_scale = softmax_scale if has_softcap else softmax_scale * LOG2E
    common = (
        sq, sk, int(max_seqlen_q), int(max_seqlen_k),
    )
    tail = (
        float(softmax_scale), float(qk_scale), float(softcap or 0.0), int(window_left),
        int(window_right), float(dropout_p), 1.0 / (1.0 - dropout_p), int(seed),
    )
    flags = dict(
        IS_VARLEN=varlen, HAS_WL=window_left >= 0, HAS_WR=window_right >= 0,
        HAS_SOFTCAP=has_softcap, HAS_DROPOUT=dropout_p > 0.0, HAS_KPM=has_kpm,
        DOT_FP32=INTERPRET,
        EVEN_D=bd == head_dim, BLOCK_D=bd,
    )
    tma_ok = tma_ready(max(sq, sk), q, k, v, dout,
                       windowed=window_left >= 0 or window_right >= 0)
    qkv = (*seq_layout(q, varlen), *seq_layout(k, varlen), *seq_layout(v, varlen))
    do_layout = seq_layout(dout, varlen)
    key = (seq_bucket(max(sq, sk)), head_dim, hq // hk, q.dtype, tma_ok, *flags.values())

    features = dict(varlen=varlen, window_left=window_left, window_right=window_right,
                    causal=causal, has_softcap=has_softcap, dropout_p=dropout_p,
                    key_padding_mask=key_padding_mask, tma_ok=tma_ok)
    gluon_dq, gluon_dkdv = (flash_bwd_hopper.routes(q, k, **features)
                            if flash_bwd_hopper is not None else (False, False))
    rowsum_p_dp = p_dp_out is not None
    gluon_dq = gluon_dq and not rowsum_p_dp
    # dQ first: its kernel also computes delta = rowsum(dO * O), which the dK/dV kernel reads.
    if gluon_dq:
        with on_device_of(q):
            flash_bwd_hopper.dq_hopper(q, k, v, out, dout, lse, delta, dq,
                                       softmax_scale=softmax_scale, causal=causal)
        _dq_launch.last = flash_bwd_hopper.dq_tile_record(head_dim)
    else:
        p_dp = p_dp_out if rowsum_p_dp else lse  # unused pointer without ROWSUM_P_DP
        dq_tensors = (q, k, v, out, dout, lse, delta, p_dp, dq, cu_q, cu_k, kpm)
        dq_args = (*dq_tensors, *qkv, *seq_layout(out, varlen), *do_layout,
                   *seq_layout(dq, varlen), *lse_strides, stride_kpm, *common, hq, hq // hk,
                   head_dim, *tail)
        dq_flags = {**flags, "ROWSUM_P_DP": rowsum_p_dp,
                    "GROUP_PROGRAMS": _common.DQ_GROUP_PROGRAMS}

        def dq_grid(meta):
            return ceil_div(int(max_seqlen_q), meta["BLOCK_M"]), batch * hq

        dq_key = (*key, rowsum_p_dp, dq_flags["GROUP_PROGRAMS"])
        dq_compiled = _dq_launch(dq_grid, bd, dq_key, dq_args, dq_flags, tma_ok)

    # dK/dV: a program per key tile and KV head, or per key tile and part of a KV head's group.
    splits = dkdv_splits(int(max_seqlen_k), batch, hk, hq // hk, q.device, causal, gluon_dkdv)
    dk, dv, dk_out, dv_out = _dkdv_outputs(k, v, splits)
    if gluon_dkdv:
        with on_device_of(q):
            flash_bwd_hopper.dkdv_hopper(q, k, v, dout, lse, delta, dk_out, dv_out,
                                         softmax_scale=softmax_scale, causal=causal)
        _dkdv_launch.last = flash_bwd_hopper.tile_record(head_dim)
    else:
        dkdv_tensors = (q, k, v, dout, lse, delta, dk_out, dv_out, cu_q, cu_k, kpm)
        dkdv_args = (*dkdv_tensors, *qkv, *do_layout, *seq_layout(dk_out[0], varlen),
                     *seq_layout(dv_out[0], varlen), dk_out.stride(0), dv_out.stride(0),
                     *lse_strides, stride_kpm, *common, hq, hk, hq // hk, splits, head_dim,
                     *tail)

        def dkdv_grid(meta):
            return ceil_div(int(max_seqlen_k), meta["BLOCK_N"]), batch * hk * splits

        dkdv_flags = {**flags, "ROWS_FIRST_MIN_M": _ROWS_FIRST_MIN_M.get(bd, 0),
                      "VECTOR_TMA": vector_tma_ok(lse, varlen, tma_ok),
                      "GROUP_PROGRAMS": _common.DKDV_GROUP_PROGRAMS}
        dkdv_key = (*key, splits, dkdv_flags["VECTOR_TMA"], dkdv_flags["GROUP_PROGRAMS"])
        dkdv_compiled = _dkdv_launch(dkdv_grid, bd, dkdv_key, dkdv_args, dkdv_flags, tma_ok)
    if splits > 1:
        dk, dv = sum_partials(dk_out, k.dtype), sum_partials(dv_out, v.dtype)
    if signature is not None and not gluon_dq and not gluon_dkdv:
        # The seed is both kernels' last argument.
        dq_plan = _prepared.prepare(_dq_launch, dq_compiled, dq_grid, dq_args, dq_flags,
                                    len(dq_tensors), len(dq_args) - 1)
        dkdv_plan = _prepared.prepare(_dkdv_launch, dkdv_compiled, dkdv_grid, dkdv_args,
                                      dkdv_flags, len(dkdv_tensors), len(dkdv_args) - 1)
        if dq_plan is not None and dkdv_plan is not None:
            _prepared.keep(signature, _BackwardPlan(dq_plan, dkdv_plan, splits))
    return dq, dk, dv


def vector_tma_ok(lse: torch.Tensor, varlen: bool, tma_ok: bool) -> bool:
    """Whether the dK/dV's TMA configs read ``lse`` (B, H, S) and ``delta`` (its layout) through
    ``vector_descriptor``s: under ``_VECTOR_TMA``, dense, TMA-ready and ``vector_readable``
    (``delta`` is a fresh ``empty_like``)."""
    return _VECTOR_TMA and tma_ok and not varlen and vector_readable(lse)


def _dkdv_outputs(k, v, splits: int) -> tuple:
    """``(dk, dv, dk_out, dv_out)``: with ``splits`` > 1 the dK/dV kernel writes fp32 partials
    ``dk_out``, ``dv_out`` (splits, *shape) to be summed into dK and dV (None until then);
    otherwise dK and dV themselves, ``dk_out``, ``dv_out`` being (1, *shape) views of them."""
    if splits > 1:
        return (None, None,
                torch.empty((splits, *k.shape), device=k.device, dtype=torch.float32),
                torch.empty((splits, *v.shape), device=v.device, dtype=torch.float32))
    dk, dv = torch.empty_like(k), torch.empty_like(v)
    return dk, dv, dk.unsqueeze(0), dv.unsqueeze(0)


class _BackwardPlan:
    """``flash_attn_bwd``'s plan for one signature (both kernels Triton's):
    ``plan(dout, q, k, v, out, lse, seed) -> (dq, dk, dv)``."""

    __slots__ = ("dq", "dkdv", "splits")

    def __init__(self, dq: _prepared.Prepared, dkdv: _prepared.Prepared, splits: int):
        self.dq, self.dkdv, self.splits = dq, dkdv, splits

    def __call__(self, dout, q, k, v, out, lse, seed):
        delta, dq = torch.empty_like(lse), torch.empty_like(q)
        dk, dv, dk_out, dv_out = _dkdv_outputs(k, v, self.splits)
        seed = int(seed)
        with on_device_of(q):  # unused pointers are lse, as in the full launches
            self.dq((q, k, v, out, dout, lse, delta, lse, dq, lse, lse, lse), seed)
            self.dkdv((q, k, v, dout, lse, delta, dk_out, dv_out, lse, lse, lse), seed)
        if self.splits > 1:
            dk, dv = sum_partials(dk_out, k.dtype), sum_partials(dv_out, v.dtype)
        return dq, dk, dv


@triton.jit
def _sum_partials_kernel(P, OUT, n, SPLITS: tl.constexpr, BLOCK: tl.constexpr):
    """OUT[i] = P[0, i] + P[1, i] + ... (fp32, in that order), rounded once to OUT's dtype."""
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    ok = offs < n
    acc = tl.load(P + offs, mask=ok, other=0.0)
    for s in tl.static_range(1, SPLITS):
        acc += tl.load(P + (offs + s * n.to(tl.int64)), mask=ok, other=0.0)
    tl.store(OUT + offs, rounded(acc, OUT.dtype.element_ty), mask=ok)


SUM_BLOCK = 1024


def sum_partials(partials: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """The group split's contiguous fp32 partials (splits, *shape) summed in fp32 in a fixed
    order (deterministic) and rounded once to ``dtype``: a new contiguous (*shape) tensor. One
    pass over the partials (``partials.sum(0).to(dtype)`` takes two and an fp32 temporary;
    ``torch.sum(..., out=)`` into ``dtype`` would round every partial first)."""
    out = torch.empty(partials.shape[1:], device=partials.device, dtype=dtype)
    n = out.numel()
    with on_device_of(partials):
        _sum_partials_kernel[(ceil_div(n, SUM_BLOCK),)](
            partials, out, n, SPLITS=partials.shape[0], BLOCK=SUM_BLOCK, **COMPILE_OPTIONS)
    return out


# Programs the dK/dV kernel should have at least, per SM: GQA 8:1 at 4096 tokens (H200, 132 SMs)
# ran its backward in 2.30 ms unsplit, 2.18 ms at 4 per SM (2 splits), 2.09 at 8 (4 splits),
# 2.11 at 16 (8 splits); docs/kernel_notes.md v8c.
PROGRAMS_PER_SM = 8


def group_splits(programs: int, group: int, sms: int, per_sm: int | None = None,
                 most: int | None = None) -> int:
    """Into how many programs to split each KV head's ``group`` query heads in the dK/dV kernel,
    given its ``programs`` (key tiles x batch x KV heads) unsplit and the GPU's ``sms``: the
    smallest divisor of the group, at most ``most`` (default the group), reaching
    ``per_sm * sms`` programs (default ``PROGRAMS_PER_SM``), else the largest such divisor.
    With few programs the longest ones (a causal mask's first key tiles, which every later query
    sees, times the whole group) set the kernel's time."""
    per_sm = PROGRAMS_PER_SM if per_sm is None else per_sm
    divisors = [n for n in range(1, (most or group) + 1) if group % n == 0]
    for splits in divisors:
        if programs * splits >= per_sm * sms:
            return splits
    return divisors[-1]


def dkdv_splits(max_seqlen_k: int, batch: int, hk: int, group: int, device: torch.device,
                causal: bool, gluon: bool) -> int:
    """``group_splits`` for one dK/dV launch: the Gluon kernel's (128-key tiles, its own
    ``flash_bwd_hopper.PROGRAMS_PER_SM`` and ``MOST_SPLITS``) or the Triton kernel's (programs
    counted with 64-key tiles, those of most of its configs)."""
    if gluon:
        return group_splits(ceil_div(max_seqlen_k, flash_bwd_hopper.BLOCK_N) * batch * hk, group,
                            sm_count(device), flash_bwd_hopper.PROGRAMS_PER_SM[bool(causal)],
                            flash_bwd_hopper.MOST_SPLITS)
    return group_splits(ceil_div(max_seqlen_k, 64) * batch * hk, group, sm_count(device))


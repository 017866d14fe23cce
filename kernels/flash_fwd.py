"""FlashAttention-2 forward with the stabilized shift (Algorithm 3, ties across tiles).

One kernel for the dense ``(B, S, H, D)`` and packed ``(T, H, D)`` + ``cu_seqlens`` layouts,
compile-time switches for windows, softcap, dropout and the fix. Per query tile the kernel keeps
the running maximum ``m1``, whether the row is tied (``m1 - m2 <= w`` for the runner-up ``m2``,
tracked as a count; see ``_fwd_tiles``), the row sum ``l`` and the fp32 accumulator; after every
key tile it re-derives the row's shift (a tie found against the running maximum moves it) and
rescales ``acc``/``l`` by ``exp2(shift_old - shift_new)``.

On Hopper, ``flash_attn_fwd`` hands the calls ``flash_fwd_hopper.covers`` to that module's
warp-specialized Gluon kernel (the same arithmetic, measured faster there) and launches this one
for every other call.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from . import _common, _prepared
from ._common import (
    INTERPRET, LN2, LOG2E, TiledLaunch, at_least, block_d, ceil_div, check_grid, dot,
    keep_mask, head_sources, key_mask_args, key_tiles, last_dim_contiguous, load_rows, lse_layout,
    on_device_of, rounded, scheduled_tile, scores_unscaled, seeded_jit, seq_bucket, seq_layout,
    sequence_bounds, tie_gap, tma_mode, tma_ready, visible,
)

try:
    from . import flash_fwd_hopper
except ImportError:  # a Triton without Gluon's Hopper API: every call takes the Triton kernel
    flash_fwd_hopper = None

LN2_C = tl.constexpr(LN2)
LOG2E_C = tl.constexpr(LOG2E)
ONE_BITS = tl.constexpr(0x3F800000)  # 1.0f as int32


@triton.jit
def _fwd_tiles(
    acc, l_i, m1, tied, shift, q, k_src, v_src, kpm_row, stride_ks, stride_vs,
    offs_m, offs_d, d_ok, b, h, lo, hi, seqlen_q, seqlen_k, max_seqlen_q, max_seqlen_k,
    num_heads_q, qk_scale, softcap, window_left, window_right, dropout_p, drop_scale, seed,
    beta, tie_window, min_gap, max_gap,
    MASKED: tl.constexpr, HAS_WL: tl.constexpr, HAS_WR: tl.constexpr,
    HAS_SOFTCAP: tl.constexpr, HAS_DROPOUT: tl.constexpr, HAS_KPM: tl.constexpr,
    STABILIZE: tl.constexpr, SHIFT_SINGLE: tl.constexpr,
    DOT_FP32: tl.constexpr, EVEN_D: tl.constexpr, BLOCK_N: tl.constexpr, TMA_MODE: tl.constexpr,
):
    """Key tiles ``[lo, hi)``; MASKED applies the causal/window/length mask (only the tiles
    on a mask boundary take this path), HAS_KPM the key padding mask row ``kpm_row`` (every
    tile). K/V come from ``k_src``/``v_src`` (``head_sources``) as TMA_MODE says."""
    offs_n = tl.arange(0, BLOCK_N)
    # A masked range holds the few tiles a mask edge crosses within the block's rows: software
    # pipelining buys it little, and its prologue and epilogue made the forward up to 27% slower
    # (docs/kernel_notes.md, v49b).
    for start_n in tl.range(lo, hi, BLOCK_N, num_stages=1 if MASKED else None):
        cols = start_n + offs_n
        col_ok = cols < seqlen_k
        k = load_rows(k_src, start_n, cols.to(tl.int64), col_ok, stride_ks, offs_d, d_ok, MASKED,
                      EVEN_D, TMA_MODE)
        # s * s_scale are the scores in log2 units; the scale is applied once per row to the
        # max and folded into exp2's argument (one FMA per score instead of a multiply and an add).
        s, s_scale = scores_unscaled(dot(q, tl.trans(k), DOT_FP32), qk_scale, softcap, HAS_SOFTCAP)
        if MASKED:
            ok = visible(offs_m, start_n, offs_n, seqlen_q, seqlen_k, window_left,
                         window_right, HAS_WL, HAS_WR)
            s = tl.where(ok, s, float("-inf"))
        if HAS_KPM:
            key_ok = tl.load(kpm_row + cols, mask=col_ok, other=0) != 0
            s = tl.where(key_ok[None, :], s, float("-inf"))

        # m1 (the running maximum) and tie_window are in s's units; top is m1 in log2 units.
        m1_new = tl.maximum(m1, tl.max(s, 1))
        top = m1_new * s_scale
        shift_new = tl.where(top > float("-inf"), top, 0.0)
        if STABILIZE:
            if SHIFT_SINGLE:
                tied = top > float("-inf")
            else:
                # m1 - m2 <= w  <=>  at least two scores (a repeated max counts twice) lie in
                # [m1 - w, m1]: count them in this tile, plus the old max if it is still in
                # the window; the old runner-up counts when the max did not move, and then the
                # old max makes the count at least one, so a tied row stays tied. Each counts
                # 1.0f and the bit patterns are summed as int32: n * 0x3F800000 mod 2^32 is 0
                # for n = 0, ONE_BITS for n = 1 and neither for 2 <= n < 512 (here n <= BLOCK_N
                # + 1). ptxas folds two terms per integer add (IADD3), which measured faster
                # than the fp32 count (docs/kernel_notes.md v10).
                floor = m1_new - tie_window
                near = tl.sum(at_least(s, floor[:, None]).to(tl.int32, bitcast=True), 1)
                near += at_least(m1, floor).to(tl.int32, bitcast=True)
                tied = (near != 0) & ((near != ONE_BITS) | (tied & (m1 == m1_new)))
            gap = tie_gap(top, beta, min_gap, max_gap)
            if MASKED or HAS_KPM:  # a row may have no visible key yet: all its scores count
                shift_new = tl.where(tied & (top > float("-inf")), top + gap, shift_new)
            else:
                shift_new = tl.where(tied, top + gap, top)
        alpha = tl.where(m1 > float("-inf"), tl.exp2(shift - shift_new), 1.0)
        m1 = m1_new
        shift = shift_new

        p = tl.exp2(s * s_scale - shift[:, None])
        l_i = l_i * alpha + tl.sum(p, 1)
        if HAS_DROPOUT:
            keep = keep_mask(seed, dropout_p, b, h, num_heads_q, max_seqlen_q, max_seqlen_k,
                             offs_m, cols)
            p = tl.where(keep, p * drop_scale, 0.0)
        v = load_rows(v_src, start_n, cols.to(tl.int64), col_ok, stride_vs, offs_d, d_ok, MASKED,
                      EVEN_D, TMA_MODE)
        acc = acc * alpha[:, None] + dot(rounded(p, v.dtype), v, DOT_FP32)
    return acc, l_i, m1, tied, shift


@triton.jit
def sink_fold(l_safe, shift, sink):
    """A row's attention with a sink logit ``sink`` (log2 units) from its row sum ``l_safe``
    (> 0) and ``shift`` (log2 units), (BLOCK_M,) each: ``(scale, lse)``, the factor that turns
    the accumulator into the output and the natural-log log-sum-exp, the sink included.
    With ``lse2 = shift + log2(l)``: ``lse2' = lse2 + log2(1 + 2^(sink - lse2))`` (the
    softplus written so neither exp2 overflows) and ``scale = 2^(lse2 - lse2') / l``."""
    lse2 = shift + tl.log2(l_safe)
    d = sink - lse2
    softplus = tl.maximum(d, 0.0) + tl.log2(1.0 + tl.exp2(-tl.abs(d)))
    return tl.exp2(-softplus) / l_safe, (lse2 + softplus) * LN2_C


@seeded_jit
def _fwd_kernel(
    Q, K, V, O, LSE, SHIFT, SINKS, CU_Q, CU_K, KPM,
    stride_qb, stride_qs, stride_qh,
    stride_kb, stride_ks, stride_kh,
    stride_vb, stride_vs, stride_vh,
    stride_ob, stride_os, stride_oh,
    stride_lb, stride_lh, stride_kpm,
    seqlen_q_dense, seqlen_k_dense, max_seqlen_q, max_seqlen_k,
    num_heads_q, group, head_dim,
    qk_scale, softcap, window_left, window_right,
    dropout_p, drop_scale, seed,
    beta, tie_window, min_gap, max_gap,
    IS_VARLEN: tl.constexpr, HAS_WL: tl.constexpr, HAS_WR: tl.constexpr,
    HAS_SOFTCAP: tl.constexpr, HAS_DROPOUT: tl.constexpr, HAS_KPM: tl.constexpr,
    STABILIZE: tl.constexpr, SHIFT_SINGLE: tl.constexpr, RETURN_SHIFT: tl.constexpr,
    HAS_SINKS: tl.constexpr,
    DOT_FP32: tl.constexpr, EVEN_D: tl.constexpr, BLOCK_D: tl.constexpr,
    GROUP_PROGRAMS: tl.constexpr,
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

    q_ptrs = (Q + b64 * stride_qb + h * stride_qh
              + (q_start + offs_m).to(tl.int64)[:, None] * stride_qs + offs_d[None, :])
    q = tl.load(q_ptrs, mask=(offs_m[:, None] < seqlen_q) & d_ok[None, :], other=0.0)
    k_src, v_src = head_sources(K, V, b, hk, k_start, stride_kb, stride_kh, stride_ks,
                                stride_vb, stride_vh, stride_vs, seqlen_k, head_dim, BLOCK_N,
                                BLOCK_D, TMA_MODE)
    lo, full_lo, full_hi, hi = key_tiles(start_m, seqlen_q, seqlen_k, window_left, window_right,
                                         HAS_WL, HAS_WR, BLOCK_M, BLOCK_N)

    m1 = tl.full([BLOCK_M], float("-inf"), tl.float32)
    tied = m1 > 0.0
    shift = tl.zeros([BLOCK_M], tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, BLOCK_D], tl.float32)
    args = (k_src, v_src, KPM + b64 * stride_kpm, stride_ks, stride_vs, offs_m, offs_d, d_ok, b, h)
    # The running maximum and the tie window in the units of scores_unscaled's scores (v78a).
    if HAS_SOFTCAP:
        window = tie_window
    else:
        window = tie_window / qk_scale
    consts = (seqlen_q, seqlen_k, max_seqlen_q, max_seqlen_k, num_heads_q, qk_scale, softcap,
              window_left, window_right, dropout_p, drop_scale, seed,
              beta, window, min_gap, max_gap)
    acc, l_i, m1, tied, shift = _fwd_tiles(
        acc, l_i, m1, tied, shift, q, *args, lo, full_lo, *consts, True, HAS_WL, HAS_WR,
        HAS_SOFTCAP, HAS_DROPOUT, HAS_KPM, STABILIZE, SHIFT_SINGLE, DOT_FP32, EVEN_D, BLOCK_N,
        TMA_MODE)
    acc, l_i, m1, tied, shift = _fwd_tiles(
        acc, l_i, m1, tied, shift, q, *args, full_lo, full_hi, *consts, False, HAS_WL, HAS_WR,
        HAS_SOFTCAP, HAS_DROPOUT, HAS_KPM, STABILIZE, SHIFT_SINGLE, DOT_FP32, EVEN_D, BLOCK_N,
        TMA_MODE)
    acc, l_i, m1, tied, shift = _fwd_tiles(
        acc, l_i, m1, tied, shift, q, *args, full_hi, hi, *consts, True, HAS_WL, HAS_WR,
        HAS_SOFTCAP, HAS_DROPOUT, HAS_KPM, STABILIZE, SHIFT_SINGLE, DOT_FP32, EVEN_D, BLOCK_N,
        TMA_MODE)

    has_keys = l_i > 0.0
    l_safe = tl.where(has_keys, l_i, 1.0)
    if HAS_SINKS:  # the head's sink joins the denominator (hf_stable_attn.sinks)
        scale, lse = sink_fold(l_safe, shift, tl.load(SINKS + h).to(tl.float32) * LOG2E_C)
        out = tl.where(has_keys[:, None], acc * scale[:, None], 0.0)
    else:
        out = tl.where(has_keys[:, None], acc / l_safe[:, None], 0.0)
        lse = shift * LN2_C + tl.log(l_safe)
    o_ptrs = (O + b64 * stride_ob + h * stride_oh
              + (q_start + offs_m).to(tl.int64)[:, None] * stride_os + offs_d[None, :])
    row_ok = offs_m < seqlen_q
    tl.store(o_ptrs, rounded(out, O.dtype.element_ty), mask=row_ok[:, None] & d_ok[None, :])
    lse = tl.where(has_keys, lse, float("inf"))
    l_off = b64 * stride_lb + h * stride_lh + q_start + offs_m
    tl.store(LSE + l_off, lse, mask=row_ok)
    if RETURN_SHIFT:
        tl.store(SHIFT + l_off, tl.where(has_keys, shift * LN2_C, float("inf")), mask=row_ok)


# (BLOCK_M, BLOCK_N, num_warps, num_stages[, use TMA[, register cap]]) tried per padded head
# dim; the first entry is the one launched without autotuning. Chosen from
# benchmarks/tune_kernel.py sweeps on an H200 (docs/kernel_notes.md, v5 and v6) and an H100 (v10:
# D128's 8-warp TMA entry, the best without a causal mask). Head dims 16 and 32: one table sweep
# at S 2048 (B 8, 32 heads, causal and not; H200, session 58), where (64, 64, 4, 3) led or came
# within 9% and the former first entry, (128, 64, 8, 3), ran 8-21% behind the best and was
# dropped; their capped entries (no spills on sm_90a, one more program per SM) led there by 1-4%
# with the fix, except D16 causal (2% behind), and in 8 of 12 forward cases timed at S 1024 and
# 4096 by 0.6-3.6%.
# 2-stage TMA entries run only where the ptxas that builds them is CUDA 13's or newer (Triton
# 3.6's own crashes on them; _ptxas.py): D64's (64, 64, 4, 2, TMA), the best causal D64 forward
# on the H100 (kernel_notes.md v10, v15), and D256's (128, 64, 8, 2, TMA): no spills where the
# pointer entry spills, 1-10% faster on the H200 at 4096 rows but for causal MQA (kernel_notes.md,
# session 43). D64's two capped entries fit one more program per SM without spills on sm_90a (96
# registers: 5 instead of 4; 128: 4 instead of 3); with the fix they ran the forward 2-3% (S
# 2048, causal) and 4-7% (S 1024, causal) faster than the same tiles uncapped on an H200
# (kernel_notes.md, session 57). D64's (64, 128, 4, 2, TMA): timed in the forward + backward
# back to back (the card at its power limit, as in training) over the whole grid at D64 causal
# MHA, the best at S 4096 (1.4-1.6% ahead of the Gluon launch and of the tuner's earlier picks)
# and level at 2048 (session 74, two H200s). Since v99a (session 99) that S 4096 shape takes the
# Gluon forward; the entry stays among the tuner's candidates for the calls the Triton forward
# keeps (shorter, packed, padded or windowed ones).
_FWD_CONFIGS = {
    16: [(64, 64, 4, 3), (128, 64, 4, 3), (64, 128, 4, 3), (64, 64, 4, 3, False, 96),
         (128, 64, 4, 3, False, 168)],
    32: [(64, 64, 4, 3), (64, 128, 4, 3), (128, 64, 4, 3), (64, 64, 4, 3, False, 96),
         (64, 128, 4, 3, False, 168)],
    64: [(64, 128, 4, 3, True), (128, 64, 8, 3), (64, 128, 4, 3), (64, 64, 4, 3),
         (64, 64, 4, 3, True), (128, 128, 4, 3, True), (64, 64, 4, 2, True),
         (64, 64, 4, 2, True, 96), (64, 64, 4, 3, False, 128), (64, 128, 4, 2, True)],
    128: [(64, 64, 4, 3, True), (128, 128, 8, 3, True), (128, 128, 8, 3), (128, 128, 8, 2),
          (128, 64, 8, 3), (64, 64, 4, 2)],
    256: [(128, 64, 8, 2), (128, 32, 8, 3), (64, 64, 4, 3), (64, 32, 4, 2), (128, 64, 8, 2, True)],
}
_fwd_launch = TiledLaunch(_fwd_kernel, _FWD_CONFIGS,
                          descriptors={"K": "BLOCK_N", "V": "BLOCK_N"})


def flash_attn_fwd(q, k, v, *, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                   softmax_scale, causal, window_left, window_right, softcap, dropout_p, seed,
                   stabilize, beta, tie_window, min_gap, max_gap, shift_single=False,
                   return_shift=False, key_padding_mask=None, sinks=None):
    """Stabilized attention forward.

    Args:
        q: (B, Sq, Hq, D) or packed (Tq, Hq, D); k, v: (B, Sk, Hk, D) or (Tk, Hk, D); bf16/fp16.
        cu_seqlens_q/k: int32 (N + 1,) for the packed layout, None for dense.
        max_seqlen_q/k: longest sequence (dense: Sq/Sk); also the dropout counter's strides.
        softmax_scale: float; causal: bool (sets window_right = 0); window_left/right: -1 unbounded.
        softcap: 0 off; dropout_p in [0, 1); seed: int.
        key_padding_mask: dense layout only, bool or uint8 (B, Sk), nonzero = attend; keys where
            it is 0 are never attended (rows that see no key give 0 and lse +inf).
        stabilize, beta, tie_window, min_gap, max_gap, shift_single: the shift rule's constants
            in natural-log units (``shift_rule.ShiftParams``).
        sinks: None, or attention sinks (Hq,), any float dtype: one logit per query head that
            joins every row's denominator (``hf_stable_attn.sinks``), folded in before the
            output is rounded.
    Returns:
        out like q; lse fp32 (B, Hq, Sq) or (Hq, Tq), the sinks' included; with
        ``return_shift`` also the per-row final shift (natural-log units, lse's layout, +inf on
        rows that see no key).

    Dense calls without a mask, sinks or shift outputs launch the plan of their first call with
    the same signature (``_prepared``), if it took this module's kernel.
    """
    signature = None
    if (_prepared.active() and cu_seqlens_q is None and key_padding_mask is None
            and sinks is None and not shift_single and not return_shift
            and q.stride(-1) == k.stride(-1) == v.stride(-1) == 1):
        signature = ("fwd", *_prepared.layout(q, k, v), q.device, softmax_scale, causal,
                     window_left, window_right, softcap, dropout_p, _prepared.seed_width(seed),
                     stabilize, beta, tie_window, min_gap, max_gap)
        plan = _prepared.lookup(signature)
        if plan is not None:
            return plan(q, k, v, seed)
    varlen = cu_seqlens_q is not None
    q, k, v = (last_dim_contiguous(t) for t in (q, k, v))
    if sinks is not None:
        sinks = sinks.contiguous()  # the kernels read sinks[h] at SINKS + h
    head_dim = q.shape[-1]
    if head_dim > 256:
        raise ValueError(f"head_dim {head_dim} > 256 is not supported")
    if not softmax_scale > 0:
        raise ValueError(f"softmax_scale must be > 0, got {softmax_scale}")
    if q.dtype not in (torch.bfloat16, torch.float16):
        raise TypeError(f"q/k/v must be bfloat16 or float16, got {q.dtype}")
    hq, hk = q.shape[-2], k.shape[-2]
    if hq % hk:
        raise ValueError(f"query heads {hq} must be a multiple of key/value heads {hk}")
    if causal:
        window_right = 0
    has_softcap = softcap is not None and softcap > 0
    if varlen:
        batch = cu_seqlens_q.numel() - 1
        sq, sk = int(max_seqlen_q), int(max_seqlen_k)
    else:
        batch, sq, sk = q.shape[0], q.shape[1], k.shape[1]
        max_seqlen_q, max_seqlen_k = sq, sk
    check_grid(batch, hq)
    windowed = window_left >= 0 or window_right >= 0
    tma_ok = tma_ready(max(sq, sk), k, v, windowed=windowed)
    if flash_fwd_hopper is not None and flash_fwd_hopper.covers(
            q, heads_kv=hk, stabilize=stabilize, varlen=varlen, causal=causal,
            window_left=window_left, window_right=window_right, has_softcap=has_softcap,
            dropout_p=dropout_p,
            key_padding_mask=key_padding_mask, shift_single=shift_single,
            return_shift=return_shift, tma_ok=tma_ok) and tma_ready(
                max(sq, sk), q, windowed=windowed):
        with on_device_of(q):
            out, lse = flash_fwd_hopper.flash_attn_fwd_hopper(
                q, k, v, softmax_scale=softmax_scale, causal=causal, stabilize=stabilize,
                beta=beta, tie_window=tie_window, min_gap=min_gap, max_gap=max_gap, sinks=sinks)
        _fwd_launch.last = flash_fwd_hopper.tile_record(head_dim)
        return out, lse
    if varlen:
        lse = torch.empty((hq, q.shape[0]), device=q.device, dtype=torch.float32)
    else:
        lse = torch.empty((batch, hq, sq), device=q.device, dtype=torch.float32)
    out = torch.empty_like(q)
    shift_out = torch.empty_like(lse) if return_shift else lse
    qk_scale = softmax_scale if has_softcap else softmax_scale * LOG2E
    bd = block_d(head_dim)
    cu_q = cu_seqlens_q if varlen else lse  # unused pointer in the dense layout
    cu_k = cu_seqlens_k if varlen else lse
    kpm, stride_kpm, has_kpm = key_mask_args(key_padding_mask, batch, sk, varlen, lse)
    tensors = (q, k, v, out, lse, shift_out, lse if sinks is None else sinks, cu_q, cu_k, kpm)
    before_seed = (
        *tensors,
        *seq_layout(q, varlen), *seq_layout(k, varlen), *seq_layout(v, varlen),
        *seq_layout(out, varlen), *lse_layout(lse, varlen), stride_kpm,
        sq, sk, int(max_seqlen_q), int(max_seqlen_k),
        hq, hq // hk, head_dim,
        float(qk_scale), float(softcap or 0.0), int(window_left), int(window_right),
        float(dropout_p), 1.0 / (1.0 - dropout_p),
    )
    args = (
        *before_seed, int(seed),
        float(beta), float(tie_window * LOG2E), float(min_gap * LOG2E), float(max_gap * LOG2E),
    )
    flags = dict(
        IS_VARLEN=varlen, HAS_WL=window_left >= 0, HAS_WR=window_right >= 0,
        HAS_SOFTCAP=has_softcap, HAS_DROPOUT=dropout_p > 0.0, HAS_KPM=has_kpm,
        STABILIZE=bool(stabilize),
        SHIFT_SINGLE=bool(shift_single), RETURN_SHIFT=bool(return_shift),
        HAS_SINKS=sinks is not None, DOT_FP32=INTERPRET, EVEN_D=bd == head_dim, BLOCK_D=bd,
        GROUP_PROGRAMS=_common.FWD_GROUP_PROGRAMS,
    )

    def grid(meta):
        return (ceil_div(int(max_seqlen_q), meta["BLOCK_M"]), batch * hq)

    key = (seq_bucket(max_seqlen_q), head_dim, hq // hk, q.dtype, tma_ok, *flags.values())
    compiled = _fwd_launch(grid, bd, key, args, flags, tma_ok)
    if signature is not None:
        launch = _prepared.prepare(_fwd_launch, compiled, grid, args, flags, len(tensors),
                                   len(before_seed))
        if launch is not None:
            _prepared.keep(signature, _ForwardPlan(launch, lse.shape))
    if return_shift:
        return out, lse, shift_out
    return out, lse


class _ForwardPlan:
    """``flash_attn_fwd``'s plan for one signature: ``plan(q, k, v, seed) -> (out, lse)``."""

    __slots__ = ("launch", "lse_shape")

    def __init__(self, launch: _prepared.Prepared, lse_shape: torch.Size):
        self.launch, self.lse_shape = launch, lse_shape

    def __call__(self, q, k, v, seed):
        lse = torch.empty(self.lse_shape, device=q.device, dtype=torch.float32)
        out = torch.empty_like(q)
        with on_device_of(q):  # unused pointers are lse, as in the full launch
            self.launch((q, k, v, out, lse, lse, lse, lse, lse, lse), int(seed))
        return out, lse

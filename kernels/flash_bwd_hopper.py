"""The backward's dK/dV and dQ kernels on Hopper (sm_90), written in Gluon with the forward's
warp specialization (``flash_fwd_hopper``), for the calls they cover; ``flash_bwd.flash_attn_bwd``
sends every other call to the Triton kernels (docs/kernel_notes.md, v20a, v20b). The dQ
kernel (below, v20b) is the forward's structure per 128-row query tile: Q and dO halves loaded
once, K and V through a ring, each consumer computing ``delta``, ``S``, ``dP``, ``dS`` and
``dQ += dS K`` for its 64 rows.

The dK/dV kernel:

Per 128-key tile (and KV head, and share of its query heads), three partitions: a 1-warp
loader issues the TMA copies (the two 64-key halves of K and V once, then Q and dO tile by tile
into a ring of ``STAGES`` slots, with their rows' ``lse`` and ``delta``: v96a, session 96,
which cut the spills and the address arithmetic of loading them a step: the kernel 1.08-1.38x
as fast), and two 4-warp consumers each own 64 keys. A consumer's step
issues ``K Q^T`` and ``V dO^T`` as asynchronous wgmma, builds ``P^T`` from the scores and the
forward's log-sum-exp (so the backward is the same with or without the fix), issues
``dV += P^T dO`` while ``dP^T`` finishes, then ``dK += dS^T Q``, and releases the slot to the
loader through "empty" mbarriers (two arrivals, one per consumer). The consumers share no
barrier, so one's elementwise work runs during the other's matrix products.

Covers: dense ``(B, S, H, D)`` bf16/fp16, head dim 64 or 128, causal (bottom-right aligned) or
not, GQA (a program sums its share of the group's query heads, as the Triton kernel), where
``_common.tma_ready`` holds; ``routes`` takes the calls measured faster (dK/dV: 128, and 64
without a causal mask, with one from 2048 query rows with GQA and from 4096 with MHA; dQ:
128). Not: packed sequences, windows, softcap, dropout, padding masks.
Gluon does not run under the interpreter; the GPU suite tests these paths
(``tests/gpu/test_hopper_backward.py``). HF_STABLE_ATTN_GLUON=0 turns them off.
"""

from __future__ import annotations

from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (
    mbarrier, warpgroup_mma, warpgroup_mma_wait,
)

from ._common import (
    COMPILE_OPTIONS, LOG2E, ceil_div, launch_compiled,
)
from ._hopper_ring import (
    HEAD_GROUP, columns_at_most, flag_barriers, heaviest_first, host_descriptor, key_tiles,
    load_rows, load_slot, query_tile, release_slot, ring_barriers, vector_descriptor, vector_rows,
)
from . import flash_fwd_hopper

LOG2E_C = gl.constexpr(LOG2E)
BLOCK_N = 128  # keys per program: 64 per consumer


@gluon.jit
def _loader(k_desc, v_desc, q_desc, do_desc, lse_desc, delta_desc, dk_base, dv_base, k_smem,
            v_smem, q_smem, do_smem, lse_smem, delta_smem, kv_bars, q_full, q_empty, do_full,
            do_empty, heads, b, hk, h0, stride_dks, stride_dvs, start_n, seqlen_q, seqlen_k, lo,
            qk_scale, softmax_scale):
    """The load partition: each consumer's half of K and V (batch entry ``b``, KV head
    ``hk``), then for each query head of the program (``h0`` onwards), the Q and dO tiles from
    row ``lo`` on with their rows' lse and delta, each slot once both consumers released it."""
    TILE_M: gl.constexpr = q_smem.shape[1]
    for wg in gl.static_range(2):
        mbarrier.expect(kv_bars.index(wg), 2 * k_desc.block_type.nbytes)
        load_rows(k_desc, b, start_n + wg * 64, hk, kv_bars.index(wg), k_smem.index(wg))
        load_rows(v_desc, b, start_n + wg * 64, hk, kv_bars.index(wg), v_smem.index(wg))
    t = 0
    for g in range(heads):
        for m in range(lo, seqlen_q, TILE_M):
            load_slot(t, b, m, h0 + g, q_desc, do_desc, q_smem, do_smem, q_full, q_empty,
                      do_full, do_empty, lse_desc, delta_desc, lse_smem, delta_smem)
            t += 1


@gluon.jit
def _step(t, m, dk, dv, k, v, q_smem, do_smem, lse_smem, delta_smem, q_full, q_empty, do_full,
          do_empty, n0, diag, qk_scale, zero_s, s_layout: gl.constexpr, op_layout: gl.constexpr,
          CAUSAL: gl.constexpr):
    """One query tile (rows ``m`` onwards) against this consumer's 64 keys, in the transposed
    orientation (scores (keys, queries)): returns the updated ``(dk, dv)`` accumulators. With
    CAUSAL (the tiles the diagonal cuts), key ``n`` counts for query row ``r`` where
    ``n <= r + diag``. Rows past the end arrive as zeros (Q, dO, lse, delta), so their
    ``P^T`` is 1 against zero dO and ``dS^T`` 0: no mask."""
    STAGES: gl.constexpr = q_smem.shape[0]
    TILE_M: gl.constexpr = q_smem.shape[1]
    slot = t % STAGES
    phase = (t // STAGES) & 1
    q = q_smem.index(slot)
    do = do_smem.index(slot)
    col_layout: gl.constexpr = gl.SliceLayout(0, s_layout)
    mbarrier.wait(q_full.index(slot), phase)
    # The log-sum-exp in score units (lse log2(e) / qk_scale).
    lse_s = lse_smem.index(slot).load(col_layout) * (LOG2E_C / qk_scale)
    # S^T - lse and dP^T - delta each in one product: the accumulators start at -lse and
    # -delta, so neither vector stays live across the step (at 128-row tiles each held 32
    # registers a thread, which spilled).
    s_tok = warpgroup_mma(k, q.permute((1, 0)), zero_s - gl.expand_dims(lse_s, 0),
                          is_async=True)
    mbarrier.wait(do_full.index(slot), phase)
    delta = delta_smem.index(slot).load(col_layout)
    dp_tok = warpgroup_mma(v, do.permute((1, 0)), zero_s - gl.expand_dims(delta, 0),
                           is_async=True)
    s_t = warpgroup_mma_wait(1, deps=(s_tok,))
    p_t = gl.exp2(s_t * qk_scale)
    if CAUSAL:
        keys = n0 + gl.arange(0, 64, layout=gl.SliceLayout(1, s_layout))
        cols = m + gl.arange(0, TILE_M, layout=col_layout)
        p_t = gl.where(gl.expand_dims(keys, 1) <= gl.expand_dims(cols + diag, 0), p_t, 0.0)
    dtype: gl.constexpr = q_smem.dtype
    dv_tok = warpgroup_mma(gl.convert_layout(p_t.to(dtype), op_layout), do, dv, is_async=True)
    dp_t = warpgroup_mma_wait(1, deps=(dp_tok,))
    ds_t = p_t * dp_t
    dk_tok = warpgroup_mma(gl.convert_layout(ds_t.to(dtype), op_layout), q, dk, is_async=True)
    dv, dk = warpgroup_mma_wait(0, deps=(dv_tok, dk_tok))
    mbarrier.arrive(q_empty.index(slot), count=1)
    mbarrier.arrive(do_empty.index(slot), count=1)
    return dk, dv


@gluon.jit
def _consume(WG: gl.constexpr, k_desc, v_desc, q_desc, do_desc, lse_desc, delta_desc, dk_base,
             dv_base, k_smem, v_smem, q_smem, do_smem, lse_smem, delta_smem, kv_bars, q_full,
             q_empty, do_full, do_empty, heads, b, hk, h0, stride_dks, stride_dvs, start_n,
             seqlen_q, seqlen_k, lo, qk_scale, softmax_scale):
    """One consumer partition (4 warps): keys ``start_n + 64 WG`` onwards. (The compile-time
    sizes come from the buffers' shapes and CAUSAL from ``kv_bars``' length, 2 + 2 CAUSAL:
    warp_specialize passes its arguments as run-time values.)"""
    STAGES: gl.constexpr = q_smem.shape[0]
    TILE_M: gl.constexpr = q_smem.shape[1]
    HEAD_DIM: gl.constexpr = q_smem.shape[2]
    CAUSAL: gl.constexpr = kv_bars.shape[0] == 4
    s_layout: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, TILE_M, 16])
    kv_layout: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, HEAD_DIM, 16])
    op_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=kv_layout, k_width=2)
    n0 = start_n + WG * 64
    diag = seqlen_k - seqlen_q
    # Query rows from the loader's ``lo``: [lo, mine) only the other consumer's keys see
    # (released unread), [mine, full_lo) cut by the diagonal, [full_lo, seqlen_q) see all 64
    # keys (rows past the end: no mask needed, ``_step``).
    mine = lo
    full_lo = lo
    if CAUSAL:
        mine = gl.minimum((gl.maximum(n0 - diag, 0) // TILE_M) * TILE_M, seqlen_q)
        full_lo = gl.cdiv(gl.maximum(n0 + 63 - diag, 0), TILE_M) * TILE_M
    k = k_smem.index(WG)
    v = v_smem.index(WG)
    zero_s = gl.zeros([64, TILE_M], gl.float32, layout=s_layout)
    dk = gl.zeros([64, HEAD_DIM], gl.float32, layout=kv_layout)
    dv = gl.zeros([64, HEAD_DIM], gl.float32, layout=kv_layout)
    consts = (k, v, q_smem, do_smem, lse_smem, delta_smem, q_full, q_empty, do_full, do_empty)
    mbarrier.wait(kv_bars.index(WG), 0)
    t = 0
    for g in range(heads):
        for m in range(lo, mine, TILE_M):  # released unread
            release_slot(t, STAGES, q_full, q_empty, do_full, do_empty)
            t += 1
        if CAUSAL:  # the tiles cut by the diagonal, masked
            for m in range(mine, gl.minimum(full_lo, seqlen_q), TILE_M):
                dk, dv = _step(t, m, dk, dv, *consts, n0, diag, qk_scale, zero_s, s_layout,
                               op_layout, True)
                t += 1
        for m in range(full_lo, seqlen_q, TILE_M):  # every key visible: no mask
            dk, dv = _step(t, m, dk, dv, *consts, n0, diag, qk_scale, zero_s, s_layout,
                           op_layout, False)
            t += 1

    rows = n0 + gl.arange(0, 64, layout=gl.SliceLayout(1, kv_layout))
    cols = gl.arange(0, HEAD_DIM, layout=gl.SliceLayout(0, kv_layout))
    ok = gl.expand_dims(rows < seqlen_k, 1) & gl.expand_dims(cols < HEAD_DIM, 0)
    rows64 = gl.expand_dims(rows.to(gl.int64), 1)
    gl.store(dk_base + rows64 * stride_dks + gl.expand_dims(cols, 0),
             (dk * softmax_scale).to(dk_base.dtype.element_ty), mask=ok)
    gl.store(dv_base + rows64 * stride_dvs + gl.expand_dims(cols, 0),
             dv.to(dv_base.dtype.element_ty), mask=ok)


@gluon.jit
def _consumer0(k_desc, v_desc, q_desc, do_desc, lse_desc, delta_desc, dk_base, dv_base, k_smem,
               v_smem, q_smem, do_smem, lse_smem, delta_smem, kv_bars, q_full, q_empty, do_full,
               do_empty, heads, b, hk, h0, stride_dks, stride_dvs, start_n, seqlen_q, seqlen_k,
               lo, qk_scale, softmax_scale):
    _consume(0, k_desc, v_desc, q_desc, do_desc, lse_desc, delta_desc, dk_base, dv_base, k_smem,
             v_smem, q_smem, do_smem, lse_smem, delta_smem, kv_bars, q_full, q_empty, do_full,
             do_empty, heads, b, hk, h0, stride_dks, stride_dvs, start_n, seqlen_q, seqlen_k,
             lo, qk_scale, softmax_scale)


@gluon.jit
def _consumer1(k_desc, v_desc, q_desc, do_desc, lse_desc, delta_desc, dk_base, dv_base, k_smem,
               v_smem, q_smem, do_smem, lse_smem, delta_smem, kv_bars, q_full, q_empty, do_full,
               do_empty, heads, b, hk, h0, stride_dks, stride_dvs, start_n, seqlen_q, seqlen_k,
               lo, qk_scale, softmax_scale):
    _consume(1, k_desc, v_desc, q_desc, do_desc, lse_desc, delta_desc, dk_base, dv_base, k_smem,
             v_smem, q_smem, do_smem, lse_smem, delta_smem, kv_bars, q_full, q_empty, do_full,
             do_empty, heads, b, hk, h0, stride_dks, stride_dvs, start_n, seqlen_q, seqlen_k,
             lo, qk_scale, softmax_scale)


@gluon.jit
def _dkdv_ws_kernel(
    Q, K, V, DO, LSE, DELTA, DK, DV,
    stride_dkb, stride_dks, stride_dkh,
    stride_dvb, stride_dvs, stride_dvh,
    stride_split_dk, stride_split_dv,
    seqlen_q, seqlen_k, num_heads_k, group, splits,
    qk_scale, softmax_scale,
    CAUSAL: gl.constexpr, HEAD_DIM: gl.constexpr, STAGES: gl.constexpr, TILE_M: gl.constexpr,
    CONSUMER_REGS: gl.constexpr, GROUP_PROGRAMS: gl.constexpr, num_warps: gl.constexpr,
):
    """Grid (128-key tiles, B * Hk * splits). ``Q``, ``K``, ``V``, ``DO``: ``host_descriptor``s
    of the (B, S, H, D) tensors, boxes of ``TILE_M`` query rows and 64 keys; ``LSE``, ``DELTA``:
    ``vector_descriptor``s of the (B, Hq, Sq) fp32 vectors, boxes of ``TILE_M``. Causal grids with
    ``GROUP_PROGRAMS`` > 0 run in ``heaviest_first``'s groups of ``max(GROUP_PROGRAMS // key
    tiles, HEAD_GROUP)`` columns, each group's first (heaviest) key tiles first; otherwise in the
    grid's order, each column's first key tile first."""
    dtype: gl.constexpr = Q.dtype
    tile_shared: gl.constexpr = gl.NVMMASharedLayout.get_default_for([64, HEAD_DIM], dtype)
    q_shared: gl.constexpr = gl.NVMMASharedLayout.get_default_for([TILE_M, HEAD_DIM], dtype)
    tile = gl.program_id(0)
    column = gl.program_id(1)
    if CAUSAL and GROUP_PROGRAMS > 0:  # key tiles reversed: a causal mask's first are heaviest
        num_tiles = gl.num_programs(0)
        tile, column = heaviest_first(tile, column,
                                      gl.maximum(GROUP_PROGRAMS // num_tiles, HEAD_GROUP))
        tile = num_tiles - 1 - tile
    start_n = tile * 128
    split = column % splits  # this program's share of the group's query heads
    bh = column // splits
    b = bh // num_heads_k
    b64 = b.to(gl.int64)
    hk = bh % num_heads_k
    heads = group // splits
    h0 = hk * group + split * heads
    dk_base = DK + split * stride_split_dk + b64 * stride_dkb + hk * stride_dkh
    dv_base = DV + split * stride_split_dv + b64 * stride_dvb + hk * stride_dvh
    lo = 0
    if CAUSAL:  # the first query row that sees key start_n, down to a tile edge
        lo = gl.minimum((gl.maximum(start_n - (seqlen_k - seqlen_q), 0) // TILE_M) * TILE_M,
                        seqlen_q)

    k_smem = gl.allocate_shared_memory(dtype, [2, 64, HEAD_DIM], tile_shared)
    v_smem = gl.allocate_shared_memory(dtype, [2, 64, HEAD_DIM], tile_shared)
    q_smem = gl.allocate_shared_memory(dtype, [STAGES, TILE_M, HEAD_DIM], q_shared)
    do_smem = gl.allocate_shared_memory(dtype, [STAGES, TILE_M, HEAD_DIM], q_shared)
    vec_shared: gl.constexpr = gl.NVMMASharedLayout(swizzle_byte_width=0, element_bitwidth=32,
                                                    rank=1)
    lse_smem = gl.allocate_shared_memory(gl.float32, [STAGES, TILE_M], vec_shared)
    delta_smem = gl.allocate_shared_memory(gl.float32, [STAGES, TILE_M], vec_shared)
    # The partitions read CAUSAL from kv_bars' length (2 + 2 CAUSAL): warp_specialize passes
    # its arguments as run-time values.
    N_KV_BARS: gl.constexpr = 4 if CAUSAL else 2
    kv_bars = flag_barriers(N_KV_BARS)
    q_full, q_empty, do_full, do_empty = ring_barriers(STAGES)

    args = (K, V, Q, DO, LSE, DELTA, dk_base, dv_base, k_smem, v_smem, q_smem, do_smem,
            lse_smem, delta_smem, kv_bars, q_full, q_empty, do_full, do_empty, heads, b, hk, h0,
            stride_dks, stride_dvs, start_n, seqlen_q, seqlen_k, lo, qk_scale, softmax_scale)
    gl.warp_specialize([(_consumer0, args), (_consumer1, args), (_loader, args)], [4, 1],
                       [CONSUMER_REGS, 24])


# (STAGES, consumer registers, query rows per step) per head dim; 128-key tiles (two
# consumers). Measured on an H100 (docs/kernel_notes.md, v20c): at 64, 128-row query tiles beat
# 64-row ones by 11% not causal; 2 and 3 stages came within the runs' order bias of each other
# at both head dims (the config timed first measured 2-6% slower in both runs), so 2.
HOPPER_CONFIGS = {64: (2, 240, 128), 128: (2, 240, 64)}

# Programs a causal launch groups (``_dkdv_ws_kernel``; 0: the grid's order): at 128 groups of 8
# columns from 2048 rows. Session 72 (one H200, Triton 3.6, ``gpu/head_group_check.py``, forward
# + backward back to back) against the grid's order: D64 MHA +0.6% at S 4096, level at 8192; D64
# GQA 8:1 S 8192 +1.4%; D128 MHA +0.9% at S 2048, level at 4096; D128 GQA 8:1 S 4096 +1.7%.
# 512 programs ran +0.03% to -1.4% against 128, 1024 programs 0.3-3.2% slower than the grid's
# order.
GROUP_PROGRAMS = 128


# Least query rows per (head dim, causal, grouped: more query heads than KV heads) from which this
# kernel measured faster than the Triton dK/dV (the whole backward, S 4096 unless named): 128 both
# ways and 64 not causal from any length (v20c, H100: D64 +12% MHA, +9% GQA 8:1); 64 causal from
# 2048 rows under Triton 3.6 (session 32, H200, once the mask left the tiles below the diagonal: +3%
# at 4096, +5% at 8192, -3% at 2048; session 59, two H200s, after the host descriptors and
# ``launch_compiled``: at 2048 +1.6% and +1.1% with GQA 8:1, +1.2% and -0.5% with MHA in two calls,
# at 4096 +2.9% and +6.7%). Under 3.6 from 4096 rows since the Triton dK/dV reads ``lse`` and
# ``delta`` through descriptors (``flash_bwd.vector_tma_ok``; session 63, two H200s, D64 causal: at
# 2048 it leads by 3.5% with MHA and 7.8% with GQA 8:1, at 4096 it is level, -0.6% and +0.3%), and
# with GQA from 8192 (session 67, two H200s of one host, timed in the forward + backward a training
# step runs, ``gpu/route_check.py --whole-step``: at S 4096 GQA 8:1 the Triton dK/dV led by 1.4-2.0%
# in four samples, back to back and with ``do_bench``; MHA level, -1.0% to +0.4%; other GQA ratios
# not measured), and again with GQA from 2048 since this kernel reads ``lse`` and ``delta`` through
# descriptors too (v96a, session 96, one H200, ``--whole-step``: GQA 8:1 +2.1% at 2048, +7.4% at
# 4096; MHA -0.5% at 2048, +4.3% at 4096). Under Triton 3.9 (ptxas 13.4) the same table since v96a
# (session 97, one H200, ``--whole-step``, MHA: -1.2% at 2048, +2.4% at 4096, +3.7% at 8192; before
# v96a, which took the 145 ``LDL`` ptxas 13.4 put in this kernel's D64 causal build, the Triton
# dK/dV led MHA there by 11%, 4% and 0.6% and trailed with GQA 8:1 by 3.4-4.2%, session 62). Fewer
# causal query rows keep the Triton dK/dV (below ``TMA_MIN_SEQLEN`` keys they load through pointers,
# which this kernel does not cover).
# Causal 64 with GQA returned other bits on some repeated calls until the loader waited for the last
# head's copies before writing its descriptors (v30a, session 30: gpu/dkdv_determinism.py, 0 of 390
# calls against 7 of 390 before; since session 55 the descriptors are the host's and nothing is
# rewritten); a new route must pass that script first.
FASTER = {(128, False, False): 0, (128, False, True): 0, (128, True, False): 0,
          (128, True, True): 0, (64, False, False): 0, (64, False, True): 0,
          (64, True, False): 4096, (64, True, True): 2048}
# The group split (``flash_bwd.group_splits``) of this kernel, which runs one program per SM:
# programs per SM to reach without and with a causal mask, and at most this many splits.
# Without a mask one wave suffices (equal programs; a split only adds fp32 partial sums); with
# one the first key tiles' programs, which see every query, need sharing, but 8 splits measured
# slower than 4 (H100, GQA 8:1, 1/2/4/8 splits at 2048 and 4096 tokens: session 18's
# gpu/route_check.py, docs/kernel_notes.md).
PROGRAMS_PER_SM = {False: 1, True: 8}
MOST_SPLITS = 4


def routes(q, k, **features) -> tuple[bool, bool]:
    """Whether ``flash_bwd.flash_attn_bwd``'s dQ and its dK/dV go to this module's kernels: calls
    they cover (see the module docstring; ``features`` are
    ``flash_fwd_hopper.plain_dense_sm90``'s, ``tma_ok`` ``_common.tma_ready`` of the backward's
    tensors) and measured faster on (``DQ_FASTER``: head dim and causal mask; ``FASTER``: the
    same and whether ``q`` (B, Sq, Hq, D) has more heads than ``k`` (B, Sk, Hk, D), from its
    least query rows)."""
    if not flash_fwd_hopper.plain_dense_sm90(q, **features):
        return False, False
    head_dim, causal = q.shape[-1], bool(features["causal"])
    grouped = q.shape[-2] > k.shape[-2]
    return (head_dim, causal) in DQ_FASTER, dkdv_faster(head_dim, causal, grouped, q.shape[1])


def dkdv_faster(head_dim: int, causal: bool, grouped: bool, query_rows: int) -> bool:
    """Whether ``FASTER`` routes a covered call with these features to the Gluon dK/dV."""
    least = FASTER.get((head_dim, causal, grouped))
    return least is not None and query_rows >= least


def tile_record(head_dim: int) -> tuple[int, int, int, int, bool]:
    """The launch's config as ``TiledLaunch.last`` spells one (BLOCK_M, BLOCK_N, warps, stages,
    TMA): 12 warps (two consumer warpgroups and the loader's) mark this kernel."""
    stages, _, tile_m = HOPPER_CONFIGS[head_dim]
    return tile_m, BLOCK_N, 12, stages, True


def dkdv_hopper(q, k, v, dout, lse, delta, dk_out, dv_out, *, softmax_scale, causal,
                config=None):
    """dK and dV of dense q, dout (B, Sq, Hq, D), k, v (B, Sk, Hk, D) into ``dk_out``,
    ``dv_out`` (splits, B, Sk, Hk, D): split ``i`` sums its ``Hq / Hk / splits`` query heads of
    each group. ``lse`` the forward's, ``delta`` = rowsum(dO * O), both fp32 (B, Hq, Sq).
    ``config`` (STAGES, consumer registers, query rows per step) overrides the table."""
    batch, sq, hq, head_dim = q.shape
    sk, hk = k.shape[1], k.shape[2]
    splits = dk_out.shape[0]
    stages, regs, tile_m = config or HOPPER_CONFIGS[head_dim]
    grid = (ceil_div(sk, BLOCK_N), batch * hk * splits)
    launch_compiled(_dkdv_ws_kernel, grid, (
        host_descriptor(q, tile_m), host_descriptor(k, 64), host_descriptor(v, 64),
        host_descriptor(dout, tile_m), vector_descriptor(vector_rows(lse), tile_m),
        vector_descriptor(vector_rows(delta), tile_m), dk_out, dv_out,
        dk_out.stride(1), dk_out.stride(2), dk_out.stride(3),
        dv_out.stride(1), dv_out.stride(2), dv_out.stride(3),
        dk_out.stride(0), dv_out.stride(0),
        sq, sk, hk, hq // hk, splits,
        float(softmax_scale * LOG2E), float(softmax_scale),
    ), dict(CAUSAL=bool(causal), HEAD_DIM=head_dim, STAGES=stages, TILE_M=tile_m,
            CONSUMER_REGS=regs, GROUP_PROGRAMS=GROUP_PROGRAMS), num_warps=4, **COMPILE_OPTIONS)


# --- dQ (v20b): per 128-row query tile, the forward's partitions with the dQ step ---


@gluon.jit
def _dq_loader(q_desc, do_desc, k_desc, v_desc, q_smem, do_smem, k_smem, v_smem, q_bars,
               k_full, k_empty, v_full, v_empty, b, h, hk, O, DO, LSE, DELTA, DQ, stride_os,
               stride_ds, stride_dqs, start_m, seqlen_q, seqlen_k, n_tiles, diag, qk_scale,
               softmax_scale):
    """The load partition: each consumer's 64 rows of Q and dO, then K and V tile by tile into
    the ring, each slot once both consumers have released it."""
    TILE_N: gl.constexpr = k_smem.shape[1]
    for wg in gl.static_range(2):
        mbarrier.expect(q_bars.index(wg), 2 * q_desc.block_type.nbytes)
        load_rows(q_desc, b, start_m + wg * 64, h, q_bars.index(wg), q_smem.index(wg))
        load_rows(do_desc, b, start_m + wg * 64, h, q_bars.index(wg), do_smem.index(wg))
    for j in range(n_tiles):
        load_slot(j, b, j * TILE_N, hk, k_desc, v_desc, k_smem, v_smem, k_full, k_empty,
                  v_full, v_empty)


@gluon.jit
def _dq_step(j, dq, q, do, k_smem, v_smem, k_full, k_empty, v_full, v_empty, lse2, delta,
             rows, diag, qk_scale, zero_s, s_layout: gl.constexpr,
             op_layout: gl.constexpr, CAUSAL: gl.constexpr):
    """Key tile ``j`` against this consumer's 64 rows: returns the updated ``dq``. With
    CAUSAL (the tiles the diagonal cuts), key ``n`` counts for row ``r`` where
    ``n <= r + diag``."""
    STAGES: gl.constexpr = k_smem.shape[0]
    TILE_N: gl.constexpr = k_smem.shape[1]
    slot = j % STAGES
    phase = (j // STAGES) & 1
    k = k_smem.index(slot)
    v = v_smem.index(slot)
    mbarrier.wait(k_full.index(slot), phase)
    s_tok = warpgroup_mma(q, k.permute((1, 0)), zero_s, use_acc=False, is_async=True)
    mbarrier.wait(v_full.index(slot), phase)
    dp_tok = warpgroup_mma(do, v.permute((1, 0)), zero_s, use_acc=False, is_async=True)
    s = warpgroup_mma_wait(1, deps=(s_tok,))
    p = gl.exp2(s * qk_scale - gl.expand_dims(lse2, 1))
    if CAUSAL:  # key j TILE_N + c counts for row r where c <= r + diag - j TILE_N
        ok = columns_at_most(rows + diag - j * TILE_N, TILE_N, gl.SliceLayout(0, s_layout))
        p = gl.where(ok, p, 0.0)
    dp = warpgroup_mma_wait(0, deps=(dp_tok,))
    mbarrier.arrive(v_empty.index(slot), count=1)
    ds = p * (dp - gl.expand_dims(delta, 1))
    dq_tok = warpgroup_mma(gl.convert_layout(ds.to(q.dtype), op_layout), k, dq, is_async=True)
    dq = warpgroup_mma_wait(0, deps=(dq_tok,))
    mbarrier.arrive(k_empty.index(slot), count=1)
    return dq


@gluon.jit
def _dq_consume(WG: gl.constexpr, q_desc, do_desc, k_desc, v_desc, q_smem, do_smem, k_smem,
                v_smem, q_bars, k_full, k_empty, v_full, v_empty, b, h, hk, O, DO, LSE, DELTA,
                DQ, stride_os, stride_ds, stride_dqs, start_m, seqlen_q, seqlen_k, n_tiles,
                diag, qk_scale, softmax_scale):
    """One consumer partition (4 warps): query rows ``start_m + 64 WG`` onwards; ``O``, ``DO``,
    ``DQ`` point at this head's row 0, ``LSE`` and ``DELTA`` at its lse row. Stores
    ``delta = rowsum(dO * O)`` (for the dK/dV kernel) and dQ. (CAUSAL from ``q_bars``' length,
    2 + 2 CAUSAL: warp_specialize passes its arguments as run-time values.)"""
    STAGES: gl.constexpr = k_smem.shape[0]
    TILE_N: gl.constexpr = k_smem.shape[1]
    HEAD_DIM: gl.constexpr = k_smem.shape[2]
    CAUSAL: gl.constexpr = q_bars.shape[0] == 4
    s_layout: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, TILE_N, 16])
    dq_layout: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, HEAD_DIM, 16])
    op_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=dq_layout, k_width=2)
    row_s: gl.constexpr = gl.SliceLayout(1, s_layout)
    rows0 = start_m + WG * 64

    # delta from O and dO in the dQ accumulator's layout (rows past the end read as 0)
    rows_o = rows0 + gl.arange(0, 64, layout=gl.SliceLayout(1, dq_layout))
    cols_o = gl.arange(0, HEAD_DIM, layout=gl.SliceLayout(0, dq_layout))
    ok_o = gl.expand_dims(rows_o < seqlen_q, 1) & gl.expand_dims(cols_o < HEAD_DIM, 0)
    rows64 = gl.expand_dims(rows_o.to(gl.int64), 1)
    o = gl.load(O + rows64 * stride_os + gl.expand_dims(cols_o, 0), mask=ok_o, other=0.0)
    do_r = gl.load(DO + rows64 * stride_ds + gl.expand_dims(cols_o, 0), mask=ok_o, other=0.0)
    delta_o = gl.sum(o.to(gl.float32) * do_r.to(gl.float32), 1)
    gl.store(DELTA + rows_o, delta_o, mask=rows_o < seqlen_q)
    delta = gl.convert_layout(delta_o, row_s)
    rows = rows0 + gl.arange(0, 64, layout=row_s)
    lse2 = gl.load(LSE + rows, mask=rows < seqlen_q, other=float("inf")) * LOG2E_C

    # This partition's key tiles (the loader's ``n_tiles`` is the second partition's, which
    # sees the most): [0, n_full) unmasked, [n_full, n_mine) cut by the diagonal.
    n_mine = n_tiles
    n_full = n_tiles
    if CAUSAL:
        hi = gl.maximum(gl.minimum(rows0 + 64 + diag, seqlen_k), 0)
        n_mine = gl.maximum(gl.cdiv(hi, TILE_N), 1)
        n_full = gl.minimum(gl.maximum(rows0 + diag + 1, 0) // TILE_N, n_mine)
    q = q_smem.index(WG)
    do = do_smem.index(WG)
    zero_s = gl.zeros([64, TILE_N], gl.float32, layout=s_layout)
    dq = gl.zeros([64, HEAD_DIM], gl.float32, layout=dq_layout)
    mbarrier.wait(q_bars.index(WG), 0)
    for j in range(n_full):  # every key visible: no mask
        dq = _dq_step(j, dq, q, do, k_smem, v_smem, k_full, k_empty, v_full, v_empty, lse2,
                      delta, rows, diag, qk_scale, zero_s, s_layout, op_layout, False)
    if CAUSAL:  # the tiles cut by the diagonal, masked
        for j in range(n_full, n_mine):
            dq = _dq_step(j, dq, q, do, k_smem, v_smem, k_full, k_empty, v_full, v_empty,
                          lse2, delta, rows, diag, qk_scale, zero_s, s_layout, op_layout, True)
    for j in range(n_mine, n_tiles):  # tiles only the other partition sees: release them
        release_slot(j, STAGES, k_full, k_empty, v_full, v_empty)
    gl.store(DQ + rows64 * stride_dqs + gl.expand_dims(cols_o, 0),
             (dq * softmax_scale).to(DQ.dtype.element_ty), mask=ok_o)


@gluon.jit
def _dq_consumer0(q_desc, do_desc, k_desc, v_desc, q_smem, do_smem, k_smem, v_smem, q_bars,
                  k_full, k_empty, v_full, v_empty, b, h, hk, O, DO, LSE, DELTA, DQ, stride_os,
                  stride_ds, stride_dqs, start_m, seqlen_q, seqlen_k, n_tiles, diag, qk_scale,
                  softmax_scale):
    _dq_consume(0, q_desc, do_desc, k_desc, v_desc, q_smem, do_smem, k_smem, v_smem, q_bars,
                k_full, k_empty, v_full, v_empty, b, h, hk, O, DO, LSE, DELTA, DQ, stride_os,
                stride_ds, stride_dqs, start_m, seqlen_q, seqlen_k, n_tiles, diag, qk_scale,
                softmax_scale)


@gluon.jit
def _dq_consumer1(q_desc, do_desc, k_desc, v_desc, q_smem, do_smem, k_smem, v_smem, q_bars,
                  k_full, k_empty, v_full, v_empty, b, h, hk, O, DO, LSE, DELTA, DQ, stride_os,
                  stride_ds, stride_dqs, start_m, seqlen_q, seqlen_k, n_tiles, diag, qk_scale,
                  softmax_scale):
    _dq_consume(1, q_desc, do_desc, k_desc, v_desc, q_smem, do_smem, k_smem, v_smem, q_bars,
                k_full, k_empty, v_full, v_empty, b, h, hk, O, DO, LSE, DELTA, DQ, stride_os,
                stride_ds, stride_dqs, start_m, seqlen_q, seqlen_k, n_tiles, diag, qk_scale,
                softmax_scale)


@gluon.jit
def _dq_ws_kernel(
    Q, K, V, DO_TILES, O, DO, LSE, DELTA, DQ,
    stride_ob, stride_os, stride_oh,
    stride_db, stride_ds, stride_dh,
    stride_dqb, stride_dqs, stride_dqh,
    stride_lb, stride_lh,
    seqlen_q, seqlen_k, num_heads_q, group,
    qk_scale, softmax_scale,
    CAUSAL: gl.constexpr, HEAD_DIM: gl.constexpr, BLOCK_N: gl.constexpr,
    STAGES: gl.constexpr, CONSUMER_REGS: gl.constexpr, num_warps: gl.constexpr,
):
    """Grid (128-row query tiles, B * Hq). ``Q``, ``K``, ``V``, ``DO_TILES``: ``host_descriptor``s
    of the (B, S, H, D) tensors, boxes of 64 query rows and ``BLOCK_N`` keys; ``O`` and ``DO``
    the pointers the consumers read ``delta``'s rows from."""
    dtype: gl.constexpr = Q.dtype
    q_shared: gl.constexpr = gl.NVMMASharedLayout.get_default_for([64, HEAD_DIM], dtype)
    kv_shared: gl.constexpr = gl.NVMMASharedLayout.get_default_for([BLOCK_N, HEAD_DIM], dtype)
    start_m, b64, h, hk = query_tile(num_heads_q, group, CAUSAL)
    diag = seqlen_k - seqlen_q
    n_tiles = key_tiles(start_m, diag, seqlen_k, BLOCK_N, CAUSAL)

    q_smem = gl.allocate_shared_memory(dtype, [2, 64, HEAD_DIM], q_shared)
    do_smem = gl.allocate_shared_memory(dtype, [2, 64, HEAD_DIM], q_shared)
    k_smem = gl.allocate_shared_memory(dtype, [STAGES, BLOCK_N, HEAD_DIM], kv_shared)
    v_smem = gl.allocate_shared_memory(dtype, [STAGES, BLOCK_N, HEAD_DIM], kv_shared)
    N_QBARS: gl.constexpr = 4 if CAUSAL else 2
    q_bars = flag_barriers(N_QBARS)
    k_full, k_empty, v_full, v_empty = ring_barriers(STAGES)

    row_base = b64 * stride_lb + h * stride_lh
    args = (Q, DO_TILES, K, V, q_smem, do_smem, k_smem, v_smem, q_bars, k_full, k_empty, v_full,
            v_empty, b64.to(gl.int32), h, hk, O + b64 * stride_ob + h * stride_oh,
            DO + b64 * stride_db + h * stride_dh, LSE + row_base, DELTA + row_base,
            DQ + b64 * stride_dqb + h * stride_dqh, stride_os, stride_ds, stride_dqs, start_m,
            seqlen_q, seqlen_k, n_tiles, diag, qk_scale, softmax_scale)
    gl.warp_specialize([(_dq_consumer0, args), (_dq_consumer1, args), (_dq_loader, args)],
                       [4, 1], [CONSUMER_REGS, 24])


# (BLOCK_N, STAGES, consumer registers) per head dim of the dQ kernel, and the (head dim,
# causal) where it measured faster than the Triton dQ (H100, S 4096, the whole backward with the
# Gluon dK/dV: v20b +8% not causal, +5% GQA 8:1, -1% to 0% causal at 128; v20c -2% to -5% at
# 64 not causal, where the dK/dV is Gluon).
DQ_CONFIGS = {64: (128, 2, 232), 128: (64, 3, 240)}
DQ_FASTER = {(128, False), (128, True)}


def dq_tile_record(head_dim: int) -> tuple[int, int, int, int, bool]:
    """The dQ launch's config as ``TiledLaunch.last`` spells one: 12 warps mark this kernel."""
    block_n, stages, _ = DQ_CONFIGS[head_dim]
    return 128, block_n, 12, stages, True


def dq_hopper(q, k, v, out, dout, lse, delta, dq, *, softmax_scale, causal, config=None):
    """dQ of dense q, out, dout (B, Sq, Hq, D), k, v (B, Sk, Hk, D) into ``dq`` (like q), and
    ``delta`` = rowsum(dO * O) into ``delta`` (fp32, like ``lse``, the forward's).
    ``config`` (BLOCK_N, STAGES, consumer registers) overrides the table."""
    batch, sq, hq, head_dim = q.shape
    sk, hk = k.shape[1], k.shape[2]
    block_n, stages, regs = config or DQ_CONFIGS[head_dim]
    grid = (ceil_div(sq, 128), batch * hq)
    launch_compiled(_dq_ws_kernel, grid, (
        host_descriptor(q, 64), host_descriptor(k, block_n), host_descriptor(v, block_n),
        host_descriptor(dout, 64), out, dout, lse, delta, dq,
        out.stride(0), out.stride(1), out.stride(2),
        dout.stride(0), dout.stride(1), dout.stride(2),
        dq.stride(0), dq.stride(1), dq.stride(2),
        lse.stride(0), lse.stride(1),
        sq, sk, hq, hq // hk,
        float(softmax_scale * LOG2E), float(softmax_scale),
    ), dict(CAUSAL=bool(causal), HEAD_DIM=head_dim, BLOCK_N=block_n, STAGES=stages,
            CONSUMER_REGS=regs), num_warps=4, **COMPILE_OPTIONS)

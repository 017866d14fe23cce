"""The stabilized forward on Hopper (sm_90), written in Gluon with FlashAttention-3's warp
specialization, for the calls it covers; ``flash_fwd.flash_attn_fwd`` sends every other call to
the Triton kernel (docs/kernel_notes.md, v19d).

Per query tile of 64 rows per consumer, a 1-warp loader issues the TMA copies (Q's parts, then K
and V tile by tile into a ring of ``STAGES`` slots), and ``CONSUMERS`` 4-warp consumers (two;
three at head dim 64, as FlashAttention-3's 192-row tiles there) each own 64 rows. A consumer's
step issues tile j's ``Q K^T`` and tile j-1's ``P V`` as asynchronous wgmma, waits for the
scores, runs tile j's softmax (the tie count and shift of ``flash_fwd._fwd_tiles``, the same
arithmetic) while ``P V`` runs, then releases the slots to the loader through "empty" mbarriers
(one arrival per consumer). The warp schedulers run one consumer's softmax during another's
matrix products, which a single partition (v19a) cannot; a third consumer gives each scheduler
one more warp to issue from while the others wait (the D64 softmax is long against its matrix
products). At D64 the consumers also take turns issuing their products (``_take_turn``,
FlashAttention-3's ping-pong), which measured up to 7% faster there and up to 3.6% slower at
D128 (docs/kernel_notes.md, session 26), except with the fix in tiles that stack 3 or more
heads (below; sessions 53-54). A launch has one program per query tile or
(``PERSISTENT_BELOW``) one per SM looping over tiles, the loader filling the next tile's ring
while the consumers finish one (session 33); a persistent causal launch's programs take their
next tile from an atomic counter, heaviest first (FlashAttention-3's scheduler, v52a). A
tile's 64-row parts are one head's consecutive rows, or (``stacked_heads``: D64, causal, GQA)
the same row block (or two adjacent ones) of the KV group's query heads, which share K/V and
see (nearly) the same key tiles, so no consumer waits long at a causal tile's end for another
that sees more keys (v41a).

Covers: dense ``(B, S, H, D)`` bf16/fp16, head dim 64 or 128, causal (bottom-right aligned) or
not, GQA, the fix on or off, attention sinks (folded in the epilogue), where
``_common.tma_ready`` holds; ``covers`` routes the subset
measured faster (``FASTER``: D128 from one query tile; D64 from 2048 rows without a causal
mask, and from 4096 with one).
Not: packed sequences, windows, softcap, dropout, padding masks, ``return_shift``,
``shift_single``. Gluon does not run under the interpreter; the GPU suite tests this path
(``tests/gpu/test_hopper_forward.py``). HF_STABLE_ATTN_GLUON=0 turns it off.
"""

from __future__ import annotations

import functools
import os

import torch
import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (
    mbarrier, warpgroup_mma, warpgroup_mma_wait,
)

from ._common import (
    COMPILE_OPTIONS, LN2, LOG2E, ceil_div, launch_compiled, nvidia_capability, release_below,
    sm_count,
)
from ._hopper_ring import (
    HEAD_GROUP, columns_at_most, flag_barriers, host_descriptor, key_tiles, load_rows, load_slot,
    ranked_tile, release_slot, ring_barriers, split_columns,
)

ONE_BITS = gl.constexpr(0x3F800000)  # 1.0f as int32
LN2_C = gl.constexpr(LN2)
LOG2E_C = gl.constexpr(LOG2E)
# Whether the two-consumer (D128) forward takes ``_tie_gap`` a lane pair (``_consume_tile``).
PAIR_GAP_BELOW_TRITON_38 = gl.constexpr(release_below(triton.__version__, (3, 8)))


@gluon.jit
def _at_least(x, y):
    """1.0 where ``x >= y`` else 0.0, one ``set.ge.f32.f32`` per element (as
    ``_common.at_least``)."""
    return gl.inline_asm_elementwise("set.ge.f32.f32 $0, $1, $2;", "=r,r,r", [x, y],
                                     dtype=gl.float32, is_pure=True, pack=1)


@gluon.jit
def _to_operand(p, dtype: gl.constexpr):
    """fp32 ``p`` rounded to nearest-even in ``dtype`` (bf16 or fp16), two elements per
    ``cvt.rn.<dtype>x2.f32``: the result stays packed across the loop's back edge, where
    ``p.to(dtype)``'s 16-bit halves cost a ``PRMT`` per pair (docs/kernel_notes.md, v22b)."""
    if dtype == gl.bfloat16:
        return gl.inline_asm_elementwise("cvt.rn.bf16x2.f32 $0, $2, $1;", "=r,r,r", [p],
                                         dtype=gl.bfloat16, is_pure=True, pack=2)
    else:
        return gl.inline_asm_elementwise("cvt.rn.f16x2.f32 $0, $2, $1;", "=r,r,r", [p],
                                         dtype=gl.float16, is_pure=True, pack=2)


@gluon.jit
def _lane_odd(rows):
    """-1 on a warp's odd lanes and 0 on its even ones, in the shape of ``rows``, a row vector
    (BLOCK_M,) of the wgmma layout. Only ``_tie_gap`` reads it: it is not a function of the row."""
    return gl.inline_asm_elementwise(
        "{ .reg .b32 t; mov.u32 t, %laneid; and.b32 t, t, 1; neg.s32 $0, t; }", "=r,r", [rows],
        dtype=gl.int32, is_pure=True, pack=1)


# ``_tie_gap``'s PTX over a thread's two rows (``pack=2``: each input gives two operands, the
# thread's two elements): ``$0, $1`` the gaps; ``$2, $3`` the rows' ``top``; ``$4`` ``_lane_odd``;
# ``$6, $8, $10, $12, $14`` the splats beta - 1, 2 log2(e) / max_gap, -2 max_gap, max_gap and
# min_gap. The lane's row's ``top`` (``lop3 .., 0xE4`` is ``odd ? x : y``), then
# ``_common.tie_gap``'s arithmetic op for op as LLVM compiles it, then the pair swaps gaps.
TIE_GAP_PAIR = gl.constexpr("""{
.reg .b32 top, neg, raw, e, g, o;
lop3.b32 top, $3, $2, $4, 0xE4;
mul.f32 raw, top, $6;
neg.f32 neg, top;
max.f32 raw, raw, neg;
mul.f32 raw, raw, $8;
ex2.approx.ftz.f32 e, raw;
add.f32 e, e, 0f3F800000;
rcp.approx.ftz.f32 e, e;
fma.rn.f32 g, $10, e, $12;
max.f32 g, g, $14;
shfl.sync.bfly.b32 o, g, 1, 0x1f, -1;
lop3.b32 $0, o, g, $4, 0xE4;
lop3.b32 $1, g, o, $4, 0xE4;
}""")


@gluon.jit
def _tie_gap(top, odd, beta, min_gap, max_gap, PAIRED: gl.constexpr):
    """``_common.tie_gap`` (a Gluon kernel cannot call Triton's) before its select: the shift's
    gap above a tied row's finite maximum ``top`` (BLOCK_M,), log2 units. ``PAIRED`` (v81a): a
    thread holds two rows of the wgmma layout (its only two elements of ``top``, which ``pack=2``
    hands one invocation), as does its pair lane (l ^ 1); each lane of the pair computes one
    row's gap (``odd``: ``_lane_odd``) and they swap, one ``ex2`` and one ``rcp`` a lane instead
    of two. The same operations on the same operands as unpaired, so the same bits."""
    above, rate, span = _gap_constants(beta, max_gap)
    if PAIRED:
        ones = gl.full_like(top, 1.0)
        return gl.inline_asm_elementwise(
            TIE_GAP_PAIR, "=r,=r" + ",r" * 14,
            [top, odd, ones * above, ones * rate, ones * -span, ones * max_gap,
             ones * min_gap],
            dtype=gl.float32, is_pure=True, pack=2)
    else:
        raw = gl.maximum(above * top, -top)
        e = gl.exp2(raw * rate)
        r = gl.inline_asm_elementwise("rcp.approx.ftz.f32 $0, $1;", "=r,r", [e + 1.0],
                                      dtype=gl.float32, is_pure=True, pack=1)
        return gl.maximum(max_gap - span * r, min_gap)


@gluon.jit
def _gap_constants(beta, max_gap):
    """``_common.tie_gap``'s scalars ``(beta - 1, 2 log2(e) / max_gap, 2 max_gap)``: the paper's
    target lies ``(beta - 1) top`` above a positive maximum ``top``; ``e^(2 raw / max_gap)`` is
    an exp2 at that rate; ``max_gap - 2 max_gap / (e + 1)`` is the soft ceiling's tanh."""
    return beta - 1.0, 2.8853900817779268 / max_gap, 2.0 * max_gap


@gluon.jit
def _sink_fold(l_safe, shift, sink):
    """``flash_fwd.sink_fold`` (a Gluon kernel cannot call Triton's): ``(scale, lse)`` of rows
    with row sums ``l_safe`` > 0, ``shift`` and the sink logit ``sink`` in log2 units."""
    lse2 = shift + gl.log2(l_safe)
    d = sink - lse2
    softplus = gl.maximum(d, 0.0) + gl.log2(1.0 + gl.exp2(-gl.abs(d)))
    return gl.exp2(-softplus) / l_safe, (lse2 + softplus) * LN2_C


@gluon.jit
def _softmax(s, m1, tied, shift, l_i, start_n, start_m, seqlen_k, diag, qk_scale, beta,
             tie_window, min_gap, max_gap, lane_odd, s_layout: gl.constexpr,
             MASKED: gl.constexpr, CAUSAL: gl.constexpr, STABILIZE: gl.constexpr,
             BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, PAIR_GAP: gl.constexpr):
    """One key tile's online softmax on raw scores ``s`` (BLOCK_M, BLOCK_N) fp32: returns
    ``(p, alpha, m1, tied, shift, l_i)``, ``alpha`` the factor that moves the accumulator from
    the old shift to the new one. The running state and its update are ``flash_fwd._fwd_tiles``',
    with the running maximum ``m1`` and ``tie_window`` in raw units (``s``'s, before
    ``qk_scale``); ``shift`` is in log2 units; ``lane_odd`` and ``PAIR_GAP`` are
    ``_tie_gap``'s."""
    if MASKED:
        # One compare a score (``split_columns``): the column against its row's last visible
        # one, the key length folded in, both counted from the tile's first column.
        if CAUSAL:
            rows = start_m + gl.arange(0, BLOCK_M, layout=gl.SliceLayout(1, s_layout))
            last = gl.minimum(rows + diag, seqlen_k - 1) - start_n
            ok = columns_at_most(last, BLOCK_N, gl.SliceLayout(0, s_layout))
        else:
            own, lane = split_columns(BLOCK_N, gl.SliceLayout(0, s_layout))
            ok = gl.expand_dims(own <= (seqlen_k - 1 - start_n) - lane, 0)
        s = gl.where(ok, s, float("-inf"))
    m1_new = gl.maximum(m1, gl.max(s, 1))
    top = m1_new * qk_scale
    shift_new = gl.where(top > float("-inf"), top, 0.0)
    if STABILIZE:
        floor = m1_new - tie_window
        s_b, lows = gl.broadcast(s, gl.expand_dims(floor, 1))
        near = gl.sum(_at_least(s_b, lows).to(gl.int32, bitcast=True), 1)
        near += _at_least(m1, floor).to(gl.int32, bitcast=True)
        tied = (near != 0) & ((near != ONE_BITS) | (tied & (m1 == m1_new)))
        gap = _tie_gap(top, lane_odd, beta, min_gap, max_gap, PAIR_GAP)
        if MASKED:  # a row may have no visible key yet (m1 -inf): all its scores "count"
            shift_new = gl.where(tied & (top > float("-inf")), top + gap, shift_new)
        else:
            shift_new = gl.where(tied, top + gap, top)
    alpha = gl.where(m1 > float("-inf"), gl.exp2(shift - shift_new), 1.0)
    p = gl.exp2(s * qk_scale - gl.expand_dims(shift_new, 1))
    l_i = l_i * alpha + gl.sum(p, 1)
    return p, alpha, m1_new, tied, shift_new, l_i


@gluon.jit
def _take_turn(turns, WG: gl.constexpr, k):
    """Ping-pong (FlashAttention-3's warp scheduler barrier, with ``turns`` one mbarrier per
    consumer; off when there is one): wait until consumer ``WG`` may issue its ``k``-th group
    of matrix products. The consumers issue in turn (0, 1, .., 0, ..), so the tensor cores
    finish one consumer's scores while the next one's products queue behind them, and that
    consumer's softmax runs beside them instead of every consumer waiting at once. Consumer 0
    goes first; its turn ``k`` follows the last consumer's turn ``k - 1``."""
    if turns.shape[0] > 1:
        if WG == 0:
            if k > 0:
                mbarrier.wait(turns.index(0), (k - 1) & 1)
        else:
            mbarrier.wait(turns.index(WG), k & 1)


@gluon.jit
def _pass_turn(turns, WG: gl.constexpr):
    """Hand the turn to the next consumer (after issuing this turn's products)."""
    if turns.shape[0] > 1:
        mbarrier.arrive(turns.index((WG + 1) % turns.shape[0]), count=1)


@gluon.jit
def _work_unit(unit, num_tiles_m, num_columns, CAUSAL: gl.constexpr):
    """The ``(tile, column)`` of the query tile ``ranked_tile`` ranks ``unit``-th (``_tile_part``
    maps it to rows and heads). Causal launches run the heaviest tiles first, in groups of
    ``HEAD_GROUP`` columns, so that the tiles running together read a few heads' K/V from L2;
    one program per tile, or persistent programs taking the next unit from ``_next_unit``'s
    counter as they finish one (the hardware's order for one program per tile)."""
    return ranked_tile(unit, num_tiles_m, num_columns, HEAD_GROUP, CAUSAL)


@gluon.jit
def _next_unit(QUEUE):
    """The next unit of work of a persistent causal launch: ``QUEUE[0]`` (zeroed by the caller)
    incremented by one lane of the loader's warp, the old count added to the number of programs
    (each program's first unit is its own index)."""
    lanes = gl.arange(0, 32, layout=gl.BlockedLayout([1], [32], [1], [0]))
    taken = gl.inline_asm_elementwise(
        "{ .reg .pred first; .reg .b32 old; mov.b32 old, 0; setp.eq.u32 first, $2, 0;"
        " @first atom.global.add.u32 old, [$1], 1;"
        " shfl.sync.idx.b32 $0, old, 0, 0x1f, 0xffffffff; }",
        "=r,l,r", [QUEUE + lanes * 0, lanes], dtype=gl.int32, is_pure=False, pack=1)
    return gl.num_programs(0) + gl.max(taken, 0)


@gluon.jit
def _unit_slot(QUEUE, WG, CONSUMERS: gl.constexpr):
    """Where the loader hands consumer ``WG`` of this program its next unit (``QUEUE`` after the
    counter, one int32 per consumer and program)."""
    return QUEUE + 1 + gl.program_id(0) * CONSUMERS + WG


@gluon.jit
def _tile_part(tile, column, num_heads_q, heads_per_kv, stack, CONSUMERS: gl.constexpr,
               part: gl.constexpr):
    """Consumer ``part``'s share of query tile ``(tile, column)`` (``_work_unit``):
    ``(rows0, batch (int64), query head, KV head, g)``, its 64 rows from ``rows0`` of query head
    ``h``, the ``g``-th of its column's ``stack`` heads. A column is ``stack`` query heads of
    one batch entry; its 64-row parts run block-major (each row block for every head of the
    column, then the next block), ``CONSUMERS`` parts a tile. With ``stack`` 1 a tile is
    ``64 CONSUMERS`` consecutive rows of one head; with a causal mask and a KV group's heads
    stacked, a tile's parts share their K/V and see (nearly) the same key tiles, so its
    consumers finish together. ``part`` ``CONSUMERS - 1`` sees the most keys."""
    columns_per_batch = num_heads_q // stack
    item = tile * CONSUMERS + part
    g = item % stack
    h = (column % columns_per_batch) * stack + g
    return ((item // stack) * 64, (column // columns_per_batch).to(gl.int64), h,
            h // heads_per_kv, g)


@gluon.jit
def _loader(Q, K, V, O, LSE, SINKS, QUEUE, stride_ob, stride_os, stride_oh, stride_lb,
            stride_lh, q_smem, k_smem, v_smem, q_full, q_empty, k_full, k_empty, v_full,
            v_empty, turns, seqlen_q, seqlen_k, num_heads_q, heads_per_kv, num_tiles_m,
            num_columns, stack, qk_scale, beta, tie_window, min_gap, max_gap, has_sinks):
    """The load partition: ``_load_tile`` for the program's query tile, or (persistent) for
    each of its tiles."""
    CONSUMERS: gl.constexpr = q_smem.shape[0]
    PERSISTENT: gl.constexpr = q_empty.shape[0] > CONSUMERS
    args = (Q, K, V, q_smem, k_smem, v_smem, q_full, q_empty, k_full, k_empty,
            v_full, v_empty, seqlen_q, seqlen_k, num_heads_q, heads_per_kv, num_tiles_m,
            num_columns, stack)
    CAUSAL: gl.constexpr = q_full.shape[0] - CONSUMERS >= 2
    total = num_tiles_m * num_columns
    if PERSISTENT:
        t = 0  # ring fills so far
        i = 0  # query tiles so far
        unit = gl.program_id(0)
        while unit < total:
            t += _load_tile(unit, t, i, QUEUE, *args)
            i += 1
            if CAUSAL:  # from the counter; _load_tile hands it to the consumers
                unit = _next_unit(QUEUE)
            else:
                unit += gl.num_programs(0)
        if CAUSAL:
            for wg in gl.static_range(CONSUMERS):  # no unit left: the consumers stop
                mbarrier.wait(q_empty.index(wg), (i & 1) ^ 1)
                gl.store(_unit_slot(QUEUE, wg, CONSUMERS), total)
                mbarrier.arrive(q_full.index(wg), count=1)
    else:
        _load_tile(gl.program_id(0), 0, 0, QUEUE, *args)


@gluon.jit
def _load_tile(unit, t, i, QUEUE, Q, K, V, q_smem, k_smem, v_smem, q_full,
               q_empty, k_full, k_empty, v_full, v_empty, seqlen_q, seqlen_k, num_heads_q,
               heads_per_kv, num_tiles_m, num_columns, stack):
    """The program's ``i``-th query tile (``unit``): each consumer's part once that consumer
    has released its last one (with the unit, in a persistent causal launch), then the K and V
    tiles its rows see into ring fills ``t`` onwards, each slot once every consumer has
    released it. Returns how many fills."""
    CONSUMERS: gl.constexpr = q_smem.shape[0]
    BLOCK_N: gl.constexpr = k_smem.shape[1]
    CAUSAL: gl.constexpr = q_full.shape[0] - CONSUMERS >= 2
    PERSISTENT: gl.constexpr = q_empty.shape[0] > CONSUMERS
    ranked, column = _work_unit(unit, num_tiles_m, num_columns, CAUSAL)
    tile = (ranked, column, num_heads_q, heads_per_kv, stack)
    last0, b64, _, hk, _ = _tile_part(*tile, CONSUMERS, CONSUMERS - 1)
    b = b64.to(gl.int32)
    for wg in gl.static_range(CONSUMERS):
        rows0, _, hq, _, _ = _tile_part(*tile, CONSUMERS, wg)
        mbarrier.wait(q_empty.index(wg), (i & 1) ^ 1)
        if PERSISTENT and CAUSAL:  # read once the expect below completes q_full's phase
            gl.store(_unit_slot(QUEUE, wg, CONSUMERS), unit)
        mbarrier.expect(q_full.index(wg), Q.block_type.nbytes)
        load_rows(Q, b, rows0, hq, q_full.index(wg), q_smem.index(wg))
    n_tiles = key_tiles(last0, seqlen_k - seqlen_q, seqlen_k, BLOCK_N, CAUSAL, 64)
    for j in range(n_tiles):
        load_slot(t + j, b, j * BLOCK_N, hk, K, V, k_smem, v_smem, k_full, k_empty, v_full,
                  v_empty)
    return n_tiles


@gluon.jit
def _consume(WG: gl.constexpr, Q, K, V, O, LSE, SINKS, QUEUE, stride_ob, stride_os,
             stride_oh, stride_lb, stride_lh, q_smem, k_smem, v_smem, q_full, q_empty, k_full,
             k_empty, v_full, v_empty, turns, seqlen_q, seqlen_k, num_heads_q, heads_per_kv,
             num_tiles_m, num_columns, stack, qk_scale, beta, tie_window, min_gap, max_gap,
             has_sinks):
    """One consumer partition (4 warps): ``_consume_tile`` for the program's query tile, or
    (persistent) for each of its tiles. (The compile-time switches come from the barriers'
    lengths, ``q_full`` CONSUMERS + STABILIZE + 2 CAUSAL, ``q_empty`` CONSUMERS + PERSISTENT:
    warp_specialize passes its arguments as run-time values.)"""
    CONSUMERS: gl.constexpr = q_smem.shape[0]
    PERSISTENT: gl.constexpr = q_empty.shape[0] > CONSUMERS
    args = (q_smem, k_smem, v_smem, q_full, q_empty, k_full, k_empty, v_full, v_empty, turns, O,
            LSE, SINKS, stride_ob, stride_os, stride_oh, stride_lb, stride_lh, seqlen_q, seqlen_k,
            num_heads_q, heads_per_kv, num_tiles_m, num_columns, stack, qk_scale, beta, tie_window,
            min_gap, max_gap, has_sinks)
    CAUSAL: gl.constexpr = q_full.shape[0] - CONSUMERS >= 2
    # Every query tile takes its fills + 1 turns, so the i-th one's first turn is t + i.
    if PERSISTENT:
        t = 0  # ring fills so far
        i = 0  # query tiles so far
        unit = _handed_unit(gl.program_id(0), 0, QUEUE, q_full, WG, CONSUMERS, CAUSAL)
        while unit < num_tiles_m * num_columns:
            t += _consume_tile(WG, unit, t, t + i, i & 1, *args)
            i += 1
            unit = _handed_unit(unit + gl.num_programs(0), i, QUEUE, q_full, WG, CONSUMERS,
                                CAUSAL)
    else:
        _consume_tile(WG, gl.program_id(0), 0, 0, 0, *args)


@gluon.jit
def _handed_unit(strided, i, QUEUE, q_full, WG: gl.constexpr, CONSUMERS: gl.constexpr,
                 CAUSAL: gl.constexpr):
    """A persistent consumer's ``i``-th unit: ``strided`` (the static order), or (causal) the
    one the loader took from the counter, read once the loader has completed the consumer's
    ``i``-th query phase (``_consume_tile`` then starts without waiting on it again)."""
    if CAUSAL:
        mbarrier.wait(q_full.index(WG), i & 1)
        return gl.load(_unit_slot(QUEUE, WG, CONSUMERS), volatile=True)
    else:
        return strided


@gluon.jit
def _consume_tile(WG: gl.constexpr, unit, t0, k0, q_phase, q_smem, k_smem, v_smem, q_full,
                  q_empty, k_full, k_empty, v_full, v_empty, turns, O, LSE, SINKS, stride_ob,
                  stride_os, stride_oh, stride_lb, stride_lh, seqlen_q, seqlen_k, num_heads_q,
                  heads_per_kv, num_tiles_m, num_columns, stack, qk_scale, beta, tie_window,
                  min_gap, max_gap, has_sinks):
    """The query tile ``unit``'s part ``WG`` (``_tile_part``: 64 rows of one head) against the
    key tiles the loader fills into ring slots ``t0`` onwards (this consumer reads those its
    rows see and releases the rest); ``k0`` is the tile's first turn, ``q_phase`` the query
    part's. Returns how many fills the tile took."""
    BLOCK_M: gl.constexpr = 64
    CONSUMERS: gl.constexpr = q_smem.shape[0]
    STAGES: gl.constexpr = k_smem.shape[0]
    BLOCK_N: gl.constexpr = k_smem.shape[1]
    HEAD_DIM: gl.constexpr = k_smem.shape[2]
    STABILIZE: gl.constexpr = (q_full.shape[0] - CONSUMERS) % 2 == 1
    CAUSAL: gl.constexpr = q_full.shape[0] - CONSUMERS >= 2
    PERSISTENT: gl.constexpr = q_empty.shape[0] > CONSUMERS
    dtype: gl.constexpr = q_smem.dtype
    s_layout: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, BLOCK_N, 16])
    o_layout: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, HEAD_DIM, 16])
    p_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=o_layout, k_width=2)
    row_o: gl.constexpr = gl.SliceLayout(1, o_layout)
    ranked, column = _work_unit(unit, num_tiles_m, num_columns, CAUSAL)
    tile = (ranked, column, num_heads_q, heads_per_kv, stack)
    rows0, b64, h, hk, _ = _tile_part(*tile, CONSUMERS, WG)
    last0 = _tile_part(*tile, CONSUMERS, CONSUMERS - 1)[0]
    diag = seqlen_k - seqlen_q
    n_tiles = key_tiles(last0, diag, seqlen_k, BLOCK_N, CAUSAL, BLOCK_M)
    q = q_smem.index(WG)
    zero_s = gl.zeros([BLOCK_M, BLOCK_N], gl.float32, layout=s_layout)
    m1 = gl.full([BLOCK_M], float("-inf"), gl.float32, layout=gl.SliceLayout(1, s_layout))
    tied = m1 > 0.0
    shift = gl.zeros_like(m1)
    l_i = gl.zeros_like(m1)
    # The running maximum m1 and the tie window are kept in raw score units (the scores before
    # qk_scale): the window's floor is then one subtraction a row (v78a).
    consts = (seqlen_k, diag, qk_scale, beta, tie_window / qk_scale, min_gap, max_gap,
              _lane_odd(m1))
    # A tie gap a lane pair (``_tie_gap``, v81a) where it measured faster: two consumers, below
    # Triton 3.8. With the fix, on the 12 shapes of a head dim (session 81, two H200s, Triton
    # 3.6, against main's gap a row): the two-consumer D128 forward 2.4% faster (geomean; -0.2%
    # to +5.7%), the three-consumer D64 one (160 registers a thread) 2.3% slower. Under 3.8.0 a
    # row is faster at D128 too (session 88, the no-mask forward alone, one H200: +3.7% on four
    # shapes, two runs; -1.7% under 3.6, one run); the fix's cost in forward + backward at D128
    # under 3.8.0 fell from 3.4% to 2.6% (session 89, the 12 shapes, one run a group).
    PAIR_GAP: gl.constexpr = CONSUMERS == 2 and PAIR_GAP_BELOW_TRITON_38
    # This partition's key tiles (the loader's ``n_tiles`` is the last partition's, which
    # sees the most): [0, n_full) unmasked, [n_full, n_mine) cut by the diagonal or the end.
    hi = seqlen_k
    full_hi = (seqlen_k // BLOCK_N) * BLOCK_N
    if CAUSAL:
        hi = gl.maximum(gl.minimum(rows0 + BLOCK_M + diag, seqlen_k), 0)
        full_hi = gl.minimum(full_hi, (gl.maximum(rows0 + diag + 1, 0) // BLOCK_N) * BLOCK_N)
    n_mine = gl.maximum(gl.cdiv(hi, BLOCK_N), 1)
    n_full = gl.maximum(full_hi // BLOCK_N, 1)

    if not (PERSISTENT and CAUSAL):  # else _handed_unit waited, to read the unit
        mbarrier.wait(q_full.index(WG), q_phase)
    mbarrier.wait(k_full.index(t0 % STAGES), (t0 // STAGES) & 1)
    _take_turn(turns, WG, k0)
    s_tok = warpgroup_mma(q, k_smem.index(t0 % STAGES).permute((1, 0)), zero_s, use_acc=False,
                          is_async=True)
    _pass_turn(turns, WG)
    s = warpgroup_mma_wait(0, deps=(s_tok,))
    mbarrier.arrive(k_empty.index(t0 % STAGES), count=1)
    p, alpha, m1, tied, shift, l_i = _softmax(s, m1, tied, shift, l_i, 0, rows0, *consts,
                                              s_layout, True, CAUSAL, STABILIZE, BLOCK_M,
                                              BLOCK_N, PAIR_GAP)
    p_op = gl.convert_layout(_to_operand(p, dtype), p_layout)
    acc = gl.zeros([BLOCK_M, HEAD_DIM], gl.float32, layout=o_layout)
    for j in range(1, n_full):
        acc, p_op, m1, tied, shift, l_i = _step(
            j, t0, k0, acc, p_op, m1, tied, shift, l_i, q, k_smem, v_smem, k_full, k_empty,
            v_full, v_empty, turns, zero_s, rows0, *consts, s_layout, row_o, p_layout, WG,
            False, CAUSAL, STABILIZE, BLOCK_M, BLOCK_N, STAGES, PAIR_GAP)
    for j in range(n_full, n_mine):
        acc, p_op, m1, tied, shift, l_i = _step(
            j, t0, k0, acc, p_op, m1, tied, shift, l_i, q, k_smem, v_smem, k_full, k_empty,
            v_full, v_empty, turns, zero_s, rows0, *consts, s_layout, row_o, p_layout, WG,
            True, CAUSAL, STABILIZE, BLOCK_M, BLOCK_N, STAGES, PAIR_GAP)
    mbarrier.arrive(q_empty.index(WG), count=1)  # every Q K^T of the tile has completed
    last = t0 + n_mine - 1
    mbarrier.wait(v_full.index(last % STAGES), (last // STAGES) & 1)
    _take_turn(turns, WG, k0 + n_mine)
    acc_tok = warpgroup_mma(p_op, v_smem.index(last % STAGES), acc, is_async=True)
    _pass_turn(turns, WG)
    acc = warpgroup_mma_wait(0, deps=(acc_tok,))
    mbarrier.arrive(v_empty.index(last % STAGES), count=1)
    for j in range(n_mine, n_tiles):  # tiles only later partitions see: release them (and
        _take_turn(turns, WG, k0 + j + 1)  # pass the turns they issue products in)
        _pass_turn(turns, WG)
        release_slot(t0 + j, STAGES, k_full, k_empty, v_full, v_empty)

    l_o = gl.convert_layout(l_i, row_o)
    has_keys = l_o > 0.0
    l_safe = gl.where(has_keys, l_o, 1.0)
    shift_o = gl.convert_layout(shift, row_o)
    if has_sinks:  # the head's sink joins the denominator (hf_stable_attn.sinks)
        scale, lse = _sink_fold(l_safe, shift_o, gl.load(SINKS + h).to(gl.float32) * LOG2E_C)
        out = gl.where(gl.expand_dims(has_keys, 1), acc * gl.expand_dims(scale, 1), 0.0)
    else:
        out = gl.where(gl.expand_dims(has_keys, 1), acc / gl.expand_dims(l_safe, 1), 0.0)
        lse = shift_o * LN2_C + gl.log(l_safe)
    rows = rows0 + gl.arange(0, BLOCK_M, layout=row_o)
    cols = gl.arange(0, HEAD_DIM, layout=gl.SliceLayout(0, o_layout))
    row_ok = rows < seqlen_q
    o_ptrs = (O + b64 * stride_ob + h * stride_oh
              + gl.expand_dims(rows.to(gl.int64) * stride_os, 1) + gl.expand_dims(cols, 0))
    o_mask = gl.expand_dims(row_ok, 1) & gl.expand_dims(cols < HEAD_DIM, 0)
    gl.store(o_ptrs, out.to(dtype), mask=o_mask)
    lse = gl.where(has_keys, lse, float("inf"))
    gl.store(LSE + b64 * stride_lb + h * stride_lh + rows, lse, mask=row_ok)
    return n_tiles


@gluon.jit
def _step(j, t0, k0, acc, p_op, m1, tied, shift, l_i, q, k_smem, v_smem, k_full, k_empty,
          v_full, v_empty, turns, zero_s, rows0, seqlen_k, diag, qk_scale, beta, tie_window,
          min_gap, max_gap, lane_odd, s_layout: gl.constexpr, row_o: gl.constexpr,
          p_layout: gl.constexpr, WG: gl.constexpr, MASKED: gl.constexpr,
          CAUSAL: gl.constexpr, STABILIZE: gl.constexpr, BLOCK_M: gl.constexpr,
          BLOCK_N: gl.constexpr, STAGES: gl.constexpr, PAIR_GAP: gl.constexpr):
    """v19a's step on the tile's key tile ``j`` (ring slot ``t0 + j``) with the ring's slots
    released to the loader as their readers finish; the two matrix products are this
    consumer's turn ``k0 + j`` (``_take_turn``)."""
    PINGPONG: gl.constexpr = turns.shape[0] > 1
    u = t0 + j
    slot = u % STAGES
    prev = (u - 1) % STAGES
    mbarrier.wait(k_full.index(slot), (u // STAGES) & 1)
    # With ping-pong both tiles are waited for before the turn (measured 1-3.5% faster without
    # a causal mask, 1% slower with one, session 26); without it V's wait follows Q K^T's issue.
    if PINGPONG:
        mbarrier.wait(v_full.index(prev), ((u - 1) // STAGES) & 1)
    _take_turn(turns, WG, k0 + j)
    s_tok = warpgroup_mma(q, k_smem.index(slot).permute((1, 0)), zero_s, use_acc=False,
                          is_async=True)
    if not PINGPONG:
        mbarrier.wait(v_full.index(prev), ((u - 1) // STAGES) & 1)
    acc_tok = warpgroup_mma(p_op, v_smem.index(prev), acc, is_async=True)
    _pass_turn(turns, WG)
    s = warpgroup_mma_wait(1, deps=(s_tok,))
    mbarrier.arrive(k_empty.index(slot), count=1)
    p, alpha, m1, tied, shift, l_i = _softmax(
        s, m1, tied, shift, l_i, j * BLOCK_N, rows0, seqlen_k, diag, qk_scale, beta,
        tie_window, min_gap, max_gap, lane_odd, s_layout, MASKED, CAUSAL, STABILIZE, BLOCK_M,
        BLOCK_N, PAIR_GAP)
    acc = warpgroup_mma_wait(0, deps=(acc_tok,))
    mbarrier.arrive(v_empty.index(prev), count=1)
    acc = acc * gl.expand_dims(gl.convert_layout(alpha, row_o), 1)
    p_op = gl.convert_layout(_to_operand(p, p_op.dtype), p_layout)
    return acc, p_op, m1, tied, shift, l_i


@gluon.jit
def _consumer0(Q, K, V, O, LSE, SINKS, QUEUE, stride_ob, stride_os, stride_oh,
               stride_lb, stride_lh, q_smem, k_smem, v_smem, q_full, q_empty, k_full, k_empty,
               v_full, v_empty, turns, seqlen_q, seqlen_k, num_heads_q, heads_per_kv, num_tiles_m,
               num_columns, stack, qk_scale, beta, tie_window, min_gap, max_gap, has_sinks):
    _consume(0, Q, K, V, O, LSE, SINKS, QUEUE, stride_ob, stride_os, stride_oh,
             stride_lb, stride_lh, q_smem, k_smem, v_smem, q_full, q_empty, k_full, k_empty, v_full,
             v_empty, turns, seqlen_q, seqlen_k, num_heads_q, heads_per_kv, num_tiles_m,
             num_columns, stack, qk_scale, beta, tie_window, min_gap, max_gap, has_sinks)


@gluon.jit
def _consumer1(Q, K, V, O, LSE, SINKS, QUEUE, stride_ob, stride_os, stride_oh,
               stride_lb, stride_lh, q_smem, k_smem, v_smem, q_full, q_empty, k_full, k_empty,
               v_full, v_empty, turns, seqlen_q, seqlen_k, num_heads_q, heads_per_kv, num_tiles_m,
               num_columns, stack, qk_scale, beta, tie_window, min_gap, max_gap, has_sinks):
    _consume(1, Q, K, V, O, LSE, SINKS, QUEUE, stride_ob, stride_os, stride_oh,
             stride_lb, stride_lh, q_smem, k_smem, v_smem, q_full, q_empty, k_full, k_empty, v_full,
             v_empty, turns, seqlen_q, seqlen_k, num_heads_q, heads_per_kv, num_tiles_m,
             num_columns, stack, qk_scale, beta, tie_window, min_gap, max_gap, has_sinks)


@gluon.jit
def _consumer2(Q, K, V, O, LSE, SINKS, QUEUE, stride_ob, stride_os, stride_oh,
               stride_lb, stride_lh, q_smem, k_smem, v_smem, q_full, q_empty, k_full, k_empty,
               v_full, v_empty, turns, seqlen_q, seqlen_k, num_heads_q, heads_per_kv, num_tiles_m,
               num_columns, stack, qk_scale, beta, tie_window, min_gap, max_gap, has_sinks):
    _consume(2, Q, K, V, O, LSE, SINKS, QUEUE, stride_ob, stride_os, stride_oh,
             stride_lb, stride_lh, q_smem, k_smem, v_smem, q_full, q_empty, k_full, k_empty, v_full,
             v_empty, turns, seqlen_q, seqlen_k, num_heads_q, heads_per_kv, num_tiles_m,
             num_columns, stack, qk_scale, beta, tie_window, min_gap, max_gap, has_sinks)


@gluon.jit
def _fwd_ws_kernel(
    Q, K, V, O, LSE, SINKS, QUEUE,
    stride_ob, stride_os, stride_oh,
    stride_lb, stride_lh,
    seqlen_q, seqlen_k, num_heads_q, heads_per_kv, num_tiles_m, num_columns, stack,
    qk_scale, beta, tie_window, min_gap, max_gap, has_sinks,
    CAUSAL: gl.constexpr, STABILIZE: gl.constexpr, HEAD_DIM: gl.constexpr,
    BLOCK_N: gl.constexpr, STAGES: gl.constexpr, CONSUMER_REGS: gl.constexpr,
    CONSUMERS: gl.constexpr, PINGPONG: gl.constexpr, PERSISTENT: gl.constexpr,
    num_warps: gl.constexpr,
):
    """Grid (programs,): program ``p`` computes the ``p``-th query tile in ``ranked_tile``'s
    order or, ``PERSISTENT`` (at most one program per SM), tiles ``p``, ``p + programs``, ..
    (causal: ``p``, then those ``_next_unit`` hands out), the loader filling the next tile's
    ring while the consumers finish one. ``Q``, ``K``, ``V``: ``host_descriptor``s of the
    (B, S, H, D) inputs, boxes of 64 query rows and ``BLOCK_N`` keys. ``QUEUE``: int32, zeroed,
    ``1 + programs * CONSUMERS`` long (persistent causal launches; unread otherwise)."""
    dtype: gl.constexpr = Q.dtype
    q_shared: gl.constexpr = gl.NVMMASharedLayout.get_default_for([64, HEAD_DIM], dtype)
    kv_shared: gl.constexpr = gl.NVMMASharedLayout.get_default_for([BLOCK_N, HEAD_DIM], dtype)
    q_smem = gl.allocate_shared_memory(dtype, [CONSUMERS, 64, HEAD_DIM], q_shared)
    k_smem = gl.allocate_shared_memory(dtype, [STAGES, BLOCK_N, HEAD_DIM], kv_shared)
    v_smem = gl.allocate_shared_memory(dtype, [STAGES, BLOCK_N, HEAD_DIM], kv_shared)
    # The partitions read STABILIZE and CAUSAL from q_full's length (CONSUMERS + STABILIZE
    # + 2 CAUSAL; the extra barriers are unused): warp_specialize passes its arguments as
    # run-time values.
    N_QBARS: gl.constexpr = CONSUMERS + (1 if STABILIZE else 0) + (2 if CAUSAL else 0)
    q_full = flag_barriers(N_QBARS)
    q_empty = flag_barriers(CONSUMERS + (1 if PERSISTENT else 0))
    k_full, k_empty, v_full, v_empty = ring_barriers(STAGES, CONSUMERS)
    turns = flag_barriers(CONSUMERS if PINGPONG else 1)  # one barrier: no ping-pong

    args = (Q, K, V, O, LSE, SINKS, QUEUE, stride_ob, stride_os, stride_oh, stride_lb,
            stride_lh, q_smem, k_smem, v_smem, q_full, q_empty, k_full, k_empty, v_full,
            v_empty, turns, seqlen_q, seqlen_k, num_heads_q, heads_per_kv, num_tiles_m,
            num_columns, stack, qk_scale, beta, tie_window, min_gap, max_gap, has_sinks)
    if CONSUMERS == 3:
        gl.warp_specialize([(_consumer0, args), (_consumer1, args), (_consumer2, args),
                            (_loader, args)], [4, 4, 1], [CONSUMER_REGS, CONSUMER_REGS, 24])
    else:
        gl.warp_specialize([(_consumer0, args), (_consumer1, args), (_loader, args)], [4, 1],
                           [CONSUMER_REGS, 24])


# (BLOCK_N, STAGES, consumer registers, consumers, ping-pong) per head dim: query tiles of 64
# rows per consumer. Measured on an H100 (docs/kernel_notes.md, v19d, v22a, session 26). Three
# consumers and the loader's warpgroup hold 65536 registers at 160 per consumer thread; at D64
# they measured 5-16% faster than two without a causal mask (v22a), and ping-pong up to 7% faster
# than none (session 26; at D128 -3.6% to +1.2%). With the fix it is off in causal tiles that
# stack 3 or more heads (``stacked_heads``): their parts (nearly all) see the same key tiles.
# Session 53 (one H200, persistent D64 causal GQA): off, 2.7-2.9% faster at S 4096 8:1 (two
# runs), 1.8% at 4096 4:1, 1.1-2.6% at 8192; without the fix off was 0.5-3.1% slower (so it stays
# on there). Two stacked heads put every tile's parts on two row blocks (as MHA's three), and
# there off measured slower (session 54, one H200, persistent, two runs): 2.1% and 0.8% at
# S 4096, 0.4% and 0.1% at 8192.
HOPPER_CONFIGS = {64: (128, 2, 160, 3, True), 128: (128, 2, 240, 2, False)}


# Least query rows (not causal, causal) per (head dim, fix on, grouped: more query heads than KV
# heads) from which this kernel measured faster than the Triton forward: D128 from one full tile
# (v19d, H100); D64 (v22a, three consumers) from 2048 rows without a causal mask; with one, from
# 4096 rows (with the fix: an H100 tie in v22b, 306 against 304 TFLOP/s, and 4% faster on an H200
# in session 34, 318 against 305; at 2048 it runs 7-9% slower; without the fix v22b measured 7%
# faster at 4096). D64 causal MHA with the fix went to the Triton forward below 8192 rows from
# session 64 (then, under Triton 3.9, the Triton forward led at 4096 by 4.6-5.6%) to session 99,
# where v78a, v94a and v94b had changed both forwards: in the forward + backward back to back
# (``gpu/route_check.py --whole-step --sustain-s 1``, one H200, interleaved rounds) the Gluon
# launch led at 4096 by 1.5% and 1.4% under Triton 3.6 (two calls, 348.7 and 348.6 TFLOP/s
# against 343.6 and 343.7) and by 1.4% under 3.9 (348.4 against 343.5), at 8192 by 4.3%; at
# 2048 the Triton forward still led (MHA 293.9 against 288.9 at the best Gluon launch, GQA 8:1
# 309.9 against 308.7).
FASTER = {(d, fix, grouped): rows for d, rows in {128: (128, 128), 64: (2048, 4096)}.items()
          for fix in (False, True) for grouped in (False, True)}


# Query rows per (head dim, causal, stacked: ``stacked_heads`` stacks a KV group's heads, fix on)
# below which a launch is persistent (``launch_shape``), measured on H200s against one program per
# tile (docs/kernel_notes.md, session 33): without a causal mask 4-10% faster at S 2048 (D64 and
# D128, MHA and GQA 8:1); session 48 (two runs, with the fix): 0-3.6% faster at 4096 and 1-3% at
# 8192 (D64 and D128, MHA and GQA 8:1; 16384 not measured). Causal launches persistent take their
# tiles from a counter (v52a, session 52, one H200, fix on; D128 GQA 8:1 at S 2048 against the
# static persistent launch it replaced): D128 +3.9% / +4.0% (MHA / GQA 8:1) at S 2048, +2.4% / +1.6%
# at 4096, -0.9% / -0.8% at 8192; D64 GQA 8:1 +5.9% at 4096 (+10% at 2048, which the Triton forward
# takes), +0.8% at 8192; D64 MHA -2% to -4% (its three consumers see different numbers of key
# tiles). Session 53 (one H200): D64 causal stacked tiles with 4 or 8 query heads per KV head
# (ping-pong off with the fix) against one program per tile (ping-pong on), fix on / off, 4:1 +3.9%
# / +1.3% at S 4096, +1.0% / +0.3% at 8192; 8:1 +4.1% / +1.4% at 8192; 2:1 (ping-pong on; session
# 54, two runs with the fix, one without) +1.6% and +0.9% / +1.2% at S 4096, -0.9% and -0.4% / +0.6%
# at 8192 (unstacked GQA tiles are MHA's). D128 causal 4:1 (as MHA and 8:1): +5.0% at S 2048, +2.0%
# at 4096, -0.8% at 8192 with the fix. Keyed by the fix too (session 60, two H200s of one host,
# every launch with and without the fix in the same rounds, ``gpu/route_check.py --fix-off-too``):
# without the fix, D64 without a mask ran one program per tile 1.5-4.5% faster (MHA, S 2048-8192,
# GPU 0) and 0.1-1.3% (GPU 1), GQA 8:1 -0.1% to +1.1%, where with the fix the persistent launch was
# 0-8% faster; D128 causal ran persistent 0.6-4.2% faster at S 8192 (two runs) and 2.1-3.0% at 16384
# (one; longer not measured), where with the fix one program per tile was 1.1-4.5% faster from 8192.
# Under Triton 3.9 (ptxas 13.4, before v94a took its spills out of the D64 forward) the two D64
# entries without a mask swapped (session 64, two H200s of one host, two calls, MHA / GQA 8:1): with
# the fix one program per tile (+3.7% / +4.9% and +3.4% / +4.0% at S 2048, +2.4% / +3.2% at 4096,
# +3.6% / +3.8% at 8192), without it persistent below 16384 rows (+3.0% / +1.9% and +1.6% / +3.9% at
# S 2048, +3.0% / +2.1% at 4096, +1.8% / +1.6% at 8192). Session 100 (one H200, ``gpu/route_check.py
# --whole-step --fix-off-too --sustain-s 1``, forward + backward, 16k tokens a call, MHA / GQA 8:1):
# D64 without a mask ran persistent faster with the fix and without under both Tritons. Under 3.6
# (two calls; S 4096 GQA and 8192 in one) with the fix +1.2-1.4% / +0.7-0.9% at S 2048, +0.4-0.8% /
# +0.6% at 4096, +0.5% / +0.3% at 8192, without it +1.2-1.4% / +1.1% at 2048, +0.4-0.5% / +0.4% at
# 4096, +0.1% / +0.3% at 8192; under 3.9.0 with the fix +1.0% / +0.4% at 2048, +0.6% / +0.6% at
# 4096, +0.5% / +0.6% at 8192 (without it, persistent already: +0.7% / +0.8%, +0.1% / -0.2%, -0.3% /
# -0.5%). So one rule for both Tritons. In the first call D128 causal at S 8192 and 16384 ran level
# between the two launches with the fix (-0.2% to +0.1%) and persistent 0.1-0.7% faster without it:
# those entries stay.
PERSISTENT_BELOW = {(64, False, False, True): 16384, (64, False, False, False): 16384,
                    (128, False, False, True): 16384, (128, False, False, False): 16384,
                    (64, True, True, True): 16384, (64, True, True, False): 16384,
                    (128, True, False, True): 8192, (128, True, False, False): 32768}
ENABLED = os.environ.get("HF_STABLE_ATTN_GLUON", "1") != "0"


@functools.lru_cache(maxsize=None)
def _is_sm90(index: int) -> bool:
    """CUDA device ``index`` is an NVIDIA Hopper GPU (``_common.nvidia_capability``)."""
    return nvidia_capability(torch.device("cuda", index)) == (9, 0)


def plain_dense_sm90(q, *, varlen, causal, window_left, window_right, has_softcap, dropout_p,
                     key_padding_mask, tma_ok) -> bool:
    """What both Gluon kernels (this forward, ``flash_bwd_hopper``'s dK/dV) need of a call:
    Gluon on (``ENABLED``), TMA-ready tensors, the dense layout, causal or no mask (no window,
    softcap, dropout or padding mask), an sm_90 GPU (tested last: the first test of a device
    asks CUDA)."""
    return (ENABLED and tma_ok and not varlen and window_left < 0
            and (causal or window_right < 0) and not has_softcap and dropout_p == 0.0
            and key_padding_mask is None and _is_sm90(q.device.index))


def covers(q, *, heads_kv, stabilize, shift_single, return_shift, **features) -> bool:
    """Whether ``flash_fwd.flash_attn_fwd``'s call goes to this kernel: one it covers (see the
    module docstring; ``features`` are ``plain_dense_sm90``'s) and measured faster on
    (``FASTER``'s head dims from its least query rows: decoding steps and short chunks stay on
    the tuned Triton kernel); ``heads_kv`` is K's head count, ``tma_ok`` ``_common.tma_ready``
    of K and V (the caller checks Q's after this cheaper test)."""
    least = FASTER.get((q.shape[-1], bool(stabilize), q.shape[-2] > heads_kv))
    return (least is not None and q.shape[1] >= least[bool(features["causal"])]
            and not shift_single and not return_shift and plain_dense_sm90(q, **features))


def tile_record(head_dim: int) -> tuple[int, int, int, int, bool]:
    """The launch's config as ``TiledLaunch.last`` spells one (BLOCK_M, BLOCK_N, warps, stages,
    TMA): 12 or 16 warps (the consumer warpgroups and the loader's) mark this kernel."""
    block_n, stages, _, consumers, _ = HOPPER_CONFIGS[head_dim]
    return 64 * consumers, block_n, 4 * (consumers + 1), stages, True


def launch_shape(batch, seqlen_q, heads_q, persistent, consumers, device, stack=1):
    """``(programs, query tiles, columns)`` of a launch over ``batch * heads_q / stack`` columns
    of ``stack`` query heads (``_tile_part``), each ``ceil(seqlen_q / 64) * stack`` 64-row parts
    long, ``consumers`` parts a tile: one program per tile (the hardware hands a finished SM the
    next one) or, ``persistent``, at most one per SM of ``device``, each looping over every
    ``programs``-th tile."""
    tiles = ceil_div(ceil_div(seqlen_q, 64) * stack, consumers)
    columns = batch * heads_q // stack
    programs = tiles * columns
    if persistent:
        programs = min(programs, sm_count(device))
    return programs, tiles, columns


def stacked_heads(causal, heads_per_kv, consumers, block_n) -> int:
    """Query heads per column (``_tile_part``): a KV group's where a causal tile of one head's
    ``64 consumers`` consecutive rows would span a fraction of a ``block_n``-key tile (the D64
    config's 192 rows against 128 keys), so that its consumers would see different numbers of
    key tiles and the first would wait for the last; stacked, a tile's parts are equal row
    blocks (or two adjacent ones) sharing their K/V. Measured on an H200 (docs/kernel_notes.md,
    v41a), the D64 causal GQA forward with the fix: 3% faster at 4096 rows, 1% at 8192, 5-8% at
    2048 (which the Triton forward takes); D128's two consumers, already balanced, 1-4% slower
    stacked."""
    if causal and heads_per_kv > 1 and (64 * consumers) % block_n:
        return heads_per_kv
    return 1


def persistent_launch(head_dim, causal, rows, stacked, stabilize) -> bool:
    """Whether a call with ``rows`` query rows launches persistent (``PERSISTENT_BELOW``);
    ``stacked``: its tiles stack a KV group's heads (``stacked_heads``); ``stabilize``: the
    fix is on."""
    key = (head_dim, bool(causal), bool(stacked), bool(stabilize))
    return rows < PERSISTENT_BELOW.get(key, 0)


def flash_attn_fwd_hopper(q, k, v, *, softmax_scale, causal, stabilize, beta, tie_window,
                          min_gap, max_gap, sinks=None, config=None, persistent=None):
    """Stabilized forward of dense q (B, Sq, Hq, D), k, v (B, Sk, Hk, D) on the current GPU
    (the caller makes q's current and checked ``covers``). The shift rule's constants in
    natural-log units; ``sinks`` None or (Hq,) contiguous, folded in as ``flash_fwd``'s (a
    run-time switch here: the partitions see no compile-time arguments); ``config`` (BLOCK_N,
    STAGES, consumer registers, consumers, ping-pong) overrides the table (whose ping-pong is off
    with the fix where ``stacked_heads`` stacks 3 or more heads), ``persistent`` (one program
    per SM) ``PERSISTENT_BELOW``. Returns ``(out, lse)``: out like q, lse fp32
    (B, Hq, Sq), +inf on rows that see no key."""
    batch, sq, hq, head_dim = q.shape
    sk, hk = k.shape[1], k.shape[2]
    block_n, stages, regs, consumers, pingpong = config or HOPPER_CONFIGS[head_dim]
    stack = stacked_heads(causal, hq // hk, consumers, block_n)
    if persistent is None:
        persistent = persistent_launch(head_dim, causal, sq, stack > 1, stabilize)
    if config is None and stack > 2 and stabilize:  # see HOPPER_CONFIGS
        pingpong = False
    programs, tiles, columns = launch_shape(batch, sq, hq, persistent, consumers, q.device,
                                            stack)
    out = torch.empty_like(q)
    lse = torch.empty((batch, hq, sq), device=q.device, dtype=torch.float32)
    queue = lse  # read only by persistent causal launches
    if persistent and causal:
        queue = torch.zeros(1 + programs * consumers, device=q.device, dtype=torch.int32)
    launch_compiled(_fwd_ws_kernel, (programs,), (
        host_descriptor(q, 64), host_descriptor(k, block_n), host_descriptor(v, block_n), out,
        lse, lse if sinks is None else sinks, queue,
        out.stride(0), out.stride(1), out.stride(2),
        lse.stride(0), lse.stride(1),
        sq, sk, hq, hq // hk, tiles, columns, stack,
        float(softmax_scale * LOG2E), float(beta), float(tie_window * LOG2E),
        float(min_gap * LOG2E), float(max_gap * LOG2E), int(sinks is not None),
    ), dict(CAUSAL=bool(causal), STABILIZE=bool(stabilize), HEAD_DIM=head_dim, BLOCK_N=block_n,
            STAGES=stages, CONSUMER_REGS=regs, CONSUMERS=consumers, PINGPONG=bool(pingpong),
            PERSISTENT=bool(persistent)), num_warps=4, **COMPILE_OPTIONS)
    return out, lse

"""What the three Gluon kernels on Hopper (``flash_fwd_hopper``'s forward, ``flash_bwd_hopper``'s
dQ and dK/dV) share: the ring of shared-memory slots through which a 1-warp loader feeds the
consumer warpgroups (two, or three in the D64 forward), (forward and dQ) a program's query
tile, causal grids heaviest first, and how many key tiles it sees, and the split of a tile's
columns through which the causal and length masks compare.

A ring carries two tiles per slot (K and V, or Q and dO), ``a`` and ``b``. Each has a "full"
mbarrier per slot (one arrival: the loader's TMA transaction count) and an "empty" one (one
arrival per consumer). Slot ``t % STAGES`` is used in phase ``(t // STAGES) & 1``.

The TMA descriptors are made on the host (``host_descriptor``), one per tensor and launch, over
the whole ``(B, S, H, D)`` tensor: a copy names its batch entry, first row and head, and rows
past a sequence's end read as zeros. Made on the device instead (one per program and head, as
until session 55), each program paid for writing and fencing them before its first copy, and a
loader had to wait for a head's copies to land before writing the next head's over them.
"""

import functools

import torch
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import mbarrier, tma
from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

from ._common import MIN_HEAD_GROUP, ceil_div, vector_readable

# The TMA load into shared memory: ``async_load`` from triton 3.9 on (where the old name raises),
# ``async_copy_global_to_shared`` before; both take (descriptor, coordinates, barrier, buffer).
tma_load = getattr(tma, "async_load", None) or tma.async_copy_global_to_shared

HEAD_GROUP = gl.constexpr(MIN_HEAD_GROUP.value)  # columns a group, as scheduled_tile's least
GL_DTYPES = {torch.bfloat16: gl.bfloat16, torch.float16: gl.float16}


def host_descriptor(x: torch.Tensor, rows: int) -> TensorDescriptor:
    """The TMA descriptor of ``x`` (B, S, H, D) (``_common.tma_ready``: 16-byte aligned, D
    contiguous) whose box is ``rows`` rows of one head, (1, rows, 1, D), in the shared layout
    of a (rows, D) tile (``load_rows``)."""
    block, layout = descriptor_box(rows, x.shape[-1], x.dtype)
    return TensorDescriptor(x, list(x.shape), list(x.stride()), list(block), layout)


@functools.lru_cache(maxsize=None)
def descriptor_box(rows: int, head_dim: int, dtype: torch.dtype):
    """``host_descriptor``'s box and shared layout (kept: making the layout is most of the
    descriptor's host time)."""
    block = (1, rows, 1, head_dim)
    return block, gl.NVMMASharedLayout.get_default_for(list(block), GL_DTYPES[dtype])


@gluon.jit
def load_rows(desc, b, row, h, bar, smem):
    """TMA copy of a ``host_descriptor``'s box at batch entry ``b``, rows ``row`` onwards, head
    ``h`` (int32 each) into ``smem`` (rows, D), completing on mbarrier ``bar``."""
    tma_load(desc, [b, row, h, 0], bar, smem.reshape([1, smem.shape[0], 1, smem.shape[1]]))


# The bits of a column that the NVMMA accumulator layouts (wgmma's, as mma.sync's) take from a
# thread's lane: a thread holds columns 2 (lane % 4) + 8 i + {0, 1}.
LANE_COLUMN_BITS = gl.constexpr(6)


@gluon.jit
def split_columns(width: gl.constexpr, layout: gl.constexpr):
    """``gl.arange(0, width, layout)`` as ``(own, lane)`` with ``own + lane`` the column:
    ``lane`` the bits a thread's lane sets (``LANE_COLUMN_BITS``), ``own`` the rest, known at
    compile time for each of a thread's registers. A mask ``own <= bound - lane`` (``bound`` a
    row's) then costs one compare with an immediate a score, and no register holds a column
    across the key loop: ``column <= bound`` kept 32 of them live at 128-wide tiles, which ptxas
    13.4 spilled in the D64 forward (docs/kernel_notes.md, session 94). Any layout gives the
    same mask; only the saving needs the NVMMA one."""
    cols = gl.arange(0, width, layout=layout)
    lane = cols & LANE_COLUMN_BITS
    return cols - lane, lane


@gluon.jit
def columns_at_most(bound, width: gl.constexpr, layout: gl.constexpr):
    """Bool (R, width): column ``c`` of row ``r`` is at most ``bound[r]``, ``bound`` (R,) int32
    in ``SliceLayout(1, L)`` and ``layout`` the columns' ``SliceLayout(0, L)``; one compare a
    score through ``split_columns``."""
    own, lane = split_columns(width, layout)
    return gl.expand_dims(own, 0) <= gl.expand_dims(bound, 1) - gl.expand_dims(lane, 0)


@gluon.jit
def ranked_tile(rank, num_tiles, num_columns, group, CAUSAL: gl.constexpr):
    """The ``(tile, column)`` (query tile, batch-head) of the ``rank``-th unit of work in a grid of
    ``num_tiles`` x ``num_columns``, ranks counting tiles fastest: a Gluon form of
    ``_common.scheduled_tile``. Causal: each group of ``group`` columns runs its last (heaviest)
    query tile first."""
    tile = rank % num_tiles
    column = rank // num_tiles
    if CAUSAL:
        first = (rank // (group * num_tiles)) * group
        size = gl.minimum(num_columns - first, group)
        within = rank - first * num_tiles
        tile = num_tiles - 1 - within // size
        column = first + within % size
    return tile, column


@gluon.jit
def heaviest_first(tile, column, group=HEAD_GROUP):
    """``ranked_tile`` of a program in a causal grid (tiles, columns), in groups of ``group``
    columns, each group's last tiles first."""
    num_tiles = gl.num_programs(0)
    return ranked_tile(column * num_tiles + tile, num_tiles, gl.num_programs(1), group, True)


@gluon.jit
def query_tile(num_heads_q, group, CAUSAL: gl.constexpr, BLOCK_M: gl.constexpr = 128):
    """The ``BLOCK_M``-row query tile of a forward or dQ program, grid (query tiles, B * Hq),
    causal grids heaviest first: ``(start_m, batch (int64), query head, KV head)``."""
    tile = gl.program_id(0)
    column = gl.program_id(1)
    if CAUSAL:
        tile, column = heaviest_first(tile, column)
    return (tile * BLOCK_M, (column // num_heads_q).to(gl.int64), column % num_heads_q,
            (column % num_heads_q) // group)


@gluon.jit
def key_tiles(start_m, diag, seqlen_k, BLOCK_N: gl.constexpr, CAUSAL: gl.constexpr,
              BLOCK_M: gl.constexpr = 128):
    """How many ``BLOCK_N``-key tiles the ``BLOCK_M`` query rows from ``start_m`` see (at least
    one); ``diag = seqlen_k - seqlen_q`` (bottom-right aligned causal mask)."""
    hi = seqlen_k
    if CAUSAL:
        hi = gl.maximum(gl.minimum(start_m + BLOCK_M + diag, seqlen_k), 0)
    return gl.maximum(gl.cdiv(hi, BLOCK_N), 1)


@gluon.jit
def flag_barriers(COUNT: gl.constexpr):
    """``COUNT`` one-arrival mbarriers, initialized (the loader's one-time loads)."""
    bars = gl.allocate_shared_memory(gl.int64, [COUNT, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(COUNT):
        mbarrier.init(bars.index(i), count=1)
    return bars


@gluon.jit
def ring_barriers(STAGES: gl.constexpr, CONSUMERS: gl.constexpr = 2):
    """The ring's mbarriers, initialized: ``(a_full, a_empty, b_full, b_empty)``, each
    ``STAGES`` long, the "empty" ones waiting for ``CONSUMERS`` arrivals."""
    a_full = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    a_empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    b_full = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    b_empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(STAGES):
        mbarrier.init(a_full.index(i), count=1)
        mbarrier.init(b_full.index(i), count=1)
        mbarrier.init(a_empty.index(i), count=CONSUMERS)
        mbarrier.init(b_empty.index(i), count=CONSUMERS)
    return a_full, a_empty, b_full, b_empty


# ``vector_descriptor``'s shared layout: its box is one row of at most 512 bytes, unswizzled.
VECTOR_LAYOUT = gl.NVMMASharedLayout(swizzle_byte_width=0, element_bitwidth=32, rank=3)


def vector_descriptor(x: torch.Tensor, rows: int) -> TensorDescriptor:
    """The TMA descriptor of a per-row fp32 vector ``x`` (B, H, S) such as lse, whose box is
    ``rows`` values of one head (values past S read as zeros). Needs every stride but the last
    a multiple of 4 and ``x`` 16-byte aligned (``vector_rows``); the Gluon twin of
    ``_common.vector_descriptor``, whose descriptors carry no shared layout."""
    return TensorDescriptor(x, list(x.shape), list(x.stride()), [1, 1, rows], VECTOR_LAYOUT)


def vector_rows(x: torch.Tensor) -> torch.Tensor:
    """``x`` (B, H, S) fp32 as ``vector_descriptor`` can read it: ``x`` itself where it is
    ``_common.vector_readable``; otherwise a copy in a (B, H, S rounded up to a multiple of 4)
    buffer, viewed (B, H, S)."""
    if vector_readable(x):
        return x
    padded = x.new_empty(*x.shape[:-1], ceil_div(x.shape[-1], 4) * 4)[..., :x.shape[-1]]
    return padded.copy_(x)


@gluon.jit
def load_vector(desc, b, h, row, bar, smem):
    """TMA copy of a ``vector_descriptor``'s box at batch entry ``b``, head ``h``, rows ``row``
    onwards (int32 each) into ``smem`` (rows,), completing on mbarrier ``bar``."""
    tma_load(desc, [b, h, row], bar, smem.reshape([1, 1, smem.shape[0]]))


@gluon.jit
def load_slot(t, b, row, h, a_desc, b_desc, a_smem, b_smem, a_full, a_empty, b_full, b_empty,
              a_vec=None, b_vec=None, a_vec_smem=None, b_vec_smem=None):
    """The loader's ``t``-th fill: batch entry ``b``'s rows ``row`` onwards of head ``h`` of
    ``a_desc`` and ``b_desc`` (``load_rows``) into slot ``t % STAGES``, each once every consumer
    has released it; with ``a_vec`` and ``b_vec`` (``vector_descriptor``s), their values for
    those rows into ``a_vec_smem`` and ``b_vec_smem`` (STAGES, rows), completing with the
    tiles."""
    STAGES: gl.constexpr = a_smem.shape[0]
    slot = t % STAGES
    phase = (t // STAGES) & 1
    mbarrier.wait(a_empty.index(slot), phase ^ 1)
    if a_vec is not None:
        mbarrier.expect(a_full.index(slot), a_desc.block_type.nbytes + a_vec.block_type.nbytes)
        load_vector(a_vec, b, h, row, a_full.index(slot), a_vec_smem.index(slot))
    else:
        mbarrier.expect(a_full.index(slot), a_desc.block_type.nbytes)
    load_rows(a_desc, b, row, h, a_full.index(slot), a_smem.index(slot))
    mbarrier.wait(b_empty.index(slot), phase ^ 1)
    if b_vec is not None:
        mbarrier.expect(b_full.index(slot), b_desc.block_type.nbytes + b_vec.block_type.nbytes)
        load_vector(b_vec, b, h, row, b_full.index(slot), b_vec_smem.index(slot))
    else:
        mbarrier.expect(b_full.index(slot), b_desc.block_type.nbytes)
    load_rows(b_desc, b, row, h, b_full.index(slot), b_smem.index(slot))


@gluon.jit
def release_slot(t, STAGES: gl.constexpr, a_full, a_empty, b_full, b_empty):
    """A consumer's ``t``-th slot, which it does not read (only another consumer's rows or
    keys see it): wait for it and hand it back."""
    mbarrier.wait(a_full.index(t % STAGES), (t // STAGES) & 1)
    mbarrier.arrive(a_empty.index(t % STAGES), count=1)
    mbarrier.wait(b_full.index(t % STAGES), (t // STAGES) & 1)
    mbarrier.arrive(b_empty.index(t % STAGES), count=1)

"""Pieces the forward and backward kernels share: the shift rule in log2 units, the visibility
mask, softcap's tanh, dropout's keep mask, and launcher helpers (layouts, autotune configs).

Everything inside a kernel works in base 2: scores ``s = S * log2(e)`` where ``S`` is the scaled
(and soft-capped) score in natural-log units, so ``exp(S - shift) == exp2(s - shift2)``.
"""

from __future__ import annotations

import contextlib
import functools
import os

import torch
import triton
import triton.language as tl
from triton.runtime import _allocation
from triton.tools.tensor_descriptor import TensorDescriptor

from . import _tuning
from ._ptxas import ptxas_for_compile

# Triton 3.9's interpreter returns garbage for bf16 tl.dot: cast dot operands to fp32 there.
INTERPRET = os.environ.get("TRITON_INTERPRET", "0") == "1"
# HF_STABLE_ATTN_AUTOTUNE=0 launches one heuristic config per shape (quick compiles, e.g. test sweeps).
AUTOTUNE = (not INTERPRET) and os.environ.get("HF_STABLE_ATTN_AUTOTUNE", "1") != "0"
# The tuner's picks are kept in Triton's cache directory (keyed by Triton's version, the kernel
# source, the GPU, the ptxas, the launch key and the candidates), so a later process launches the
# same configs without timing them again; HF_STABLE_ATTN_AUTOTUNE_CACHE=0 times them per process.
AUTOTUNE_CACHE = os.environ.get("HF_STABLE_ATTN_AUTOTUNE_CACHE", "1") != "0"
# HF_STABLE_ATTN_TMA=0 keeps the tables' TMA configs from running (docs/kernel_notes.md, v6g-v7b).
TMA = os.environ.get("HF_STABLE_ATTN_TMA", "1") != "0"
# Sequences shorter than this load through pointers: from 2048 on TMA measured -1% to +6.5% per
# shape (mean +3%); GPT-2 training at 1024 lost 7-13% end to end with it (kernel_notes.md, v7b).
TMA_MIN_SEQLEN = 2048
# Calls with neither a causal mask nor a window take TMA (and so the Gluon kernels) from this
# length: at 1024 and 1536 rows fwd+bwd measured 0-20% faster with it, at 512 mixed, and causal
# calls at 1024 up to 11% slower (one H200, D64 and D128, MHA and GQA 8:1; kernel_notes.md,
# session 47).
TMA_MIN_SEQLEN_UNMASKED = 1024

# Compile options every launch passes. FP fusion (multiply-adds: the scores' scale and shift,
# the rescaling) is Triton's default up to 3.9, which warns that 3.10 turns it off by default;
# pinned so a new Triton neither splits the kernels' FFMAs (slower, other rounding) nor warns.
COMPILE_OPTIONS = {"enable_fp_fusion": True}

LOG2E = 1.4426950408889634
LN2 = 0.6931471805599453


def release_below(version: str, release: tuple[int, int]) -> bool:
    """Whether ``version`` (e.g. Triton's ``"3.6.0"``, ``"3.10.1"``) is below ``release``
    (major, minor): the kernels' routes and builds that differ between Triton versions."""
    return tuple(int(x) for x in version.split(".")[:2]) < release


# PTX inline assembly where the kernels compile for an NVIDIA GPU (not under the interpreter).
PTX = tl.constexpr(not INTERPRET and torch.version.hip is None)
INTERPRET_C = tl.constexpr(INTERPRET)


def seeded_jit(fn):
    """``triton.jit`` for the three attention kernels: not specialized on their dropout ``seed``
    argument, a fresh random int per training call. Triton specializes ints on divisibility by 16
    by default, so one call in 16 would need a second variant of each kernel (a compile, or a
    load from the cache, in the middle of a training run). ``TiledLaunch`` still tells such
    seeds apart: the first one per process goes through Triton's launcher, which finds the same
    compiled kernel."""
    return triton.jit(fn, do_not_specialize=["seed"])


def runtime_ints_jit(kernel, names: tuple[str, ...]):
    """A second ``triton.jit`` of ``kernel``'s function (a ``seeded_jit`` one) that is not
    specialized on the int arguments ``names`` either. Triton compiles an int argument equal to 1
    as the constant 1 (a loop over such a count becomes straight code); that compile ran head
    dim 256's dK/dV slower (docs/kernel_notes.md, v43b). For ``TiledLaunch``'s ``variants``."""
    return triton.jit(kernel.fn, do_not_specialize=["seed", *names])


@triton.jit
def rounded(x, dtype: tl.constexpr):
    """fp32 ``x`` in ``dtype``, rounded to nearest even, as ``x.to(dtype)`` compiles on a GPU.
    Triton's interpreter (3.9) truncates fp32 -> bf16 casts instead, which put results a unit
    of the last place toward zero and turned probabilities just below 1 into 0.99609375; there
    the rounding is done on the bits (``bits + 0x7FFF + lowest kept bit``, then the top half)."""
    if INTERPRET_C and dtype == tl.bfloat16:
        bits = x.to(tl.uint32, bitcast=True)
        bits += 0x7FFF + ((bits >> 16) & 1)
        return (bits >> 16).to(tl.uint16).to(tl.bfloat16, bitcast=True)
    else:
        return x.to(dtype)


@triton.jit
def dot(a, b, DOT_FP32: tl.constexpr):
    """``a @ b`` with fp32 accumulation; fp32 operands under the interpreter."""
    if DOT_FP32:
        return tl.dot(a.to(tl.float32), b.to(tl.float32), input_precision="ieee")
    else:
        return tl.dot(a, b)


@triton.jit
def at_least(x, y):
    """1.0 where ``x >= y`` else 0.0 (fp32, ``y`` broadcast to ``x``'s shape): one
    ``set.ge.f32.f32`` per element on NVIDIA GPUs instead of a compare and a select (the tie
    count of ``flash_fwd``; docs/kernel_notes.md v6b, v8b)."""
    if PTX:
        return tl.inline_asm_elementwise("set.ge.f32.f32 $0, $1, $2;", "=r,r,r",
                                         [x, tl.broadcast_to(y, x.shape)], dtype=tl.float32,
                                         is_pure=True, pack=1)
    else:
        return tl.where(x >= y, 1.0, 0.0)


@triton.jit
def load_tile(ptrs, row_ok, d_ok, MASK_ROWS: tl.constexpr, EVEN_D: tl.constexpr,
              TRANSPOSED: tl.constexpr = False):
    """Load a (rows, BLOCK_D) tile ((BLOCK_D, rows) when TRANSPOSED), zero outside; masks
    only what may be out of range, so interior tiles of a power-of-two head dim load unmasked."""
    if TRANSPOSED:
        if MASK_ROWS:
            if EVEN_D:
                return tl.load(ptrs, mask=row_ok[None, :], other=0.0)
            else:
                return tl.load(ptrs, mask=row_ok[None, :] & d_ok[:, None], other=0.0)
        else:
            if EVEN_D:
                return tl.load(ptrs)
            else:
                return tl.load(ptrs, mask=d_ok[:, None], other=0.0)
    else:
        if MASK_ROWS:
            if EVEN_D:
                return tl.load(ptrs, mask=row_ok[:, None], other=0.0)
            else:
                return tl.load(ptrs, mask=row_ok[:, None] & d_ok[None, :], other=0.0)
        else:
            if EVEN_D:
                return tl.load(ptrs)
            else:
                return tl.load(ptrs, mask=d_ok[None, :], other=0.0)


@triton.jit
def tanh(x):
    """tanh that saturates to +-1 without NaN (no libdevice: the interpreter runs it too)."""
    return 1.0 - 2.0 / (tl.exp2(x * 2.8853900817779268) + 1.0)


@triton.jit
def reciprocal(x):
    """``1 / x`` as one ``rcp.approx.ftz.f32`` on NVIDIA GPUs (``/`` compiles to a range check,
    a scale and the reciprocal); plain division under the interpreter."""
    if PTX:
        return tl.inline_asm_elementwise("rcp.approx.ftz.f32 $0, $1;", "=r,r", [x],
                                         dtype=tl.float32, is_pure=True, pack=1)
    else:
        return 1.0 / x


@triton.jit
def tie_gap(m1, beta, min_gap, max_gap):
    """How far ``shift_rule.row_shift`` puts a tied row's shift above its finite running max
    ``m1``, in log2 units, (BLOCK_M,); the caller selects it for the tied rows (``flash_fwd``).

    ``max_gap * tanh(raw / max_gap)`` is written as ``max_gap - 2 max_gap / (e^(2 raw / max_gap)
    + 1)``, one exp2 and one reciprocal.
    """
    raw = tl.maximum((beta - 1.0) * m1, -m1)  # target - m1: (beta - 1) m1 if m1 > 0, else -m1
    e = tl.exp2(raw * (2.8853900817779268 / max_gap))  # e^(2 raw / max_gap)
    return tl.maximum(max_gap - (2.0 * max_gap) * reciprocal(e + 1.0), min_gap)


@triton.jit
def sequence_bounds(CU_Q, CU_K, b, seqlen_q_dense, seqlen_k_dense, IS_VARLEN: tl.constexpr):
    """``(q_start, seqlen_q, k_start, seqlen_k)`` of batch entry ``b``: its first row and length
    in the packed layout (``cu_seqlens``), or 0 and the dense lengths."""
    if IS_VARLEN:
        q_start = tl.load(CU_Q + b)
        k_start = tl.load(CU_K + b)
        return q_start, tl.load(CU_Q + b + 1) - q_start, k_start, tl.load(CU_K + b + 1) - k_start
    else:
        return 0, seqlen_q_dense, 0, seqlen_k_dense


# How many programs of a causal grid ``scheduled_tile`` groups (the launchers' ``GROUP_PROGRAMS``
# flag): about 1024 in the forward, 512 in the dQ and (D64 TMA configs only) the dK/dV, and at
# least 8 columns each. Session 14 (v17a, H100, one or two programs per SM) set groups of 8
# columns for the forward and dQ; since the register caps (v57a) the D64 forward runs 4-5 programs
# per SM, where groups of 8 left the last programs unbalanced (benchmarks/launch_order_sim.py).
# Session 71 timed forward + backward at each size on an H200 (docs/kernel_notes.md, v71a).
FWD_GROUP_PROGRAMS = 1024
DQ_GROUP_PROGRAMS = 512
DKDV_GROUP_PROGRAMS = 512
MIN_HEAD_GROUP = tl.constexpr(8)


@triton.jit
def scheduled_tile(BALANCE: tl.constexpr, GROUP_PROGRAMS: tl.constexpr):
    """``(tile, column)`` this program computes, in a grid of (query tiles, columns) programs
    (columns: batch x heads). Without BALANCE, ``(program_id(0), program_id(1))``. With BALANCE
    (a causal mask: the last query tiles see the most keys), the launch order (axis 0 fastest)
    walks the columns in groups of ``max(GROUP_PROGRAMS // query tiles, 8)`` and, within a
    group, every column's last tile first, then the one before: the longest programs start
    first and the short ones fill the end, and the programs running together read the K/V of a
    few heads from L2."""
    tile = tl.program_id(0)
    column = tl.program_id(1)
    if BALANCE:
        num_tiles = tl.num_programs(0)
        group = tl.maximum(GROUP_PROGRAMS // num_tiles, MIN_HEAD_GROUP)
        pid = column * num_tiles + tile
        first = (pid // (group * num_tiles)) * group
        size = tl.minimum(tl.num_programs(1) - first, group)
        rank = pid - first * num_tiles
        tile = num_tiles - 1 - rank // size
        column = first + rank % size
    return tile, column


@triton.jit
def key_tiles(start_m, seqlen_q, seqlen_k, window_left, window_right, HAS_WL: tl.constexpr,
              HAS_WR: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """The key tiles that query rows ``[start_m, start_m + BLOCK_M)`` see, as ``(lo, full_lo,
    full_hi, hi)``: ``[lo, full_lo)`` and ``[full_hi, hi)`` straddle a mask boundary (window
    edges, the sequence end; windows bottom-right aligned), ``[full_lo, full_hi)`` is visible
    to every row."""
    diag = seqlen_k - seqlen_q
    lo = 0
    hi = seqlen_k
    full_lo = 0
    full_hi = (seqlen_k // BLOCK_N) * BLOCK_N
    if HAS_WL:
        lo = (tl.maximum(start_m + diag - window_left, 0) // BLOCK_N) * BLOCK_N
        full_lo = tl.cdiv(tl.maximum(start_m + BLOCK_M - 1 + diag - window_left, 0), BLOCK_N) * BLOCK_N
    if HAS_WR:
        hi = tl.maximum(tl.minimum(start_m + BLOCK_M + diag + window_right, seqlen_k), 0)
        full_hi = tl.minimum(full_hi, (tl.maximum(start_m + diag + window_right + 1, 0) // BLOCK_N) * BLOCK_N)
    full_lo = tl.minimum(full_lo, hi)
    full_hi = tl.maximum(full_hi, full_lo)
    return lo, full_lo, full_hi, hi


# How the Triton kernels read the rows they stream (K and V in the forward and dQ, Q and dO in
# the dK/dV): ``tma_mode`` of the launch.
POINTER_LOADS = tl.constexpr(0)
# Packed sequences: a TMA descriptor per program, sequence and head, made on the device (rows
# past the sequence read as zeros, not as the next sequence's).
DEVICE_DESCRIPTORS = tl.constexpr(1)
# The dense layout: the launcher's descriptor over the whole (B, S, H, D) tensor
# (``row_descriptor``), so no program writes and fences one before its first copy.
HOST_DESCRIPTORS = tl.constexpr(2)


@triton.constexpr_function
def tma_mode(use_tma, is_varlen):
    """A kernel's ``TMA_MODE`` from its config's ``USE_TMA`` and its ``IS_VARLEN``."""
    if not use_tma:
        return POINTER_LOADS
    return DEVICE_DESCRIPTORS if is_varlen else HOST_DESCRIPTORS


def row_descriptor(x: torch.Tensor, rows: int, block_d: int) -> TensorDescriptor:
    """The ``HOST_DESCRIPTORS`` argument for ``x`` (B, S, H, D) (``tma_ready``: 16-byte aligned,
    D contiguous): a box of ``rows`` rows of one head, ``block_d`` wide (columns past D read as
    zeros, as do rows past S)."""
    return TensorDescriptor(x, list(x.shape), list(x.stride()), [1, rows, 1, block_d])


def vector_readable(x: torch.Tensor) -> bool:
    """Whether TMA can read a per-row vector ``x`` (B, H, S) of fp32 in place: contiguous, S %
    4 == 0 (every stride but the last a multiple of 16 bytes) and a 16-byte aligned base."""
    return x.is_contiguous() and x.shape[-1] % 4 == 0 and x.data_ptr() % 16 == 0


def vector_descriptor(x: torch.Tensor, rows: int) -> TensorDescriptor:
    """The ``HOST_DESCRIPTORS`` argument for a per-row fp32 vector ``x`` (B, H, S) such as lse,
    where ``vector_readable(x)``: a box of ``rows`` values of one head (values past S read as
    zeros)."""
    return TensorDescriptor(x, list(x.shape), list(x.stride()), [1, 1, rows])


@triton.jit
def head_sources(A, B, b, head, start, stride_ab, stride_ah, stride_as, stride_bb, stride_bh,
                 stride_bs, seqlen, head_dim, BLOCK: tl.constexpr, BLOCK_D: tl.constexpr,
                 TMA_MODE: tl.constexpr):
    """``row_source``s of one head's rows in two (B, S, H, D)-strided tensors ``A`` and ``B``
    (K and V, or Q and dO; ``row_descriptor``s with HOST_DESCRIPTORS): head ``head`` of batch
    entry ``b``, from row ``start`` (the sequence's first row in the packed layout),
    ``seqlen`` rows."""
    if TMA_MODE == HOST_DESCRIPTORS:
        return (A, b, head), (B, b, head)
    else:
        b64 = b.to(tl.int64)
        start64 = tl.cast(start, tl.int64)
        a_rows = A + b64 * stride_ab + head * stride_ah + start64 * stride_as
        b_rows = B + b64 * stride_bb + head * stride_bh + start64 * stride_bs
        return (row_source(a_rows, seqlen, head_dim, stride_as, BLOCK, BLOCK_D, TMA_MODE),
                row_source(b_rows, seqlen, head_dim, stride_bs, BLOCK, BLOCK_D, TMA_MODE))


@triton.jit
def row_source(base, seqlen, head_dim, stride, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr,
               TMA_MODE: tl.constexpr):
    """What a kernel loads (BLOCK_N, BLOCK_D) tiles of one sequence's rows of K, V, Q or dO
    from through pointers or DEVICE_DESCRIPTORS: a TMA descriptor over ``[seqlen, head_dim]``
    at ``base``, or ``base`` itself for pointer loads."""
    if TMA_MODE == DEVICE_DESCRIPTORS:
        return tl.make_tensor_descriptor(base, shape=[seqlen, head_dim], strides=[stride, 1],
                                         block_shape=[BLOCK_N, BLOCK_D])
    else:
        return base


@triton.jit
def runs_range(lo, hi, TMA_MODE: tl.constexpr):
    """Whether a kernel enters its tile loop over ``[lo, hi)``: with TMA loads only where the
    range holds a tile (an empty pipelined loop still sets up its copies and barriers; skipping
    it ran the D64 causal backward 1-6% faster on an H200 under Triton 3.6), through pointers
    always (the same guard there ran it 9-12% slower; docs/kernel_notes.md, session 76)."""
    if TMA_MODE == POINTER_LOADS:
        return True
    else:
        return lo < hi


@triton.jit
def load_rows(src, start, rows, row_ok, stride, offs_d, d_ok, MASK_ROWS: tl.constexpr,
              EVEN_D: tl.constexpr, TMA_MODE: tl.constexpr, TRANSPOSED: tl.constexpr = False):
    """A (BLOCK, BLOCK_D) tile ((BLOCK_D, BLOCK) when TRANSPOSED) of rows ``start`` onwards of
    a ``head_sources`` source: through its TMA descriptor (with HOST_DESCRIPTORS, the tuple
    (descriptor, batch entry, head)), else from pointers ``src + rows * stride`` (``rows``: the
    int64 row indices, ``row_ok``: which are in range), masked as ``load_tile`` does."""
    if TMA_MODE != POINTER_LOADS:
        if TMA_MODE == HOST_DESCRIPTORS:
            box = src[0].load([src[1], start, src[2], 0])
            tile = box.reshape(rows.shape[0], offs_d.shape[0])
        else:
            tile = src.load([start, 0])
        if TRANSPOSED:
            return tl.trans(tile)
        else:
            return tile
    else:
        if TRANSPOSED:
            return load_tile(src + rows[None, :] * stride + offs_d[:, None], row_ok, d_ok,
                             MASK_ROWS, EVEN_D, True)
        else:
            return load_tile(src + rows[:, None] * stride + offs_d[None, :], row_ok, d_ok,
                             MASK_ROWS, EVEN_D)


@triton.jit
def visible(rows, col0, cols, seqlen_q, seqlen_k, window_left, window_right,
            HAS_WL: tl.constexpr, HAS_WR: tl.constexpr, TRANSPOSED: tl.constexpr = False):
    """Bool (R, C): row ``rows[i]`` sees column ``col0 + cols[j]`` (``cols`` a ``tl.arange``),
    rows queries and columns keys, or with TRANSPOSED rows keys and columns queries
    (bottom-right aligned window, both inside their sequences). A row's visible columns are
    one interval, its bounds counted from ``col0``: one compare a score and bound."""
    diag = seqlen_k - seqlen_q
    if TRANSPOSED:  # key n, query c: c < seqlen_q, n - diag - wr <= c <= n - diag + wl
        hi = tl.where(rows < seqlen_k, seqlen_q - 1, -1)
        if HAS_WL:
            hi = tl.minimum(hi, rows - diag + window_left)
        lo = rows - diag - window_right
        HAS_LO: tl.constexpr = HAS_WR
    else:  # query i, key c: c < seqlen_k, i + diag - wl <= c <= i + diag + wr
        hi = tl.where(rows < seqlen_q, seqlen_k - 1, -1)
        if HAS_WR:
            hi = tl.minimum(hi, rows + diag + window_right)
        lo = rows + diag - window_left
        HAS_LO: tl.constexpr = HAS_WL
    ok = cols[None, :] <= (hi - col0)[:, None]
    if HAS_LO:
        ok = ok & (cols[None, :] >= (lo - col0)[:, None])
    return ok


@triton.jit
def scores(qk, qk_scale, softcap, HAS_SOFTCAP: tl.constexpr):
    """Raw ``q @ k^T`` (fp32) -> scores in log2 units; ``qk_scale`` already holds log2(e)
    unless softcap is on (then ``S = c * tanh(qk * scale / c)`` first)."""
    if HAS_SOFTCAP:
        return tanh(qk * (qk_scale / softcap)) * (softcap * 1.4426950408889634)
    else:
        return qk * qk_scale


@triton.jit
def scores_unscaled(qk, qk_scale, softcap, HAS_SOFTCAP: tl.constexpr):
    """Raw ``q @ k^T`` (fp32) -> ``(s, s_scale)`` with ``s * s_scale`` the scores in log2 units
    (``s_scale > 0``): ``qk`` itself and ``qk_scale``, or the soft-capped scores and 1."""
    if HAS_SOFTCAP:
        return scores(qk, qk_scale, softcap, True), 1.0
    else:
        return qk, qk_scale


@triton.jit
def keep_mask(seed, dropout_p, b, h, num_heads_q, max_seqlen_q, max_seqlen_k, offs_m, offs_n,
              TRANSPOSED: tl.constexpr = False):
    """Bool (BLOCK_M, BLOCK_N) (or transposed): ``tl.rand(seed, ((b*Hq + h)*max_sq + i)*max_sk
    + j) >= p``, the counter of ``hf_stable_attn.dropout``."""
    row = (b.to(tl.int64) * num_heads_q + h) * max_seqlen_q + offs_m.to(tl.int64)
    if TRANSPOSED:
        offs = row[None, :] * max_seqlen_k + offs_n.to(tl.int64)[:, None]
    else:
        offs = row[:, None] * max_seqlen_k + offs_n.to(tl.int64)[None, :]
    return tl.rand(seed, offs) >= dropout_p


# Tiles under the interpreter (small: it runs every program in Python).
INTERPRET_CONFIG = (16, 16, 4, 1)


def tile_config(entry) -> tuple[int, int, int, int, bool, int | None]:
    """A table entry ``(BLOCK_M, BLOCK_N, num_warps, num_stages[, use_tma[, maxnreg]])`` with
    the TMA flag spelled out (False when absent) and the register cap per thread (None when
    absent: ptxas chooses)."""
    bm, bn, w, s, *rest = entry
    return bm, bn, w, s, bool(rest and rest[0]), rest[1] if len(rest) > 1 else None


def _descriptor_scratch(size: int, alignment: int, stream) -> torch.Tensor:
    return torch.empty(size, dtype=torch.int8, device="cuda")


def tma_ready(seqlen: int, *tensors: torch.Tensor, windowed: bool = True) -> bool:
    """Whether the TMA configs may run on these bf16/fp16 (B, S, H, D) or (T, H, D) tensors
    whose longest sequence is ``seqlen``: unless turned off (``HF_STABLE_ATTN_TMA=0``), never
    under the interpreter (triton 3.9's mis-loads bf16 through descriptors), from
    ``TMA_MIN_SEQLEN`` on (``TMA_MIN_SEQLEN_UNMASKED`` for a call that is not ``windowed``:
    neither a causal mask nor a window), on a GPU with TMA (``has_tma``), and with 16-byte
    aligned bases, strides and rows (multiples of 8 elements), none of them 0 (a broadcast
    dimension, e.g. ``expand``ed heads, which the descriptors over whole tensors would have to
    encode, untested: such calls load through pointers). The Triton kernels build packed
    sequences' descriptors on the device (``DEVICE_DESCRIPTORS``), which needs Triton's scratch
    allocator: set here for the calling thread (the autograd engine's threads included) unless
    one is set."""
    least = TMA_MIN_SEQLEN if windowed else TMA_MIN_SEQLEN_UNMASKED
    if INTERPRET or not TMA or seqlen < least or not has_tma(tensors[0].device):
        return False
    if not all(t.data_ptr() % 16 == 0 and t.shape[-1] % 8 == 0
               and all(st % 8 == 0 and st > 0 for st in t.stride()[:-1]) for t in tensors):
        return False
    ensure_allocator()
    return True


def nvidia_capability(device: torch.device) -> tuple[int, int] | None:
    """``(major, minor)`` compute capability of an NVIDIA GPU; None for a CPU device or under
    ROCm, whose capabilities number AMD's architectures (gfx90a as 9.0)."""
    if device.type != "cuda" or torch.version.hip is not None:
        return None
    return torch.cuda.get_device_capability(device)


@functools.lru_cache(maxsize=None)
def has_tma(device: torch.device) -> bool:
    """Whether ``device`` is an NVIDIA GPU with the Tensor Memory Accelerator: compute
    capability 9.0 (Hopper) or later. Triton compiles tensor descriptors for older GPUs too,
    through plain loads, which no run here has timed or checked; they take the pointer configs
    instead."""
    capability = nvidia_capability(device)
    return capability is not None and capability[0] >= 9


def ensure_allocator() -> None:
    """Set Triton's scratch allocator (for descriptors built on the device) for the calling
    thread unless one is set."""
    if isinstance(_allocation._allocator.get(), _allocation.NullAllocator):
        triton.set_allocator(_descriptor_scratch)


def specialization(args) -> tuple:
    """What Triton specializes a compiled kernel on, per launch argument: a tensor's dtype and
    16-byte alignment; an int's 32-bit range, whether it is 1 and whether 16 divides it; a
    float's type only. Launches with equal tuples (same kernel, flags and config) run the same
    compiled kernel. (Ints, most of the arguments, are tested first: it runs on every launch.)"""
    return tuple(
        (a == 1, a % 16 == 0, -0x80000000 <= a <= 0x7FFFFFFF) if type(a) is int
        else (a.dtype, a.data_ptr() % 16 == 0) if isinstance(a, torch.Tensor)
        else (a.base.dtype, tuple(a.block_shape)) if hasattr(a, "block_shape")  # TMA descriptor
        else type(a)
        for a in args
    )


_COMPILED: dict = {}


def launch_compiled(kernel, grid: tuple, args: tuple, constexprs: dict, **options) -> None:
    """``kernel[grid](*args, **constexprs, **options)`` on the current device and stream (that of
    ``args[0]``, a tensor or a TMA descriptor), through Triton's JIT only on the first call per
    kernel, device, argument ``specialization``, compile-time arguments and options: later calls
    run the compiled kernel that call returned. ``constexprs`` and ``options`` must name all of
    ``kernel``'s compile-time parameters. For the Gluon kernels, whose TMA descriptor arguments
    the JIT specializes in Python, its path took 17-38 us more host time per launch on the GPU
    machine (docs/kernel_notes.md, session 56)."""
    device = getattr(args[0], "base", args[0]).device
    key = (kernel, device, specialization(args), *constexprs.values(), *options.values())
    entry = _COMPILED.get(key)
    if entry is None:
        compiled = kernel[grid](*args, **constexprs, **options)
        if compiled is not None:  # None: a stand-in kernel (tests)
            named = {**constexprs, **options}
            _COMPILED[key] = (compiled, tuple(named[p.name] for p in kernel.params
                                              if p.is_constexpr))
    else:
        compiled, values = entry
        compiled[(*grid, 1, 1)[:3]](*args, *values)


_SAME_DEVICE = contextlib.nullcontext()


def on_device_of(t: torch.Tensor):
    """A context in which ``t``'s CUDA device is the current one. Triton launches on the current
    device, and a model spread over GPUs (``device_map``) calls with tensors on the others, where
    a launch reads another GPU's memory unsynchronized (garbage, or an illegal-address error).
    Nothing to do where ``t``'s device is already current (the usual case: one cheap check)."""
    index = t.device.index
    if index is None or index == torch.cuda.current_device():
        return _SAME_DEVICE
    return torch.cuda.device(index)


class TiledLaunch:
    """Launches ``kernel`` with a tile config (``tile_config``) from ``table`` (padded head dim
    -> configs, best first): ``INTERPRET_CONFIG`` under the interpreter, the table's first
    entry with autotuning off (its first pointer-load entry where TMA cannot address the
    tensors), else the candidate that ``_tuning.time_rounds`` finds fastest for ``key`` (or an
    earlier process found, from Triton's cache directory). Entries that do not fit the GPU
    (the tables were chosen on Hopper GPUs; others have less shared memory per block) are
    passed over in both modes, and where none fits the call raises ``_tuning.NoConfigFits``,
    which names the GPU and what to use instead.

    Host time per launch is what a small model's step or a decode step notices, so only the
    first call per key is tuned, and only the first call per key, tile config and argument
    ``specialization`` goes through Triton's launcher (which re-derives the specialization of
    every argument); later calls launch the compiled kernel it returned. ``key`` must determine
    the candidates and their relative speed (ours hold the sequence bucket, head dim, group size,
    dtype and every flag). The kernel's compile-time parameters must follow its runtime ones
    (``args``), as in all ours. The launches that may compile run under
    ``_ptxas.ptxas_for_compile``. ``last`` is the config of the latest call (None before
    the first), which benchmarks record beside their timings. ``variants`` (padded head dim ->
    kernel) names another compile of ``kernel``'s function that those head dims launch instead
    (``runtime_ints_jit``). ``picked_by`` says per launch key how ``tune`` chose: "timed" (this
    process's medians in ``timings``), "disk cache" or "one candidate". ``descriptors``
    (argument name -> the tile meta-parameter that is its box's rows) names the (B, S, H, D)
    tensors that a TMA config in the dense layout reads through ``row_descriptor``s
    (``tma_mode``): ``launch`` makes them per config; ``vector_descriptors`` the same for
    (B, H, S) fp32 vectors read through ``vector_descriptor``s, where the flag ``VECTOR_TMA``
    is set as well.
    """

    def __init__(self, kernel, table, variants=None, descriptors=None, vector_descriptors=None):
        self.kernel, self.table = kernel, table
        self.variants = variants or {}
        self.chosen, self.compiled, self.timings, self.picked_by = {}, {}, {}, {}
        self.unfit = set()  # (config, padded head dim, device) that did not fit, autotuning off
        self.last = None
        params = getattr(kernel, "params", [])
        first = next((i for i, p in enumerate(params) if p.is_constexpr), len(params))
        if not all(p.is_constexpr for p in params[first:]):
            raise TypeError(f"{kernel}: compile-time parameters must come last")
        self.constexprs = [p.name for p in params[first:]]
        names = getattr(kernel, "arg_names", None) or [p.name for p in params]  # interpreter's
        self.descriptors = tuple((names.index(name), rows)
                                 for name, rows in (descriptors or {}).items())
        self.vector_descriptors = tuple((names.index(name), rows)
                                        for name, rows in (vector_descriptors or {}).items())

    def __call__(self, grid, block_d, key, args, flags, tma_ok=False):
        """Launch on ``grid`` (a function of the config's meta-parameters), on the device of
        ``args[0]`` (a tensor); ``tma_ok``: whether TMA configs may address these tensors
        (``tma_ready``). Returns the compiled kernel it ran with config ``last`` (None under
        the interpreter)."""
        if INTERPRET:
            self.last = tile_config(INTERPRET_CONFIG)
            return self.launch(grid, key, args, flags, self.last, block_d)
        with on_device_of(args[0]):
            if not AUTOTUNE:
                return self.launch_first_fitting(grid, block_d, key, args, flags, [
                    c for c in map(tile_config, self.table[block_d]) if tma_ok or not c[4]])
            config = self.chosen.get(key)
            if config is None:
                try:
                    config = self.tune(grid, block_d, key, args, flags, tma_ok)
                except _tuning.DOES_NOT_FIT as exc:  # none of the candidates fits
                    raise _tuning.NoConfigFits(self.kernel_for(block_d), block_d,
                                               args[0].device) from exc
                self.chosen[key] = config
            self.last = config
            return self.launch(grid, key, args, flags, config, block_d)

    def launch_first_fitting(self, grid, block_d, key, args, flags, configs):
        """Launch with the first of ``configs`` that fits the GPU (those that did not are
        remembered in ``unfit``), as ``launch`` does; ``NoConfigFits`` where none does."""
        error = None
        for config in configs:
            if (config, block_d, args[0].device) in self.unfit:
                continue
            try:
                compiled = self.launch(grid, key, args, flags, config, block_d)
            except _tuning.DOES_NOT_FIT as exc:
                self.unfit.add((config, block_d, args[0].device))
                error = exc
                continue
            self.last = config
            return compiled
        raise _tuning.NoConfigFits(self.kernel_for(block_d), block_d, args[0].device) from error

    def kernel_for(self, block_d: int | None):
        """The kernel that launches for padded head dim ``block_d``."""
        return self.variants.get(block_d, self.kernel)

    def tune(self, grid, block_d, key, args, flags, tma_ok) -> tuple:
        """The config ``key`` launches with: the only candidate, the pick saved on disk, or the
        fastest in interleaved rounds on these arguments (then saved, unless
        ``AUTOTUNE_CACHE`` is off; this process's timings stay in ``timings[key]``)."""
        configs = _tuning.candidates([tile_config(c) for c in self.table[block_d]], tma_ok)
        if len(configs) == 1:
            self.picked_by[key] = "one candidate"
            return configs[0]
        device = torch.cuda.get_device_name(args[0].device)
        kernel = self.kernel_for(block_d)
        pick = _tuning.load_pick(kernel, key, configs, device) if AUTOTUNE_CACHE else None
        self.picked_by[key] = "timed" if pick is None else "disk cache"
        if pick is None:
            self.timings[key] = _tuning.time_rounds(configs, lambda c: functools.partial(
                self.launch, grid, key, args, flags, c, block_d=block_d))
            pick = (_tuning.save_pick(kernel, key, configs, device, self.timings[key])
                    if AUTOTUNE_CACHE else min(self.timings[key], key=self.timings[key].get))
        return pick

    def launch(self, grid, key, args, flags, config, block_d=None):
        """One launch with ``config`` (a ``tile_config`` tuple) of ``kernel_for(block_d)``;
        returns the compiled kernel it ran (None under the interpreter). ``key`` must tell the
        head dims apart (the compiled kernels are kept by it)."""
        meta = tile_meta(config)
        if INTERPRET:
            self.kernel_for(block_d)[grid](*args, **flags, **meta)
            return None
        exact = (key, config, args[0].device, specialization(args))
        compiled = self.compiled.get(exact)
        named = {**flags, **meta}
        launched = with_descriptors(args, self.descriptor_slots(named))
        if compiled is None:
            with ptxas_for_compile():
                compiled = self.compiled[exact] = self.kernel_for(block_d)[grid](
                    *launched, **named)
        else:
            runner, values = self.bound(compiled, grid, named)
            runner(*launched, *values)
        return compiled

    def descriptor_slots(self, named) -> tuple:
        """``(argument index, box rows, box width)`` of the arguments that launch as
        ``row_descriptor``s at the compile-time values ``named`` (flags and tile
        meta-parameters): ``descriptors`` for a TMA config in the dense layout, none otherwise
        (pointer loads, or descriptors the kernel makes per packed sequence); and, with
        ``VECTOR_TMA`` set, ``vector_descriptors`` as ``vector_descriptor``s (box width
        None)."""
        if not self.descriptors or not named["USE_TMA"] or named["IS_VARLEN"]:
            return ()
        vectors = self.vector_descriptors if named.get("VECTOR_TMA") else ()
        return (*((index, named[rows], named["BLOCK_D"]) for index, rows in self.descriptors),
                *((index, named[rows], None) for index, rows in vectors))

    def bound(self, compiled, grid, named) -> tuple:
        """``(runner, values)`` for a compiled kernel of this launcher: ``runner(*args,
        *values)`` launches it on ``grid`` evaluated at ``named`` (its flags and tile
        meta-parameters), whose compile-time values are ``values``, on the current stream."""
        return (compiled[(*grid(named), 1, 1)[:3]],
                tuple(named[name] for name in self.constexprs))


def with_descriptors(args, slots: tuple):
    """``args`` with the tensors at ``TiledLaunch.descriptor_slots`` ``slots`` replaced by their
    ``row_descriptor``s (``vector_descriptor``s where the box width is None); ``args`` itself
    where there are none."""
    if not slots:
        return args
    args = list(args)
    for index, rows, block_d in slots:
        args[index] = (vector_descriptor(args[index], rows) if block_d is None
                       else row_descriptor(args[index], rows, block_d))
    return args


def register_cap(config) -> dict:
    """The launch option of a ``tile_config`` tuple's register cap: ``{"maxnreg": cap}``, or
    none where the entry has no cap (ptxas chooses)."""
    return {"maxnreg": config[5]} if config[5] else {}


def tile_meta(config) -> dict:
    """A ``tile_config`` tuple as the kernels' tile meta-parameters and launch options."""
    bm, bn, w, s, tma, _ = config
    return dict(BLOCK_M=bm, BLOCK_N=bn, num_warps=w, num_stages=s, USE_TMA=tma,
                **COMPILE_OPTIONS, **register_cap(config))


def ceil_div(a: int, b: int) -> int:
    """``ceil(a / b)`` for positive ints, in the launchers' host code: ``triton.cdiv`` is a
    constexpr function whose wrapper took ~5 us per call (docs/kernel_notes.md, v11)."""
    return -(-a // b)


@functools.lru_cache(maxsize=None)
def sm_count(device: torch.device) -> int:
    """Streaming multiprocessors of a CUDA device; 1 elsewhere (the interpreter)."""
    if device.type != "cuda":
        return 1
    return torch.cuda.get_device_properties(device).multi_processor_count


def next_power_of_2(n: int) -> int:
    """The smallest power of two >= ``n`` (``n`` >= 1): ``triton.next_power_of_2`` without its
    constexpr-function wrapper (~3 us per call)."""
    return 1 << (n - 1).bit_length()


def block_d(head_dim: int) -> int:
    """Head dim padded to a power of two, at least 16 (tl.dot's minimum)."""
    return max(16, next_power_of_2(head_dim))


def seq_bucket(n: int) -> int:
    """Autotune key for a sequence length: its power-of-two bucket, capped (no retune per length)."""
    return min(next_power_of_2(max(int(n), 1)), 8192)


def seq_layout(x: torch.Tensor, varlen: bool) -> tuple[int, int, int]:
    """(stride_batch, stride_seq, stride_head) of a (B, S, H, D) or packed (T, H, D) tensor."""
    strides = x.stride()
    if varlen:
        return 0, strides[0], strides[1]
    return strides[0], strides[1], strides[2]


def lse_layout(lse: torch.Tensor, varlen: bool) -> tuple[int, int]:
    """(stride_batch, stride_head) of lse (B, H, S) or packed (H, T)."""
    strides = lse.stride()
    if varlen:
        return 0, strides[0]
    return strides[0], strides[1]


def check_grid(batch: int, heads: int) -> None:
    """The grid's second axis is batch * heads, which CUDA caps at 65535."""
    if batch * heads > 65535:
        raise ValueError(
            f"batch * heads = {batch * heads} exceeds 65535 (CUDA grid limit); split the batch"
        )


def key_mask_args(mask: torch.Tensor | None, batch: int, seqlen_k: int, varlen: bool,
                  unused: torch.Tensor) -> tuple[torch.Tensor, int, bool]:
    """The kernels' ``(KPM, stride_kpm, HAS_KPM)`` for a key padding mask (B, Sk) (bool or
    integer, nonzero = attend): its uint8 rows, their stride and True; without a mask, the
    pointer ``unused`` (never read), 0 and False. Raises for the packed layout or a wrong shape."""
    if mask is None:
        return unused, 0, False
    if varlen:
        raise ValueError("key_padding_mask is for the dense layout; packed sequences have no padding")
    if tuple(mask.shape) != (batch, seqlen_k):
        raise ValueError(f"key_padding_mask must be (batch, seqlen_k) = ({batch}, {seqlen_k}), "
                         f"got {tuple(mask.shape)}")
    mask = mask.view(torch.uint8) if mask.dtype == torch.bool else (mask != 0).view(torch.uint8)
    mask = mask if mask.stride(-1) == 1 else mask.contiguous()
    return mask, mask.stride(0), True


def last_dim_contiguous(x: torch.Tensor) -> torch.Tensor:
    return x if x.stride(-1) == 1 else x.contiguous()

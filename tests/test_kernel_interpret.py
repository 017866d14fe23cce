"""The Triton kernels under ``TRITON_INTERPRET=1`` on small shapes (CPU, CI).

Triton decides at import time whether ``@triton.jit`` functions (its own ``tl.rand`` included)
are interpreted, so these tests need a process whose environment had ``TRITON_INTERPRET=1``
before triton was imported. In any other process (the whole suite in one pytest run, or the GPU
machine) the module runs one test that re-runs this file in a child pytest with the variable set.

Each case compares the kernel with ``hf_stable_attn.reference`` (same numerics: differences of a
rounding step at most) and with a float64 oracle under the flash-attention rule (forward <= 2x,
gradients <= 3x the same-dtype plain PyTorch error). The interpreter runs 16x16 tiles, so 40 keys
span three tiles and ties can be split across tiles.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys

import pytest
import torch

INTERPRETING = os.environ.get("TRITON_INTERPRET") == "1"


@pytest.mark.skipif(INTERPRETING, reason="already in the interpreter process")
def test_interpreter_suite_in_child_process():
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", __file__, "-q", "-x", "-m", "not gpu", "-p", "no:cacheprovider"],
        env=env, capture_output=True, text=True, timeout=900,
    )
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-3000:]


interp = pytest.mark.skipif(not INTERPRETING, reason="runs in the TRITON_INTERPRET=1 child")

if INTERPRETING:
    pytest.importorskip("triton")
    import triton
    import triton.language as tl

    from hf_stable_attn.kernels import flash_attn_bwd, flash_attn_fwd
    from hf_stable_attn.kernels._common import scheduled_tile

    @triton.jit
    def order_kernel(SEEN, BALANCE: tl.constexpr, GROUP_PROGRAMS: tl.constexpr):
        """SEEN (columns, tiles, 2) int32: per (tile, column) of ``scheduled_tile``, how many
        programs computed it and the launch index of the last one."""
        tile, column = scheduled_tile(BALANCE, GROUP_PROGRAMS)
        launch = tl.program_id(1) * tl.num_programs(0) + tl.program_id(0)
        cell = SEEN + (column * tl.num_programs(0) + tile) * 2
        tl.atomic_add(cell, 1)
        tl.store(cell + 1, launch)

from hf_stable_attn.dropout import keep_mask  # noqa: E402
from hf_stable_attn.reference import reference_backward, reference_forward  # noqa: E402
from hf_stable_attn.shift_rule import row_shift, shift_params  # noqa: E402
from hf_stable_attn.testing import (  # noqa: E402
    attention_oracle, check_flash_rule, max_error, oracle_with_grads,
)


def _masking(**kw):
    base = dict(cu_seqlens_q=None, cu_seqlens_k=None, max_seqlen_q=None, max_seqlen_k=None,
                softmax_scale=None, causal=False, window_left=-1, window_right=-1, softcap=0.0,
                dropout_p=0.0, seed=0, key_padding_mask=None)
    base.update(kw)
    return base


def _kernel_args(q, k, m):
    m = dict(m)
    if m["cu_seqlens_q"] is None:
        m["max_seqlen_q"], m["max_seqlen_k"] = q.shape[1], k.shape[1]
    if m["softmax_scale"] is None:
        m["softmax_scale"] = q.shape[-1] ** -0.5
    return m


def run_kernel(q, k, v, m, params, return_shift=False):
    return flash_attn_fwd(
        q, k, v, **_kernel_args(q, k, m), stabilize=params.stabilize, beta=params.beta,
        tie_window=params.tie_window, min_gap=params.min_gap, max_gap=params.max_gap,
        shift_single=params.shift_single, return_shift=return_shift,
    )


def run_kernel_bwd(dout, q, k, v, out, lse, m):
    return flash_attn_bwd(dout, q, k, v, out, lse, **_kernel_args(q, k, m), deterministic=True)


def _inputs(shape_q, shape_k, dtype=torch.bfloat16, seed=0):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(shape_q, generator=g).to(dtype)
    k = torch.randn(shape_k, generator=g).to(dtype)
    v = torch.randn(shape_k, generator=g).to(dtype)
    return q, k, v


def _ulp_tol(ref: torch.Tensor) -> float:
    """Two rounding steps of the dtype at the tensor's scale (the kernel and the reference
    sum in different orders, so a value may land one step apart)."""
    eps = torch.finfo(ref.dtype).eps
    return 2 * eps * max(ref.float().abs().max().item(), 1e-3)


def check_vs_reference(q, k, v, m, params):
    """Forward of kernel and reference agree to a rounding step; returns both (out, lse)."""
    out, lse = run_kernel(q, k, v, m, params)
    ref_out, ref_lse = reference_forward(q, k, v, **m, shift=params, block_n=16)
    assert not torch.isnan(out).any() and not torch.isnan(lse).any()
    assert max_error(out, ref_out) <= _ulp_tol(ref_out)
    finite = torch.isfinite(ref_lse)
    assert torch.equal(finite, torch.isfinite(lse))
    if finite.any():  # rows that see no key have lse +inf in both
        assert max_error(lse[finite], ref_lse[finite]) <= 1e-5 * (1 + ref_lse[finite].abs().max().item())
    return (out, lse), (ref_out, ref_lse)


def check_case(q, k, v, m, params=None, grads=True, seed=1):
    """Kernel vs reference (tight) and vs the float64 oracle (flash-attention rule)."""
    params = params or shift_params(q.dtype)
    (out, lse), (ref_out, ref_lse) = check_vs_reference(q, k, v, m, params)
    oracle = dict(m)
    exact = attention_oracle(q, k, v, **oracle)
    plain = attention_oracle(q, k, v, **oracle, compute_dtype=q.dtype)
    check_flash_rule("out", out, plain, exact, 2.0, slack=1e-3)
    if not grads:
        return out, lse
    dout = torch.randn(q.shape, generator=torch.Generator().manual_seed(seed)).to(q.dtype)
    dq, dk, dv = run_kernel_bwd(dout, q, k, v, out, lse, m)
    rq, rk, rv = reference_backward(dout, q, k, v, ref_out, ref_lse, **m, block_n=16)
    for name, got, ref in (("dq", dq, rq), ("dk", dk, rk), ("dv", dv, rv)):
        assert not torch.isnan(got).any(), name
        assert max_error(got, ref) <= 2 * _ulp_tol(ref), name

    _, exact_g = oracle_with_grads(q, k, v, dout, torch.float64, **oracle)
    _, plain_g = oracle_with_grads(q, k, v, dout, q.dtype, **oracle)
    for name, got, pl, ex in zip(("dq", "dk", "dv"), (dq, dk, dv), plain_g, exact_g):
        check_flash_rule(name, got, pl, ex, 3.0, slack=2e-3)
    return out, lse


@interp
@pytest.mark.parametrize("hk,causal", [(4, False), (2, True), (1, True)], ids=["mha", "gqa-causal", "mqa-causal"])
def test_dense_tails_gqa(hk, causal):
    q, k, v = _inputs((2, 37, 4, 24), (2, 45, hk, 24))
    check_case(q, k, v, _masking(causal=causal))


@interp
@pytest.mark.parametrize("hk,splits,causal", [(2, 3, True), (1, 2, False), (1, 4, True)],
                         ids=["gqa-split3", "mqa-split2", "mqa-split4"])
def test_dkdv_with_the_group_split_over_programs(monkeypatch, hk, splits, causal):
    """Each KV head's query heads split over ``splits`` dK/dV programs (fp32 partials summed
    afterwards) give the same gradients as the reference, dense and packed. (The unsplit path
    is ``test_dense_tails_gqa``'s; this interpreter truncates fp32 -> bf16 where a GPU rounds to
    nearest, so unsplit results here carry up to one more bf16 step than split ones.)"""
    from hf_stable_attn.kernels import flash_bwd

    monkeypatch.setattr(flash_bwd, "group_splits", lambda programs, group, sms: splits)
    heads_q = 6 if hk == 2 else 4
    q, k, v = _inputs((2, 37, heads_q, 16), (2, 45, hk, 16), seed=splits)
    check_case(q, k, v, _masking(causal=causal))
    cu = torch.tensor([0, 20, 37], dtype=torch.int32)
    cu_k = torch.tensor([0, 25, 45], dtype=torch.int32)
    check_case(q[0], k[0], v[0], _masking(cu_seqlens_q=cu, cu_seqlens_k=cu_k, max_seqlen_q=20,
                                          max_seqlen_k=25, causal=causal))


@interp
@pytest.mark.parametrize("balance,programs", [(True, 0), (True, 30), (False, 0)],
                         ids=["balanced", "balanced-30", "grid-order"])
@pytest.mark.parametrize("tiles,columns", [(3, 21), (5, 16), (1, 7), (4, 1)])
def test_scheduled_tile_covers_the_grid_once_heaviest_first(balance, tiles, columns, programs):
    """Every (tile, column) of the grid is computed by exactly one program; with BALANCE the
    launch order runs each group of ``max(programs // tiles, 8)`` columns last (heaviest) tile
    first (21 columns of 3 tiles in groups of 8: two full groups and one of 5; in groups of 10:
    two full and one of 1)."""
    seen = torch.zeros(columns, tiles, 2, dtype=torch.int32)
    order_kernel[(tiles, columns)](seen, BALANCE=balance, GROUP_PROGRAMS=programs)
    assert (seen[..., 0] == 1).all()
    launch = seen[..., 1]  # (columns, tiles): when each program started
    if not balance:
        assert torch.equal(launch.flatten(), torch.arange(tiles * columns, dtype=torch.int32))
        return
    group = max(programs // tiles, 8)
    for first in range(0, columns, group):
        block = launch[first:first + group].flip(1)  # one group, heaviest tile first
        assert torch.equal(block.T.flatten(), torch.arange(
            first * tiles, (first + block.shape[0]) * tiles, dtype=torch.int32))


@interp
def test_causal_over_more_columns_than_a_head_group():
    """A causal grid of 3 x 7 = 21 columns (one full group of the balanced launch order and one
    partial) and three query tiles, forward and backward."""
    q, k, v = _inputs((3, 37, 7, 16), (3, 37, 7, 16), seed=21)
    check_case(q, k, v, _masking(causal=True))


@interp
@pytest.mark.parametrize("sq,sk", [(19, 40), (40, 19), (1, 33)])
def test_causal_q_len_differs(sq, sk):
    """Bottom-right alignment; (40, 19) has rows that see no key (out 0, lse +inf)."""
    q, k, v = _inputs((2, sq, 4, 16), (2, sk, 2, 16), seed=sq)
    out, lse = check_case(q, k, v, _masking(causal=True))
    if sq > sk:
        dead = sq - sk
        assert torch.isinf(lse[:, :, :dead]).all() and (lse[:, :, :dead] > 0).all()
        assert (out[:, :dead] == 0).all()


@interp
@pytest.mark.parametrize("causal", [True, False], ids=["causal", "full"])
def test_key_padding_mask(causal):
    """Keys masked out by a (B, Sk) padding mask are never attended, in any tile: left padding,
    holes, a tail (a static cache's unfilled rows) and a row with no key at all (out 0)."""
    q, k, v = _inputs((4, 21, 4, 16), (4, 45, 2, 16), seed=13)
    mask = torch.ones(4, 45, dtype=torch.bool)
    mask[0, :19] = False  # left padding across two tiles
    mask[1, 3:7] = False
    mask[1, 30:] = False  # a hole and an unfilled tail
    mask[2, ::3] = False  # a hole in every tile
    mask[3] = False  # nothing to attend
    out, _ = check_case(q, k, v, _masking(causal=causal, key_padding_mask=mask))
    assert (out[3] == 0).all()
    flipped = mask.clone()
    flipped[0, 5] = True  # one more visible key must change the result
    changed, _ = run_kernel(q, k, v, _masking(causal=causal, key_padding_mask=flipped),
                            shift_params(q.dtype))
    assert not torch.equal(changed[0], out[0])


@interp
def test_fully_masked_rows_give_zero_gradients():
    q, k, v = _inputs((1, 40, 2, 16), (1, 19, 2, 16), seed=7)
    m = _masking(causal=True)
    params = shift_params(q.dtype)
    out, lse = run_kernel(q, k, v, m, params)
    dq, dk, dv = run_kernel_bwd(torch.ones_like(q), q, k, v, out, lse, m)
    assert torch.isfinite(dq).all() and torch.isfinite(dk).all() and torch.isfinite(dv).all()
    assert (dq[:, :21] == 0).all()


@interp
def test_probabilities_round_to_nearest_as_on_the_gpu():
    """Causal with a window of 0: each row sees one key, so its recomputed ``P`` is 1 up to the
    fp32 rounding of ``exp2(s - lse)`` and rounds to 1.0 in bf16, as on a GPU: the output is V
    and dV is dO, bit for bit. (Triton's interpreter truncates fp32 -> bf16 casts; a ``P`` just
    below 1 became 0.99609375 there until the kernels rounded through ``_common.rounded``.)"""
    q, k, v = _inputs((1, 46, 2, 24), (1, 51, 2, 24), seed=3)
    q = (q.float() * 12).to(q.dtype)  # scores of size 10-50: lse's rounding is not exact
    m = _masking(causal=True, window_left=0)
    out, lse = run_kernel(q, k, v, m, shift_params(q.dtype))
    assert torch.equal(out, v[:, 5:])
    dout = torch.randn(q.shape, generator=torch.Generator().manual_seed(4)).to(q.dtype)
    _, _, dv = run_kernel_bwd(dout, q, k, v, out, lse, m)
    assert torch.equal(dv[:, 5:], dout) and (dv[:, :5] == 0).all()


def _window_softcap_fp16_case():
    """(q, k, v, masking): a two-sided window and a softcap, fp16."""
    q, k, v = _inputs((2, 33, 2, 32), (2, 41, 2, 32), dtype=torch.float16, seed=3)
    return q, k, v, _masking(window_left=9, window_right=4, softcap=5.0)


def _packed_case():
    """(q, k, v, masking): four packed causal sequences (one of a single row), GQA, padded D."""
    lens_q, lens_k = [5, 17, 1, 30], [9, 17, 20, 30]
    cu_q = torch.tensor([0] + torch.tensor(lens_q).cumsum(0).tolist(), dtype=torch.int32)
    cu_k = torch.tensor([0] + torch.tensor(lens_k).cumsum(0).tolist(), dtype=torch.int32)
    q, k, v = _inputs((sum(lens_q), 4, 40), (sum(lens_k), 2, 40), seed=11)
    return q, k, v, _masking(cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, max_seqlen_q=30,
                             max_seqlen_k=30, causal=True)


def _dropout_case():
    """(q, k, v, masking): causal GQA with dropout."""
    q, k, v = _inputs((1, 35, 4, 16), (1, 35, 2, 16), seed=5)
    return q, k, v, _masking(dropout_p=0.2, seed=99, causal=True)


@interp
def test_window_softcap_fp16():
    check_case(*_window_softcap_fp16_case())


@interp
def test_varlen_matches_reference_and_oracle():
    check_case(*_packed_case())


def _rows_first_cases():
    """(q, k, v, masking) per feature the rows-first dK/dV tiles handle on their own."""
    mask = torch.ones(2, 45, dtype=torch.bool)
    mask[0, :19] = False
    mask[1, 3:7] = False
    return {
        "gqa-causal-tails": (*_inputs((2, 37, 4, 24), (2, 45, 2, 24)), _masking(causal=True)),
        "keyless-rows": (*_inputs((2, 40, 4, 16), (2, 19, 2, 16), seed=40),
                         _masking(causal=True)),
        "window-softcap-fp16": _window_softcap_fp16_case(),
        "padding-mask": (*_inputs((2, 21, 4, 16), (2, 45, 2, 16), seed=13),
                         _masking(causal=True, key_padding_mask=mask)),
        "packed-padded-d": _packed_case(),
        "dropout": _dropout_case(),
    }


@interp
@pytest.mark.parametrize("case", list(_rows_first_cases()))
def test_dkdv_scores_rows_first(monkeypatch, case):
    """The dK/dV tiles that compute the scores rows first (on a GPU head dim 256's 128-row
    tiles, ``flash_bwd._ROWS_FIRST_MIN_M``), forced here on every head dim and the
    interpreter's 16-row tiles, match the reference and the oracle under each feature."""
    from hf_stable_attn.kernels import flash_bwd

    monkeypatch.setattr(flash_bwd, "_ROWS_FIRST_MIN_M", {d: 16 for d in (16, 32, 64, 128, 256)})
    q, k, v, m = _rows_first_cases()[case]
    check_case(q, k, v, m)


@interp
def test_dropout_mask_is_the_reference_mask():
    """With V = identity rows, out[i, j] != 0 exactly where key j was kept."""
    b, h, s, p, seed = 2, 2, 32, 0.3, 1234
    q = (0.1 * torch.randn(b, s, h, 32)).to(torch.bfloat16)
    k = (0.1 * torch.randn(b, s, h, 32)).to(torch.bfloat16)
    v = torch.eye(32).expand(b, h, s, 32).transpose(1, 2).contiguous().to(torch.bfloat16)
    m = _masking(dropout_p=p, seed=seed)
    out, _ = run_kernel(q, k, v, m, shift_params(q.dtype))
    kept = (out != 0).transpose(1, 2)  # (b, h, i, j)
    expected = keep_mask(seed, p, b, h, s, s)
    assert torch.equal(kept, expected)
    rate = kept.float().mean().item()
    assert abs(rate - (1 - p)) < 4 * math.sqrt(p * (1 - p) / kept.numel())


@interp
def test_dropout_forward_backward_match_reference():
    check_case(*_dropout_case())


@interp
def test_stabilize_false_matches_reference():
    q, k, v = _inputs((1, 37, 2, 16), (1, 45, 2, 16), seed=8)
    check_case(q, k, v, _masking(), params=shift_params(q.dtype, stabilize=False), grads=False)


def _tied_inputs(positions, sq=24, sk=40, d=16, scale_up=3.0):
    """Rows whose largest score repeats exactly at the keys ``positions`` (bf16 inputs)."""
    g = torch.Generator().manual_seed(21)
    u = torch.randn(d, generator=g)
    q = (0.3 * torch.randn(1, sq, 1, d, generator=g) + u).to(torch.bfloat16)
    k = (0.3 * torch.randn(1, sk, 1, d, generator=g)).to(torch.bfloat16)
    for j in positions:
        k[0, j, 0] = (scale_up * u).to(torch.bfloat16)
    v = torch.randn(1, sk, 1, d, generator=g).to(torch.bfloat16)
    return q, k, v


def _p_max(q, k, shift, scale):
    """Largest bf16(exp(S - shift)) per row, S in fp32 as the kernel computes it."""
    s = (q[0, :, 0].float() @ k[0, :, 0].float().T) * scale
    return torch.exp(s - shift[0, 0][:, None]).to(torch.bfloat16).float().max(-1).values


@interp
@pytest.mark.parametrize("positions", [(3, 9), (5, 29), (2, 17, 33)], ids=["one-tile", "two-tiles", "three-tiles"])
def test_structural_no_p_rounds_to_one_on_tied_rows(positions):
    q, k, v = _tied_inputs(positions)
    m = _masking()
    scale = q.shape[-1] ** -0.5
    s = (q[0, :, 0].float() @ k[0, :, 0].float().T) * scale
    top = s.topk(2, -1).values
    assert (top[:, 0] == top[:, 1]).all() and (top[:, 0] > 0).all(), "construction must tie"

    _, _, shift = run_kernel(q, k, v, m, shift_params(q.dtype), return_shift=True)
    assert (_p_max(q, k, shift, scale) < 1.0).all()
    _, _, ref_shift = reference_forward(q, k, v, shift=shift_params(q.dtype), return_shift=True)
    assert max_error(shift, ref_shift) <= 1e-5 * (1 + ref_shift.abs().max().item())

    _, _, plain_shift = run_kernel(q, k, v, m, shift_params(q.dtype, stabilize=False), return_shift=True)
    assert (_p_max(q, k, plain_shift, scale) == 1.0).all()
    # Rows this peaked are where the shift's rounded P (vs the unrounded l) costs up to 2^-9
    # relative in the output, so the flash-attention rule is not the yardstick here: the
    # reference is (and dQ is dominated by delta's cancellation on two equal keys).
    check_vs_reference(q, k, v, m, shift_params(q.dtype))


def _scored(values_a, values_b, sk=40):
    """One query row whose scores (softmax_scale 1) are ``values_a[j] + values_b[j]`` exactly."""
    q = torch.zeros(1, 1, 1, 16, dtype=torch.bfloat16)
    q[..., 0] = 1
    q[..., 1] = 1
    k = torch.zeros(1, sk, 1, 16, dtype=torch.bfloat16)
    k[0, :, 0, 0] = torch.tensor(values_a, dtype=torch.bfloat16)
    k[0, :, 0, 1] = torch.tensor(values_b, dtype=torch.bfloat16)
    v = torch.randn(1, sk, 1, 16, generator=torch.Generator().manual_seed(2)).to(torch.bfloat16)
    return q, k, v


@interp
@pytest.mark.parametrize("gap", [1.0e-3, 1.8e-3, "0.5w", "0.95w", "1.5w", "3w"])
def test_near_ties_across_tiles_use_the_dtype_window(gap):
    """Max 2.0 at key 4, runner-up 2 - gap at key 35 (another tile): tied iff gap <= window.

    1e-3 and 1.8e-3 lie inside bf16's rounding window (exp(-gap) rounds to 1.0 for
    gap < -ln(1 - 2^-9) = 1.955e-3), so they must count as ties; "Nw" are multiples of the
    window ``shift_params`` derives.
    """
    params = shift_params(torch.bfloat16)
    if isinstance(gap, str):
        gap = float(gap[:-1]) * params.tie_window
    a = [0.5] * 40
    b = [0.0] * 40
    a[4], a[35] = 2.0, 2.0
    b[35] = -gap
    q, k, v = _scored(a, b)
    actual_gap = -k[0, 35, 0, 1].float().item()
    tied = actual_gap <= params.tie_window
    assert tied or gap > 1.955e-3
    m = _masking(softmax_scale=1.0)
    _, _, shift = run_kernel(q, k, v, m, params, return_shift=True)
    _, _, ref_shift = reference_forward(q, k, v, **m, shift=params, return_shift=True)
    assert max_error(shift, ref_shift) <= 1e-5
    expected = row_shift(torch.tensor(2.0), torch.tensor(2.0 - actual_gap), params).item()
    assert (expected > 2.0) == tied
    assert shift.item() == pytest.approx(expected, abs=1e-5)
    check_case(q, k, v, m, grads=False)


@interp
def test_large_row_max_beta8_no_underflow():
    """m1 ~ 100 with beta 8: the gap (beta - 1) * m1 = 700 stays under the soft max_gap
    ceiling, no NaN, no zero row."""
    a = [10.0] * 40
    a[7], a[30] = 100.0, 100.0
    q, k, v = _scored(a, [0.0] * 40)
    m = _masking(softmax_scale=1.0)
    params = shift_params(q.dtype, beta=8.0)
    out, lse, shift = run_kernel(q, k, v, m, params, return_shift=True)
    assert torch.isfinite(out).all() and torch.isfinite(lse).all()
    expected = row_shift(torch.tensor(100.0), torch.tensor(100.0), params).item()
    assert 100.0 + 0.99 * params.max_gap < expected <= 100.0 + params.max_gap
    assert shift.item() == pytest.approx(expected, abs=1e-4)
    assert lse.item() == pytest.approx(100.0 + math.log(2.0), abs=1e-4)
    expected = (v[0, 7, 0].float() + v[0, 30, 0].float()) / 2
    assert max_error(out[0, 0, 0], expected) <= 2e-2
    check_vs_reference(q, k, v, m, params)
    grads = run_kernel_bwd(torch.randn_like(q), q, k, v, out, lse, m)
    assert all(torch.isfinite(g).all() for g in grads)


@interp
def test_benchmark_records_the_tiles_each_kernel_launched():
    """``bench_attention.with_tiles`` adds to a record the tile config of each kernel the call
    launched: the forward's and both backward kernels', then (after them) the forward's alone."""
    import hf_stable_attn
    from benchmarks.bench_attention import Entry, with_tiles
    from hf_stable_attn.kernels._common import INTERPRET_CONFIG, tile_config

    q, k, v = (t.requires_grad_() for t in _inputs((1, 20, 2, 16), (1, 20, 2, 16)))

    def prepared(backward):
        out = hf_stable_attn.flash_attn_func(q, k, v, causal=True, backend="triton")
        if backward:
            out.float().sum().backward()
        return Entry({"impl": "stable_flash"})

    tiles = list(tile_config(INTERPRET_CONFIG))
    assert with_tiles(lambda: prepared(True)).record == {
        "impl": "stable_flash", "tile_fwd": tiles, "tile_dq": tiles, "tile_dkdv": tiles}
    assert with_tiles(lambda: prepared(False)).record == {"impl": "stable_flash",
                                                          "tile_fwd": tiles}


@interp
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("splits", [2, 3, 4])
def test_group_split_partials_are_summed_in_fp32_in_order_and_rounded_once(dtype, splits):
    """``flash_bwd.sum_partials`` (one Triton pass; 6432 elements: a partial last block). fp16:
    bit-exact against the in-order fp32 sum rounded once. bf16: one of the two bf16 neighbours
    of that sum (the interpreter rounds fp32 to bf16 toward zero; the GPU to nearest even, which
    tests/gpu checks bit-exactly)."""
    from hf_stable_attn.kernels import flash_bwd

    partials = torch.randn(splits, 3, 67, 2, 16, generator=torch.Generator().manual_seed(splits))
    out = flash_bwd.sum_partials(partials, dtype)
    expected = partials[0].clone()
    for partial in partials[1:]:
        expected += partial
    assert out.dtype == dtype and out.is_contiguous() and out.shape == expected.shape
    if dtype == torch.float16:
        assert torch.equal(out, expected.to(dtype))
    else:
        nearest = expected.to(dtype)
        other = torch.where(nearest.float().abs() > expected.abs(),
                            torch.nextafter(nearest, torch.zeros_like(nearest)),
                            torch.nextafter(nearest, nearest.sign() * float("inf")))
        assert ((out == nearest) | (out == other)).all()
    # Rounding each partial first (what torch.sum(..., out=out) does) gives other values.
    assert not torch.equal(out, partials.to(dtype).float().sum(0).to(dtype))


@interp
@pytest.mark.parametrize("dropout_p", [0.0, 0.25], ids=["no-dropout", "dropout"])
def test_the_dq_kernel_sums_p_dp_in_fp32(dropout_p):
    """``p_dp_out`` receives each row's ``rowsum(P * dP)`` (what attention sinks' gradient
    takes): the reference backward's to fp32 rounding, and (without dropout) float64's
    ``rowsum(dout * out)`` closer than the same sum from the bf16 output. Causal GQA with
    Sq > Sk: the first rows see no key and get 0."""
    q, k, v = _inputs((1, 37, 4, 16), (1, 29, 2, 16), seed=4)
    dout = torch.randn(q.shape, generator=torch.Generator().manual_seed(5)).to(q.dtype)
    m = _masking(causal=True, dropout_p=dropout_p, seed=11)
    out, lse = run_kernel(q, k, v, m, shift_params(q.dtype))
    p_dp, ref_p_dp = torch.empty_like(lse), torch.empty_like(lse)
    flash_attn_bwd(dout, q, k, v, out, lse, **_kernel_args(q, k, m), p_dp_out=p_dp)
    reference_backward(dout, q, k, v, out, lse, **m, p_dp_out=ref_p_dp)
    assert max_error(p_dp, ref_p_dp) <= 1e-5 * ref_p_dp.abs().max().item()
    assert torch.equal(p_dp[..., :8], torch.zeros_like(p_dp[..., :8]))  # rows 0-7 see no key
    if dropout_p == 0.0:
        exact = (dout.double() * attention_oracle(q, k, v, causal=True)).sum(-1).transpose(1, 2)
        from_bf16_out = (dout.float() * out.float()).sum(-1).transpose(1, 2)
        assert max_error(p_dp, exact) < max_error(from_bf16_out, exact) / 4


@interp
@pytest.mark.parametrize("packed", [False, True], ids=["dense", "packed"])
def test_the_forward_folds_sinks_as_the_reference_does(packed):
    """The forward kernel's epilogue fold of attention sinks against ``reference_forward``'s
    (``sinks.fold_sinks`` on fp32 values): out to a rounding step, lse to fp32 rounding, for
    sinks far above the rows' scores (all weight on the sink: no overflow, out near 0), far
    below (no change) and in between; causal GQA with Sq > Sk, so rows that see no key keep
    out 0 and lse +inf. The kernel gets the sinks as a strided view."""
    q, k, v = _inputs((2, 30, 4, 24), (2, 22, 2, 24), seed=6)
    sinks = torch.tensor([60.0, -60.0, 1.5, -0.5]).to(torch.bfloat16)
    strided = torch.stack([sinks, -sinks], 1)[:, 0]
    m = _masking(causal=True)
    if packed:
        cu_q, cu_k = (torch.tensor([0, n, 2 * n], dtype=torch.int32) for n in (30, 22))
        q, k, v = (t.flatten(0, 1) for t in (q, k, v))
        m = _masking(cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, max_seqlen_q=30, max_seqlen_k=22,
                     causal=True)
    params = shift_params(q.dtype)
    out, lse = flash_attn_fwd(q, k, v, **_kernel_args(q, k, m), stabilize=True, beta=params.beta,
                              tie_window=params.tie_window, min_gap=params.min_gap,
                              max_gap=params.max_gap, sinks=strided)
    ref_out, ref_lse = reference_forward(q, k, v, **m, shift=params, block_n=16, sinks=sinks)
    plain_out, _ = run_kernel(q, k, v, m, params)
    assert not torch.isnan(out).any() and not torch.isnan(lse).any()
    assert max_error(out, ref_out) <= _ulp_tol(ref_out)
    finite = torch.isfinite(ref_lse)
    assert torch.equal(finite, torch.isfinite(lse)) and (~finite).sum() > 0
    assert max_error(lse[finite], ref_lse[finite]) <= 1e-5 * (1 + ref_lse[finite].abs().max())
    heads = -2
    assert out.select(heads, 0).abs().max() < 1e-20  # the 60 sink takes all the weight
    # -60: the kernel without sinks' output, but for the rounding of a division against
    # that of a multiply by the reciprocal
    assert max_error(out.select(heads, 1), plain_out.select(heads, 1)) <= _ulp_tol(plain_out) / 2
    assert max_error(out.select(heads, 2), plain_out.select(heads, 2)) > 0.05


@interp
def test_sinks_through_the_kernels_meet_the_flash_rule():
    """Attention sinks through the Triton kernels (``hf_stable_attn.sinks``): output and
    gradients, the sinks' included, against the float64 oracle; causal GQA with Sq > Sk, so the
    first rows see no key, and 20 keys over two tiles."""
    import hf_stable_attn
    from test_sinks import check_against_oracle

    g = torch.Generator().manual_seed(8)
    q, k, v, dout = (torch.randn(*shape, generator=g).to(torch.bfloat16) for shape in
                     ((1, 27, 4, 16), (1, 20, 2, 16), (1, 20, 2, 16), (1, 27, 4, 16)))
    sinks = (2.0 * torch.randn(4, generator=g)).to(torch.bfloat16)
    ours = [t.clone().requires_grad_() for t in (q, k, v, sinks)]
    out = hf_stable_attn.flash_attn_func(*ours[:3], causal=True, s_aux=ours[3], backend="triton")
    assert torch.equal(out[:, :7], torch.zeros_like(out[:, :7]))
    check_against_oracle(ours, out, dout, lambda q, k, v, s, dtype: attention_oracle(
        q, k, v, causal=True, sinks=s, compute_dtype=dtype), (q, k, v, sinks))


def _gpu_script(name: str, monkeypatch):
    """The script ``gpu/<name>.py`` loaded as a module (``gpu/`` is no package), in
    ``sys.modules`` for the test (a dataclass there looks its module up)."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parent.parent / "gpu" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, name, module)
    spec.loader.exec_module(module)
    return module


@interp
def test_fuzz_script_flags_wrong_gradients(monkeypatch, tmp_path):
    """``gpu/fuzz_kernels.py`` on tiny drawn cases: the kernels leave nothing outside its known
    class of misses (a case drawn as the Hopper routes' calls included), a record names the
    parts a Gluon kernel ran (none under the interpreter; the forward where its launcher
    recorded the Gluon forward's config), and gradients 2% off are all outside the class (the
    run's exit status 1)."""
    import json
    import random

    fuzz = _gpu_script("fuzz_kernels", monkeypatch)
    args = ["--device", "cpu", "--max-len", "24", "--max-cases", "3", "--seed", "5",
            "--slack", "2e-3", "--out", str(tmp_path / "fuzz.json")]
    assert fuzz.main(args) == 0
    summary = json.loads((tmp_path / "fuzz.json").read_text())["summary"]
    assert summary["cases"] == 3 and summary["gluon_cases"] == 0
    hopper = fuzz.draw_hopper_case(random.Random(7), 24)  # the Gluon routes' kind of call
    assert (not hopper.packed and not hopper.key_padding and hopper.head_dim in (64, 128)
            and hopper.window_left == hopper.window_right == -1 and hopper.softcap == 0.0
            and hopper.dropout_p == 0.0 and hopper.lens_q[0] == 24)
    record = fuzz.run_case(hopper, 7, "cpu", 2e-3)
    assert record["ok"] and record["gluon"] == []  # the interpreter runs the Triton kernels
    kernel_fwd = fuzz.flash_attn_fwd

    def as_if_gluon_forward(*a, **kw):
        result = kernel_fwd(*a, **kw)
        fuzz.LAUNCHES["fwd"].last = (192, 128, 16, 2, True)  # the D64 Gluon forward's record
        return result
    monkeypatch.setattr(fuzz, "flash_attn_fwd", as_if_gluon_forward)
    assert fuzz.run_case(hopper, 7, "cpu", 2e-3)["gluon"] == ["fwd"]
    monkeypatch.setattr(fuzz, "flash_attn_fwd", kernel_fwd)
    kernel_bwd = fuzz.flash_attn_bwd
    monkeypatch.setattr(fuzz, "flash_attn_bwd",
                        lambda *a, **kw: tuple(g * 1.02 for g in kernel_bwd(*a, **kw)))
    assert fuzz.main(args) == 1
    summary = json.loads((tmp_path / "fuzz.json").read_text())["summary"]
    assert summary["failed"] == summary["outside_known_class"] == 3


@interp
def test_forward_bits_script_finds_a_changed_bit_and_only_that(monkeypatch, tmp_path):
    """``gpu/forward_bits.py`` on tiny drawn cases: two saves of the same tree compare equal;
    a forward whose outputs move by one bf16 step at one place is found on exactly the output
    tensors it moved (its lse untouched), with the exit status 1."""
    import json

    monkeypatch.setenv("HF_STABLE_ATTN_AUTOTUNE", "0")  # as the script sets it, undone after
    bits = _gpu_script("forward_bits", monkeypatch)
    save = ["save", "--device", "cpu", "--max-len", "24", "--cases", "3", "--no-near-tie"]
    a, b, moved = (str(tmp_path / f"{n}.safetensors") for n in ("a", "b", "moved"))
    bits.main([*save, "--out", a])
    bits.main([*save, "--out", b])
    assert bits.main(["compare", a, b, "--out", str(tmp_path / "same.json")]) == 0
    kernel_fwd = bits.flash_attn_fwd

    def one_step_off(*args, **kwargs):
        out, lse = kernel_fwd(*args, **kwargs)
        out = out.clone()
        out.view(-1)[0] = torch.nextafter(out.view(-1)[0], torch.tensor(9.0, dtype=out.dtype))
        return out, lse
    monkeypatch.setattr(bits, "flash_attn_fwd", one_step_off)
    bits.main([*save, "--out", moved])
    report_path = tmp_path / "moved.json"
    assert bits.main(["compare", a, moved, "--out", str(report_path)]) == 1
    report = json.loads(report_path.read_text())
    assert report["compared"] == 6
    assert [d["tensor"] for d in report["differ"]] == [f"drawn{i}.out" for i in range(3)]
    assert all(d["elements"] == 1 for d in report["differ"])


@interp
def test_tma_threshold_script_times_each_variant_and_restores_the_launchers(monkeypatch,
                                                                            tmp_path):
    """``gpu/tma_threshold_ab.py`` on a tiny shape: a timed record per variant, equal results
    (the interpreter never takes TMA, so every variant runs the same kernels), and the
    launchers' own ``tma_ready`` back in place afterwards."""
    import json

    from hf_stable_attn.kernels import _common, flash_bwd, flash_fwd

    script = _gpu_script("tma_threshold_ab", monkeypatch)
    out = tmp_path / "ab.json"
    script.main(["--device", "cpu", "--seqlens", "16", "--head-dims", "16", "--kv-groups", "1",
                 "--causal", "false", "--total-tokens", "16", "--hidden", "16", "--rounds", "1",
                 "--variants", "pointer", "shipped", "tma", "--out", str(out)])
    records = {r["impl"]: r for r in json.loads(out.read_text())["records"]}
    for name in ("pointer", "shipped", "tma"):
        assert records[name]["ms"] > 0 and records[name]["rel_diff_vs_first"] == 0.0
    assert flash_fwd.tma_ready is _common.tma_ready and flash_bwd.tma_ready is _common.tma_ready


@interp
def test_packed_rows_in_no_sequence_through_the_kernels():
    """``test_functional.check_rows_in_no_sequence`` with the Triton kernels."""
    from test_functional import check_rows_in_no_sequence

    check_rows_in_no_sequence("triton")

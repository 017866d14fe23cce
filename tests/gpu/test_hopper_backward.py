"""The Gluon dK/dV of ``kernels/flash_bwd_hopper.py`` on an sm_90 GPU (``pytest -m gpu``): the
calls it covers reach it through ``flash_attn_bwd`` and meet the float64 rule for gradients;
the calls it does not cover, and head dim 64 (measured slower), take the Triton kernel."""

from __future__ import annotations

import pytest
import torch

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available()
                       or torch.cuda.get_device_capability() != (9, 0), reason="needs an sm_90 GPU"),
]

if torch.cuda.is_available():
    from hf_stable_attn.kernels import LAUNCHES, clear_plans, flash_attn_bwd, flash_attn_fwd
    from hf_stable_attn.kernels import _common, flash_bwd, flash_bwd_hopper, flash_fwd_hopper

from hf_stable_attn.shift_rule import shift_params  # noqa: E402
from hf_stable_attn.testing import (  # noqa: E402
    attention_oracle, check_flash_rule, fix_kwargs, launch_kwargs,
)

CASES = [  # batch, Sq, Sk, Hq, Hk, D, dtype, causal, (B, H, S, D) layout, no group split
    (1, 2048, 2048, 4, 4, 128, torch.bfloat16, False, False, False),
    (2, 2100, 2100, 8, 1, 128, torch.float16, True, False, False),
    (2, 2100, 2100, 8, 2, 64, torch.bfloat16, True, False, True),
    (1, 3000, 2048, 2, 2, 128, torch.bfloat16, True, True, False),  # rows that see no key
    (1, 2048, 3000, 2, 2, 64, torch.bfloat16, True, False, False),
    (1, 2500, 2171, 4, 2, 64, torch.float16, False, True, True),
    # Without a mask TMA starts at TMA_MIN_SEQLEN_UNMASKED (1024) rows.
    (2, 1100, 1300, 4, 2, 128, torch.bfloat16, False, False, False),
    (1, 1024, 1024, 8, 1, 64, torch.float16, False, True, True),
    # Query rows not a multiple of 4: lse and delta copied into padded rows for their TMA.
    (1, 2051, 2051, 4, 4, 128, torch.bfloat16, True, False, False),
    (2, 1027, 1100, 4, 2, 64, torch.float16, False, False, False),
]


def _case_id(case) -> str:
    """A ``CASES`` entry's test id: shape, heads, dtype, mask and layout."""
    batch, sq, sk, hq, hk, d, dtype, causal, heads_outer, _ = case
    return (f"{sq}x{sk}-h{hq}:{hk}-d{d}-{str(dtype)[6:]}{'-causal' if causal else ''}"
            f"{'-bhsd' if heads_outer else ''}")


def _inputs(batch, sq, sk, hq, hk, d, dtype, heads_outer, seed):
    """q, k, v, dout; with ``heads_outer`` views of (B, H, S, D) tensors, as Transformers'
    attention interface passes them."""
    g = torch.Generator(device="cuda").manual_seed(seed)

    def draw(s, h):
        shape = (batch, h, s, d) if heads_outer else (batch, s, h, d)
        t = torch.randn(*shape, device="cuda", dtype=dtype, generator=g)
        return t.transpose(1, 2) if heads_outer else t
    return draw(sq, hq), draw(sk, hk), draw(sk, hk), draw(sq, hq)


def _exact_and_plain(q, k, v, dout, kw):
    grads = []
    for compute_dtype in (torch.float64, q.dtype):
        leaves = [t.detach().clone().requires_grad_() for t in (q, k, v)]
        attention_oracle(*leaves, **kw, compute_dtype=compute_dtype).backward(
            dout.to(compute_dtype))
        grads.append([t.grad for t in leaves])
    return grads


@pytest.mark.parametrize("case", CASES,
                         ids=lambda c: _case_id(c) + ("-whole-group" if c[9] else ""))
def test_covered_calls_take_the_gluon_dkdv_and_meet_the_float64_rule(case, monkeypatch):
    *shape, dtype, causal, heads_outer, whole_group = case
    q, k, v, dout = _inputs(*shape, dtype, heads_outer, seed=sum(shape))
    kw = launch_kwargs(q.shape[1], k.shape[1], q.shape[-1], causal=causal)
    out, lse = flash_attn_fwd(q, k, v, **kw, **fix_kwargs(shift_params(dtype)))
    if whole_group:  # one program sums every query head of its group
        monkeypatch.setattr(flash_bwd_hopper, "PROGRAMS_PER_SM", {False: 0, True: 0})
    monkeypatch.setattr(flash_bwd_hopper, "FASTER",  # the kernel at any length
                        {(d, c, g): 0 for d in (64, 128) for c in (False, True)
                         for g in (False, True)})
    LAUNCHES["dkdv"].last = LAUNCHES["dq"].last = None
    grads = flash_attn_bwd(dout, q, k, v, out, lse, **kw)
    d = q.shape[-1]
    assert LAUNCHES["dkdv"].last == flash_bwd_hopper.tile_record(d)
    assert ((LAUNCHES["dq"].last == flash_bwd_hopper.dq_tile_record(d))
            == ((d, causal) in flash_bwd_hopper.DQ_FASTER))
    exact, plain = _exact_and_plain(q, k, v, dout, kw)
    for name, got, p, e in zip(("dq", "dk", "dv"), grads, plain, exact):
        check_flash_rule(name, got, p, e, 3.0)


@pytest.mark.parametrize("case", CASES, ids=_case_id)
def test_the_triton_dkdv_on_the_same_calls_meets_the_float64_rule(case, monkeypatch):
    """The Triton dK/dV (``FASTER`` emptied) on the same calls: TMA loads and, under Triton
    before 3.9, ``lse`` and ``delta`` through descriptors where S % 4 == 0
    (``flash_bwd.vector_tma_ok``), whose copies past the last query row read zeros that the
    masked tiles replace, through pointers otherwise; most cases end inside a query tile."""
    *shape, dtype, causal, heads_outer, _ = case
    q, k, v, dout = _inputs(*shape, dtype, heads_outer, seed=sum(shape) + 1)
    kw = launch_kwargs(q.shape[1], k.shape[1], q.shape[-1], causal=causal)
    out, lse = flash_attn_fwd(q, k, v, **kw, **fix_kwargs(shift_params(dtype)))
    monkeypatch.setattr(flash_bwd_hopper, "FASTER", {})
    clear_plans()
    LAUNCHES["dkdv"].last = None
    try:
        grads = flash_attn_bwd(dout, q, k, v, out, lse, **kw)
    finally:
        clear_plans()
    assert LAUNCHES["dkdv"].last not in (None, flash_bwd_hopper.tile_record(q.shape[-1]))
    assert LAUNCHES["dkdv"].last[4]  # TMA
    assert flash_bwd.vector_tma_ok(lse, False, True) == (flash_bwd._VECTOR_TMA
                                                         and q.shape[1] % 4 == 0)
    exact, plain = _exact_and_plain(q, k, v, dout, kw)
    for name, got, p, e in zip(("dq", "dk", "dv"), grads, plain, exact):
        check_flash_rule(name, got, p, e, 3.0)


@pytest.mark.parametrize("head_dim, window_left, s", [(128, 100, 2048), (64, -1, 2047)])
def test_a_window_or_a_causal_call_below_tma_rows_takes_the_triton_dkdv(head_dim, window_left, s):
    """No Gluon dK/dV for a window, nor for a causal call below ``TMA_MIN_SEQLEN`` rows (pointer
    loads); the head dim 64 causal routes start there (``FASTER``)."""
    q, k, v, dout = _inputs(1, s, s, 2, 2, head_dim, torch.bfloat16, False, seed=3)
    kw = launch_kwargs(s, s, head_dim, causal=True, window_left=window_left)
    out, lse = flash_attn_fwd(q, k, v, **kw, **fix_kwargs(shift_params(q.dtype)))
    LAUNCHES["dkdv"].last = None
    flash_attn_bwd(dout, q, k, v, out, lse, **kw)
    assert LAUNCHES["dkdv"].last not in (None, flash_bwd_hopper.tile_record(head_dim))


@pytest.mark.parametrize("causal", [False, True], ids=["no-mask", "causal"])
def test_below_tma_min_seqlen_only_calls_without_a_mask_take_the_gluon_kernels(causal):
    """At ``TMA_MIN_SEQLEN_UNMASKED`` rows (below ``TMA_MIN_SEQLEN``) a D128 call without a
    mask takes TMA and so the Gluon forward, dQ and dK/dV (their routes start at one tile);
    a causal one keeps the pointer-load Triton kernels."""
    s = _common.TMA_MIN_SEQLEN_UNMASKED
    assert s < _common.TMA_MIN_SEQLEN
    q, k, v, dout = _inputs(2, s, s, 4, 4, 128, torch.bfloat16, False, seed=5)
    kw = launch_kwargs(s, s, 128, causal=causal)
    clear_plans()
    out, lse = flash_attn_fwd(q, k, v, **kw, **fix_kwargs(shift_params(q.dtype)))
    assert (LAUNCHES["fwd"].last == flash_fwd_hopper.tile_record(128)) == (not causal)
    flash_attn_bwd(dout, q, k, v, out, lse, **kw)
    assert (LAUNCHES["dkdv"].last == flash_bwd_hopper.tile_record(128)) == (not causal)
    assert (LAUNCHES["dq"].last == flash_bwd_hopper.dq_tile_record(128)) == (not causal)
    if causal:
        assert not any(LAUNCHES[part].last[4] for part in ("fwd", "dq", "dkdv"))  # no TMA


# Calls on the Gluon dK/dV's routes (``FASTER``), the GQA ones with the group split.
ROUTED = [  # batch, S, Hq, Hk, D, causal
    (2, 4096, 16, 2, 128, True),
    (2, 4096, 16, 16, 128, False),
    (2, 4096, 32, 4, 64, False),
    (4, 2048, 32, 32, 64, False),
    (2, 4096, 32, 4, 64, True),
    (2, 4096, 32, 32, 64, True),
]


def _equal_bits_on_repeats(case, repeats):
    """``flash_attn_bwd`` on ``case`` (batch, S, Hq, Hk, D, causal) through the Gluon dK/dV,
    then ``repeats`` more calls, each bit-equal to the first."""
    batch, s, hq, hk, d, causal = case
    q, k, v, dout = _inputs(batch, s, s, hq, hk, d, torch.bfloat16, False, seed=s + d + hk)
    kw = launch_kwargs(s, s, d, causal=causal)
    out, lse = flash_attn_fwd(q, k, v, **kw, **fix_kwargs(shift_params(q.dtype)))
    first = flash_attn_bwd(dout, q, k, v, out, lse, **kw)
    assert LAUNCHES["dkdv"].last == flash_bwd_hopper.tile_record(d)
    for _ in range(repeats):
        again = flash_attn_bwd(dout, q, k, v, out, lse, **kw)
        assert all(torch.equal(a, b) for a, b in zip(first, again))


@pytest.mark.parametrize("case", ROUTED, ids=lambda c: f"s{c[1]}-h{c[2]}:{c[3]}-d{c[4]}"
                         f"{'-causal' if c[5] else ''}")
def test_the_gluon_dkdv_routes_are_deterministic(case):
    """The backward promises bit-equal gradients from call to call (no atomics); the Gluon
    kernel's loader and consumers hand shared memory over through mbarriers, so a wrong phase
    would show here as a call that differs."""
    batch, s, hq, hk, d, causal = case
    if not flash_bwd_hopper.dkdv_faster(d, causal, hq > hk, s):
        pytest.skip("not a route (flash_bwd_hopper.FASTER)")
    _equal_bits_on_repeats(case, repeats=8)


def test_the_gluon_dkdv_gives_equal_bits_with_several_heads_a_program(monkeypatch):
    """D64 causal GQA 8:1 at S 2048, group split 4: two query heads a program, and one 128-row
    query tile a head at the last key tiles. The loader writes each head's Q and dO descriptors
    over the last head's, which a copy still in flight reads; until it waited for those copies
    (v30a), 2 of 11, 3 of 20, 3 of 30 and 2 of 150 repeated calls gave other bits here (sessions
    28 and 30). ``FASTER`` is patched to reach the kernel under any Triton and its routes."""
    monkeypatch.setattr(flash_bwd_hopper, "FASTER",
                        {**flash_bwd_hopper.FASTER, (64, True, True): 0})
    _equal_bits_on_repeats((8, 2048, 32, 4, 64, True), repeats=100)


@pytest.mark.parametrize("case", [
    (2, 2100, 8, 1, 128), (2, 4096, 32, 32, 64), (3, 2048, 8, 2, 64),
    (1, 2100, 8, 1, 128), (3, 2048, 6, 2, 64)],
    ids=lambda c: f"b{c[0]}-s{c[1]}-h{c[2]}:{c[3]}-d{c[4]}")
def test_the_gluon_dkdv_causal_order_leaves_the_bits(case, monkeypatch):
    """The causal launch order (``GROUP_PROGRAMS``: groups of columns, heaviest key tiles first)
    only reorders programs: the gradients equal the grid order's (0) bit for bit. Columns (batch
    x KV heads x group splits, ``flash_bwd.dkdv_splits`` on an H100/H200): 8 (one group of 8),
    64, 24, then 4 (fewer than a group) and 18 (a last group of 2). (Causal calls below
    ``TMA_MIN_SEQLEN`` rows take the Triton dK/dV.)"""
    batch, s, hq, hk, d = case
    monkeypatch.setattr(flash_bwd_hopper, "FASTER",
                        {**flash_bwd_hopper.FASTER, (d, True, hq > hk): 0})
    q, k, v, dout = _inputs(batch, s, s, hq, hk, d, torch.bfloat16, False, seed=s + hq)
    kw = launch_kwargs(s, s, d, causal=True)
    out, lse = flash_attn_fwd(q, k, v, **kw, **fix_kwargs(shift_params(q.dtype)))
    grads = {}
    for programs in (0, flash_bwd_hopper.GROUP_PROGRAMS):
        monkeypatch.setattr(flash_bwd_hopper, "GROUP_PROGRAMS", programs)
        LAUNCHES["dkdv"].last = None
        grads[programs] = flash_attn_bwd(dout, q, k, v, out, lse, **kw)
        assert LAUNCHES["dkdv"].last == flash_bwd_hopper.tile_record(d)
    assert flash_bwd_hopper.GROUP_PROGRAMS > 0
    assert all(torch.equal(a, b) for a, b in zip(*grads.values()))

"""The Gluon forward of ``kernels/flash_fwd_hopper.py`` on an sm_90 GPU (``pytest -m gpu``):
the calls it covers reach it through ``flash_attn_fwd``, meet the float64 rule, and make the
Triton forward's tie decisions."""

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
    from hf_stable_attn.kernels import flash_fwd_hopper

from hf_stable_attn.shift_rule import shift_params  # noqa: E402
from hf_stable_attn.testing import (  # noqa: E402
    attention_oracle, check_flash_rule, fix_kwargs, launch_kwargs, near_tie_inputs,
)

CASES = [  # batch, Sq, Sk, Hq, Hk, D, dtype, causal
    (1, 2048, 2048, 4, 4, 128, torch.bfloat16, False),
    (2, 2100, 2100, 8, 1, 128, torch.float16, True),
    (1, 3000, 2048, 2, 2, 128, torch.bfloat16, True),  # causal rows that see no key
    (1, 2048, 3000, 2, 2, 64, torch.bfloat16, True),
    (1, 2500, 2171, 4, 2, 64, torch.float16, False),
    (4, 2048, 2048, 8, 8, 64, torch.bfloat16, True),  # 352 query tiles
    # Causal GQA at D64 stacks a KV group's heads in a tile (``stacked_heads``): 2, 3 and 4
    # query heads a KV head against 3 consumers (ping-pong on with 2, off with the fix from 3).
    (1, 2200, 2200, 4, 2, 64, torch.bfloat16, True),
    (1, 2500, 3001, 6, 2, 64, torch.bfloat16, True),
    (1, 2300, 2300, 12, 3, 64, torch.float16, True),
    # Without a mask TMA starts at TMA_MIN_SEQLEN_UNMASKED (1024) rows.
    (2, 1100, 1300, 4, 2, 128, torch.bfloat16, False),
    (1, 1024, 1024, 8, 1, 64, torch.float16, False),
]


def _inputs(batch, sq, sk, hq, hk, d, dtype, seed):
    g = torch.Generator(device="cuda").manual_seed(seed)
    return tuple(torch.randn(batch, s, h, d, device="cuda", dtype=dtype, generator=g)
                 for s, h in ((sq, hq), (sk, hk), (sk, hk)))


def _forward(q, k, v, causal, params, gluon=True, monkeypatch=None):
    """The forward through the Gluon kernel wherever its ``FASTER`` names the head dim and fix
    (from one full tile, whatever the length rule), or through the Triton kernel."""
    kw = launch_kwargs(q.shape[1], k.shape[1], q.shape[-1], causal=causal)
    monkeypatch.setattr(flash_fwd_hopper, "ENABLED", gluon)
    monkeypatch.setattr(flash_fwd_hopper, "FASTER",
                        {key: (128, 128) for key in flash_fwd_hopper.FASTER})
    clear_plans()  # a plan keeps the route of the call that made it
    LAUNCHES["fwd"].last = None
    out, lse = flash_attn_fwd(q, k, v, **kw, **fix_kwargs(params))
    ran = LAUNCHES["fwd"].last == flash_fwd_hopper.tile_record(q.shape[-1])
    expected = gluon and (q.shape[-1], params.stabilize, False) in flash_fwd_hopper.FASTER
    assert ran == expected, "the call did not take the expected forward"
    return out, lse


@pytest.mark.parametrize("persistent", [False, True], ids=["per-tile", "persistent"])
@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[1]}x{c[2]}-h{c[3]}:{c[4]}-d{c[5]}-"
                         f"{str(c[6])[6:]}{'-causal' if c[7] else ''}")
def test_covered_calls_take_the_gluon_forward_and_meet_the_float64_rule(case, persistent,
                                                                        monkeypatch):
    """Both launches (``PERSISTENT_BELOW`` for every length or none): one program per query
    tile, or one per SM (the 4 x 8-head case loops over several tiles)."""
    *shape, dtype, causal = case
    every = {(d, c, s, f): 1 << 30 for d in (64, 128) for c in (False, True)
             for s in (False, True) for f in (False, True)}
    monkeypatch.setattr(flash_fwd_hopper, "PERSISTENT_BELOW", every if persistent else {})
    q, k, v = _inputs(*shape, dtype, seed=sum(shape))
    kw = launch_kwargs(q.shape[1], k.shape[1], q.shape[-1], causal=causal)
    exact = attention_oracle(q, k, v, **kw)
    plain = attention_oracle(q, k, v, **kw, compute_dtype=dtype)
    for stabilize in (True, False):
        params = shift_params(dtype, stabilize=stabilize)
        out, lse = _forward(q, k, v, causal, params, monkeypatch=monkeypatch)
        check_flash_rule(f"out (fix {stabilize})", out, plain, exact, 2.0)
        ref_out, ref_lse = _forward(q, k, v, causal, params, gluon=False, monkeypatch=monkeypatch)
        seen = torch.isfinite(ref_lse)
        assert torch.equal(seen, torch.isfinite(lse))
        assert torch.allclose(lse[seen], ref_lse[seen], rtol=0, atol=1e-5)
        assert (out[~seen.transpose(1, 2)] == 0).all()


def test_causal_gqa_with_heads_apart_in_memory_equals_heads_side_by_side(monkeypatch):
    """Queries, keys and values laid out heads first (a head's rows adjacent, as a (B, H, S, D)
    tensor's transpose), their tiles stacking a KV group's heads as well: the forward equals
    the one on the same values laid out (B, S, H, D), bit for bit (the host's descriptors
    carry the strides)."""
    q, k, v = _inputs(1, 2200, 2200, 8, 2, 64, torch.bfloat16, seed=64)
    apart = [x.transpose(1, 2).contiguous().transpose(1, 2) for x in (q, k, v)]
    block_n, _, _, consumers, _ = flash_fwd_hopper.HOPPER_CONFIGS[64]
    assert flash_fwd_hopper.stacked_heads(True, 4, consumers, block_n) == 4
    params = shift_params(q.dtype)
    out, lse = _forward(q, k, v, True, params, monkeypatch=monkeypatch)
    out_apart, lse_apart = _forward(*apart, True, params, monkeypatch=monkeypatch)
    assert torch.equal(out, out_apart) and torch.equal(lse, lse_apart)


@pytest.mark.parametrize("d, seed", [(64, 4096), (128, 128)])
def test_tied_rows_get_the_triton_forwards_shift(d, seed, monkeypatch):
    """Rows whose top two scores lie in different key tiles (``testing.near_tie_inputs``, with
    seeds whose draws hold tied and untied rows: tests/test_reference.py): the Gluon forward's
    output is the Triton forward's bit for bit, with the fix on and off, and the fix changes
    the output of the tied rows."""
    q, k, v = (t.cuda() for t in near_tie_inputs(d, 512, 4096, seed=seed))
    params = shift_params(q.dtype)
    out, _ = _forward(q, k, v, False, params, monkeypatch=monkeypatch)
    ref, _ = _forward(q, k, v, False, params, gluon=False, monkeypatch=monkeypatch)
    nofix = shift_params(q.dtype, stabilize=False)
    plain, _ = _forward(q, k, v, False, nofix, monkeypatch=monkeypatch)
    plain_ref, _ = _forward(q, k, v, False, nofix, gluon=False, monkeypatch=monkeypatch)
    assert torch.equal(out, ref) and torch.equal(plain, plain_ref)
    assert not torch.equal(out, plain)


def test_backward_from_the_gluon_forward_meets_the_float64_rule(monkeypatch):
    q, k, v = _inputs(1, 2048, 2048, 8, 2, 128, torch.bfloat16, seed=5)
    kw = launch_kwargs(2048, 2048, 128, causal=True)
    out, lse = _forward(q, k, v, True, shift_params(q.dtype), monkeypatch=monkeypatch)
    dout = torch.randn_like(q)
    grads = flash_attn_bwd(dout, q, k, v, out, lse, **kw)
    for compute_dtype in (torch.float64, q.dtype):
        leaves = [t.detach().clone().requires_grad_() for t in (q, k, v)]
        attention_oracle(*leaves, **kw, compute_dtype=compute_dtype).backward(
            dout.to(compute_dtype))
        if compute_dtype == torch.float64:
            exact = [t.grad for t in leaves]
        else:
            plain = [t.grad for t in leaves]
    for name, got, p, e in zip(("dq", "dk", "dv"), grads, plain, exact):
        check_flash_rule(name, got, p, e, 3.0)

"""The reference path against the float64 oracle (flash-attention's rule) and the fix's invariants."""

import math

import pytest
import torch

from hf_stable_attn.reference import ReferenceNumerics, reference_backward, reference_forward
from hf_stable_attn.shift_rule import shift_params, tie_window
from hf_stable_attn.testing import attention_oracle, check_flash_rule, near_tie_inputs

BF16 = torch.bfloat16

# (batch, seqlen_q, seqlen_k, heads_q, heads_kv, head_dim, masking)
CASES = [
    (2, 37, 53, 4, 4, 24, dict()),
    (2, 37, 53, 4, 2, 24, dict(causal=True)),
    (1, 60, 20, 6, 1, 40, dict(causal=True)),  # q_len > k_len: leading rows see no key
    (2, 20, 61, 4, 2, 33, dict(causal=True)),  # q_len < k_len, odd head dim
    (2, 1, 77, 4, 2, 64, dict(causal=True)),  # decode
    (2, 45, 45, 4, 2, 16, dict(window_left=7, window_right=3)),
    (2, 45, 45, 4, 4, 16, dict(causal=True, window_left=9)),
    (2, 33, 33, 2, 2, 32, dict(causal=True, softcap=3.0)),
    (2, 29, 31, 4, 2, 16, dict(dropout_p=0.17)),
    (1, 19, 19, 2, 1, 256, dict(causal=True)),
]


def _inputs(b, sq, sk, hq, hk, d, dtype, seed):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(b, sq, hq, d, generator=g).to(dtype)
    k = torch.randn(b, sk, hk, d, generator=g).to(dtype)
    v = torch.randn(b, sk, hk, d, generator=g).to(dtype)
    return q, k, v


def _rule_forward_backward(q, k, v, masking, block_n, seed=1234):
    kw = dict(masking)
    if kw.get("dropout_p"):
        kw["seed"] = seed
    out, lse = reference_forward(q, k, v, block_n=block_n, **kw)
    exact_in = [x.detach().double().requires_grad_() for x in (q, k, v)]
    plain_in = [x.detach().clone().requires_grad_() for x in (q, k, v)]
    exact = attention_oracle(*exact_in, **kw)
    plain = attention_oracle(*plain_in, compute_dtype=q.dtype, **kw)
    check_flash_rule("out", out, plain, exact, factor=2.0)
    dout = torch.randn_like(out)
    exact.backward(dout.double())
    plain.backward(dout)
    grads = reference_backward(dout, q, k, v, out, lse, block_n=block_n, **kw)
    for name, got, p, e in zip(("dq", "dk", "dv"), grads, plain_in, exact_in):
        check_flash_rule(name, got, p.grad, e.grad, factor=3.0)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[:6]}-{sorted(c[6])}")
def test_reference_matches_float64_oracle(case, dtype):
    *shape, masking = case
    seed = int(torch.randint(0, 2**31, ()).item())
    q, k, v = _inputs(*shape, dtype, seed)
    _rule_forward_backward(q, k, v, masking, block_n=16)


def _packed(lens_q, lens_k, hq, hk, d, dtype):
    cu_q = torch.tensor([0] + list(torch.tensor(lens_q).cumsum(0)), dtype=torch.int32)
    cu_k = torch.tensor([0] + list(torch.tensor(lens_k).cumsum(0)), dtype=torch.int32)
    q = torch.randn(int(cu_q[-1]), hq, d).to(dtype)
    k = torch.randn(int(cu_k[-1]), hk, d).to(dtype)
    v = torch.randn(int(cu_k[-1]), hk, d).to(dtype)
    return q, k, v, dict(
        cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, max_seqlen_q=max(lens_q), max_seqlen_k=max(lens_k)
    )


@pytest.mark.parametrize("causal", [False, True])
def test_reference_packed_sequences(causal):
    q, k, v, packing = _packed([5, 17, 1, 30], [9, 17, 4, 30], 4, 2, 24, BF16)
    _rule_forward_backward(q, k, v, dict(packing, causal=causal), block_n=8)


def test_packed_equals_each_sequence_alone():
    q, k, v, packing = _packed([7, 12, 3], [7, 12, 3], 2, 1, 16, BF16)
    out, lse = reference_forward(q, k, v, causal=True, block_n=8, **packing)
    cu = packing["cu_seqlens_q"].tolist()
    for a, b in zip(cu[:-1], cu[1:]):
        alone, alone_lse = reference_forward(q[None, a:b], k[None, a:b], v[None, a:b], causal=True, block_n=8)
        assert torch.equal(out[a:b], alone[0])
        torch.testing.assert_close(lse[:, a:b], alone_lse[0], rtol=1e-6, atol=1e-6)


def test_fully_masked_rows_are_zero_not_nan():
    q, k, v = _inputs(1, 9, 4, 2, 2, 16, BF16, 0)
    out, lse = reference_forward(q, k, v, causal=True)  # rows 0..4 see no key
    assert torch.all(out[:, :5] == 0)
    assert torch.isinf(lse[..., :5]).all() and (lse[..., :5] > 0).all()
    assert torch.isfinite(out).all()
    grads = reference_backward(torch.randn_like(out), q, k, v, out, lse, causal=True)
    assert all(torch.isfinite(g).all() for g in grads)


def _tied_inputs(n_rows, seqlen, d, tie_positions, sink_scale=3.0, seed=0):
    """Queries and keys where every row's maximum sits on identical keys at tie_positions."""
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(1, n_rows, 1, d, generator=g)
    k = 0.3 * torch.randn(1, seqlen, 1, d, generator=g)
    sink = sink_scale * q[0, :, 0].mean(0) / q[0, :, 0].mean(0).norm()
    for pos in tie_positions:
        k[0, pos, 0] = sink
    q = q + 2.0 * sink  # every query points at the sink key
    v = torch.randn(1, seqlen, 1, d, generator=g)
    return q.to(BF16), k.to(BF16), v.to(BF16)


def _rows_with_repeated_max(q, k, window):
    s = (q[0, :, 0].float() @ k[0, :, 0].float().T) * q.shape[-1] ** -0.5
    top = s.topk(2, dim=-1).values
    return (top[:, 0] - top[:, 1]) <= window


@pytest.mark.parametrize("stabilize", [True, False])
def test_p_never_rounds_to_one_on_tied_rows(stabilize):
    """The fix's invariant on one tile: no P entering P @ V is 1.0 where the row max repeats."""
    q, k, v = _tied_inputs(24, 40, 32, tie_positions=(0, 9, 25))
    tied = _rows_with_repeated_max(q, k, tie_window(BF16))
    assert tied.sum() >= 20
    seen = []
    reference_forward(
        q, k, v, shift=shift_params(BF16, stabilize=stabilize), block_n=64,
        observe_p=lambda p, shift, start: seen.append(p),
    )
    p = seen[0][0, 0, 0]  # (Sq, Sk) of the single tile
    ones_on_tied_rows = (p[tied] == 1.0).sum().item()
    if stabilize:
        assert ones_on_tied_rows == 0
        assert (p[tied] < 1.0).all()
    else:
        assert ones_on_tied_rows >= 2 * tied.sum().item()


def test_cross_tile_tie_moves_the_shift():
    """A tie split across tiles: the final shift puts every effective weight below 1."""
    q, k, v = _tied_inputs(8, 48, 32, tie_positions=(3, 40))
    params = shift_params(BF16)
    tiles = []
    _, _, shift = reference_forward(
        q, k, v, shift=params, block_n=16, return_shift=True,
        observe_p=lambda p, s, start: tiles.append((p, s)),
    )
    s = (q[0, :, 0].float() @ k[0, :, 0].float().T) * 32 ** -0.5
    weights = torch.exp(s - shift[0, 0][:, None]).to(BF16)
    assert (weights < 1.0).all()
    # the tile holding key 40 already sees the tie against the running maximum
    last_p = tiles[-1][0][0, 0, 0]
    assert (last_p < 1.0).all()
    plain = shift_params(BF16, stabilize=False)
    _, _, plain_shift = reference_forward(q, k, v, shift=plain, block_n=16, return_shift=True)
    assert (torch.exp(s - plain_shift[0, 0][:, None]).to(BF16) == 1.0).sum(-1).min() >= 2


def test_near_tie_inside_bf16_window_counts_as_tie():
    window = tie_window(BF16)
    assert math.isclose(window, 1.955e-3, rel_tol=1e-3)
    assert math.isclose(tie_window(torch.float16), 2.44e-4, rel_tol=1e-3)
    # a gap just inside the window still rounds to 1.0, one outside does not
    assert torch.tensor(math.exp(-0.9 * window)).to(BF16).item() == 1.0
    assert torch.tensor(math.exp(-1.1 * window)).to(BF16).item() < 1.0


@pytest.mark.parametrize("rm_scale,beta", [(60.0, 8.0), (200.0, 2.0), (0.0, 2.0)])
def test_extreme_row_maxima_stay_finite(rm_scale, beta):
    """Large rm with beta 8 would underflow the paper's rule; rm == 0 would give P == 1."""
    d = 16
    q = torch.zeros(1, 4, 1, d)
    q[..., 0] = 1.0
    k = torch.zeros(1, 10, 1, d)
    k[0, :, 0, 0] = -5.0
    k[0, (2, 7), 0, 0] = rm_scale * math.sqrt(d)  # rm == rm_scale, repeated
    v = torch.randn(1, 10, 1, d)
    q, k, v = q.to(BF16), k.to(BF16), v.to(BF16)
    params = shift_params(BF16, beta=beta)
    seen = []
    out, lse = reference_forward(q, k, v, shift=params, observe_p=lambda p, s, st: seen.append(p))
    assert torch.isfinite(out).all() and torch.isfinite(lse).all()
    exact = attention_oracle(q.double(), k.double(), v.double())
    assert (out.double() - exact).abs().max() < 2e-2
    assert (seen[0] < 1.0).all()


def test_section_3_2_switches_change_only_what_they_name():
    q, k, v = _inputs(1, 16, 16, 2, 2, 16, BF16, 3)
    base, _ = reference_forward(q, k, v, causal=True)
    fp32_out, _ = reference_forward(q, k, v, causal=True, numerics=ReferenceNumerics(out_fp32=True))
    assert fp32_out.dtype == torch.float32 and base.dtype == BF16
    assert torch.equal(fp32_out.to(BF16), base)
    pv, _ = reference_forward(q, k, v, causal=True, numerics=ReferenceNumerics(pv_fp32=True))
    assert not torch.equal(pv, base)
    out, lse = reference_forward(q, k, v, causal=True)
    dout = torch.randn_like(out)
    g1 = reference_backward(dout, q, k, v, out, lse, causal=True)
    g2 = reference_backward(dout, q, k, v, out, lse, causal=True, numerics=ReferenceNumerics(delta_from_dp=True))
    assert torch.equal(g1[2], g2[2])  # dV does not use delta
    assert (g1[0].float() - g2[0].float()).abs().max() < 0.05


def test_bad_inputs_raise_clear_errors():
    q, k, v = _inputs(1, 4, 4, 3, 2, 8, BF16, 0)
    with pytest.raises(ValueError, match="multiple"):
        reference_forward(q, k, v)
    with pytest.raises(TypeError, match="share a dtype"):
        reference_forward(q[:, :, :2], k.float(), v)
    with pytest.raises(ValueError, match="beta"):
        shift_params(BF16, beta=1.0)


@pytest.mark.parametrize("head_dim, seqlen_k, seed", [(64, 1024, 1024), (64, 4096, 4096),
                                                      (128, 4096, 128)])
def test_near_tie_inputs_give_tied_and_untied_rows_from_keys_in_different_tiles(
        head_dim, seqlen_k, seed):
    """The GPU tests' construction (``testing.near_tie_inputs``) with the seeds they use: every
    row's top two scores come from keys 100 and Sk - 300, and the bf16 tie window splits the
    rows into tied and untied ones; the same seed gives the same tensors."""
    q, k, v = near_tie_inputs(head_dim, 512, seqlen_k, seed=seed)
    s = (q[0, :, 0].float() @ k[0, :, 0].float().T) * head_dim**-0.5
    top = s.topk(2, -1)
    assert (top.indices.sort(-1).values == torch.tensor([100, seqlen_k - 300])).all()
    tied = top.values[:, 0] - top.values[:, 1] <= tie_window(torch.bfloat16)
    assert tied.any() and (~tied).any()
    assert all(torch.equal(a, b) for a, b in
               zip((q, k, v), near_tie_inputs(head_dim, 512, seqlen_k, seed=seed)))

"""Attention sinks (``s_aux``) on the reference backend (CPU): output and gradients, the sinks'
included, against the float64 oracle (``attention_oracle(sinks=...)``: the sink appended as a
last logit column and dropped after the softmax, as gpt-oss's eager attention) under the
flash-attention rule; dense, packed and with dropout; clear errors for bad sinks. The Triton
kernel's run is in ``test_kernel_interpret.py``, gpt-oss in ``test_models.py``."""

import pytest
import torch

from hf_stable_attn import flash_attn_func, flash_attn_varlen_func
from hf_stable_attn.testing import attention_oracle, check_flash_rule, max_error

BF16 = torch.bfloat16


def _leaves(*tensors):
    return [t.detach().clone().requires_grad_() for t in tensors]


def _grads(out, dout, inputs):
    return torch.autograd.grad(out, inputs, dout)


def check_against_oracle(ours, out, dout, oracle, inputs):
    """``out`` (of the leaves ``ours``) and its gradients against ``oracle(*leaves, dtype)`` in
    float64 and in ``inputs``' dtype: the flash rule, 2x forward, 3x gradients."""
    exact_in = _leaves(*(t.double() for t in inputs))
    exact = oracle(*exact_in, torch.float64)
    plain_in = _leaves(*inputs)
    plain = oracle(*plain_in, inputs[0].dtype)
    check_flash_rule("out", out, plain, exact, factor=2.0)
    for name, got, base, ref in zip(("dq", "dk", "dv", "dsinks"), _grads(out, dout, ours),
                                    _grads(plain, dout, plain_in),
                                    _grads(exact, dout.double(), exact_in)):
        check_flash_rule(name, got, base, ref, factor=3.0)


def _draw(g, *shapes, scale=1.0):
    return [(scale * torch.randn(*shape, generator=g)).to(BF16) for shape in shapes]


CASES = [  # (B, Sq, Sk, Hq, Hk, D, causal, key padding)
    (2, 17, 23, 4, 2, 32, True, False),
    (1, 29, 13, 4, 1, 16, True, False),  # Sq > Sk: the first 16 rows see no key
    (2, 19, 19, 2, 2, 24, False, True),
    (1, 40, 40, 3, 3, 8, False, False),
]


@pytest.mark.parametrize("case", CASES, ids=str)
@pytest.mark.parametrize("seed", [0, 1])
def test_sinks_meet_the_flash_rule_forward_and_backward(case, seed):
    b, sq, sk, hq, hk, d, causal, padded = case
    g = torch.Generator().manual_seed(seed * 101 + sq)
    q, k, v, dout = _draw(g, (b, sq, hq, d), (b, sk, hk, d), (b, sk, hk, d), (b, sq, hq, d))
    sinks = _draw(g, (hq,), scale=2.0)[0]
    keys = (torch.rand(b, sk, generator=g) > 0.3) if padded else None
    ours = _leaves(q, k, v, sinks)
    out = flash_attn_func(*ours[:3], causal=causal, s_aux=ours[3], key_padding_mask=keys,
                          backend="reference")
    check_against_oracle(ours, out, dout, lambda q, k, v, s, dtype: attention_oracle(
        q, k, v, causal=causal, key_padding_mask=keys, sinks=s, compute_dtype=dtype),
        (q, k, v, sinks))


def test_packed_sequences_meet_the_flash_rule():
    cu = torch.tensor([0, 5, 16, 30], dtype=torch.int32)
    g = torch.Generator().manual_seed(5)
    q, k, v, dout = _draw(g, (30, 4, 16), (30, 2, 16), (30, 2, 16), (30, 4, 16))
    sinks = _draw(g, (4,), scale=2.0)[0]
    ours = _leaves(q, k, v, sinks)
    out = flash_attn_varlen_func(*ours[:3], cu, cu, 14, 14, causal=True, s_aux=ours[3],
                                 backend="reference")
    check_against_oracle(ours, out, dout, lambda q, k, v, s, dtype: attention_oracle(
        q, k, v, cu_seqlens_q=cu, cu_seqlens_k=cu, max_seqlen_q=14, max_seqlen_k=14,
        causal=True, sinks=s, compute_dtype=dtype), (q, k, v, sinks))


def test_dropout_with_sinks_meets_the_flash_rule():
    """The oracle drops the same entries: its ``seed`` is the one ``ops.attention`` draws from
    the global generator, replayed here."""
    g = torch.Generator().manual_seed(6)
    q, k, v, dout = _draw(g, (2, 21, 4, 16), (2, 21, 2, 16), (2, 21, 2, 16), (2, 21, 4, 16))
    sinks = _draw(g, (4,), scale=2.0)[0]
    torch.manual_seed(7)
    seed = int(torch.randint(0, 2**62, (), dtype=torch.int64))
    torch.manual_seed(7)
    ours = _leaves(q, k, v, sinks)
    out = flash_attn_func(*ours[:3], causal=True, dropout_p=0.2, s_aux=ours[3],
                          backend="reference")
    check_against_oracle(ours, out, dout, lambda q, k, v, s, dtype: attention_oracle(
        q, k, v, causal=True, dropout_p=0.2, seed=seed, sinks=s, compute_dtype=dtype),
        (q, k, v, sinks))


def test_fp32_sinks_get_an_fp32_accurate_gradient():
    """With fp32 sinks (mixed-precision master weights) dsinks is not rounded to bf16, so its
    error is the backward's own: the sum of ``P * dP`` in fp32, about 1e-6 of the largest value
    here. From ``rowsum(dout * out)`` with the bf16 output it was about 1e-3: that rounding does
    not average out over the keys."""
    g = torch.Generator().manual_seed(3)
    q, k, v, dout = _draw(g, (2, 300, 4, 32), (2, 300, 2, 32), (2, 300, 2, 32), (2, 300, 4, 32))
    sinks = 2.0 * torch.randn(4, generator=g)
    leaves = _leaves(q, k, v, sinks)
    out = flash_attn_func(*leaves[:3], causal=True, s_aux=leaves[3], backend="reference")
    dsinks = _grads(out, dout, leaves[3])[0]
    exact_in = _leaves(*(t.double() for t in (q, k, v, sinks)))
    exact = attention_oracle(*exact_in[:3], causal=True, sinks=exact_in[3])
    exact_dsinks = _grads(exact, dout.double(), exact_in[3])[0]
    assert dsinks.dtype == torch.float32
    assert max_error(dsinks, exact_dsinks) <= 2e-5 * exact_dsinks.abs().max().item()


def test_rows_that_see_no_key_give_zero_and_finite_gradients():
    q, k, v = (torch.randn(1, n, 2, 8, dtype=BF16) for n in (6, 3, 3))
    leaves = _leaves(q, k, v, torch.tensor([1.0, -1.0]))
    out = flash_attn_func(*leaves[:3], causal=True, s_aux=leaves[3], backend="reference")
    assert torch.equal(out[:, :3], torch.zeros_like(out[:, :3]))  # rows 0-2 see no key
    grads = _grads(out.float().square().sum(), None, leaves)
    assert all(torch.isfinite(t).all() for t in grads)


def test_generation_without_grad_folds_the_sinks_too():
    q, k, v = (torch.randn(1, 9, 2, 8, dtype=BF16) for _ in range(3))
    sinks = torch.tensor([0.5, 3.0])
    with torch.no_grad():
        out = flash_attn_func(q, k, v, causal=True, s_aux=sinks)
    exact = attention_oracle(q, k, v, causal=True, sinks=sinks)
    plain = attention_oracle(q, k, v, causal=True, sinks=sinks, compute_dtype=BF16)
    check_flash_rule("out", out, plain, exact, factor=2.0)


@pytest.mark.parametrize("sinks, error, match", [
    (torch.ones(3), ValueError, r"one logit per query head, shape \(4,\)"),
    (torch.ones(4, 1), ValueError, "one logit per query head"),
    (torch.ones(4, dtype=torch.int64), TypeError, "floating"),
    (torch.ones(4, device="meta"), ValueError, "move it there"),
])
def test_bad_sinks_get_clear_errors(sinks, error, match):
    q, k, v = (torch.randn(1, 5, 4, 8, dtype=BF16) for _ in range(3))
    with pytest.raises(error, match=match):
        flash_attn_func(q, k, v, s_aux=sinks)

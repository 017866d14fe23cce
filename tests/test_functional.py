"""The flash-attn style functional API and the custom ops (CPU, reference backend)."""

import os
import subprocess
import sys
from types import SimpleNamespace

import pytest
import torch

import hf_stable_attn
from hf_stable_attn import flash_attn_func, flash_attn_varlen_func, ops
from hf_stable_attn.reference import reference_forward
from hf_stable_attn.shift_rule import shift_params

BF16 = torch.bfloat16


def _qkv(b=2, sq=17, sk=23, hq=4, hk=2, d=32, dtype=BF16, requires_grad=False):
    q = torch.randn(b, sq, hq, d, dtype=dtype, requires_grad=requires_grad)
    k = torch.randn(b, sk, hk, d, dtype=dtype, requires_grad=requires_grad)
    v = torch.randn(b, sk, hk, d, dtype=dtype, requires_grad=requires_grad)
    return q, k, v


def test_flash_attn_func_is_the_reference_with_flash_attn_arguments():
    q, k, v = _qkv()
    out, lse, probs = flash_attn_func(q, k, v, causal=True, window_size=(5, -1), softcap=4.0, return_attn_probs=True)
    ref, ref_lse = reference_forward(q, k, v, causal=True, window_left=5, softcap=4.0)
    assert probs is None
    assert torch.equal(out, ref) and torch.equal(lse, ref_lse)
    assert out.shape == q.shape and lse.shape == (2, 4, 17)


def test_fix_options_are_keywords():
    q, k, v = _qkv()
    off = flash_attn_func(q, k, v, stabilize=False)
    ref, _ = reference_forward(q, k, v, shift=shift_params(BF16, stabilize=False))
    assert torch.equal(off, ref)
    beta8 = flash_attn_func(q, k, v, beta=8.0, tie_tolerance=1e-2)
    ref8, _ = reference_forward(q, k, v, shift=shift_params(BF16, beta=8.0, tie_tolerance=1e-2))
    assert torch.equal(beta8, ref8)


def test_varlen_matches_per_sequence_dense_calls():
    lens = [5, 11, 1]
    cu = torch.tensor([0, 5, 16, 17], dtype=torch.int32)
    q = torch.randn(17, 4, 16, dtype=BF16)
    k = torch.randn(17, 2, 16, dtype=BF16)
    v = torch.randn(17, 2, 16, dtype=BF16)
    out = flash_attn_varlen_func(q, k, v, cu, cu, max(lens), max(lens), causal=True)
    for a, b in zip(cu[:-1].tolist(), cu[1:].tolist()):
        alone = flash_attn_func(q[None, a:b], k[None, a:b], v[None, a:b], causal=True)[0]
        torch.testing.assert_close(out[a:b], alone, rtol=0, atol=0)


def test_gradients_flow_through_the_custom_op():
    q, k, v = _qkv(requires_grad=True)
    out = flash_attn_func(q, k, v, causal=True, dropout_p=0.1)
    out.float().square().sum().backward()
    for t in (q, k, v):
        assert t.grad is not None and t.grad.shape == t.shape and torch.isfinite(t.grad).all()


def test_dropout_is_fresh_per_call_and_zero_when_off():
    torch.manual_seed(0)
    q, k, v = _qkv()
    a = flash_attn_func(q, k, v, dropout_p=0.3)
    b = flash_attn_func(q, k, v, dropout_p=0.3)
    assert not torch.equal(a, b)
    assert torch.equal(flash_attn_func(q, k, v, dropout_p=0.0), flash_attn_func(q, k, v))


def test_custom_ops_pass_opcheck():
    """Both ops (their autograd is ops._Attention, so they are checked without grad)."""
    q, k, v = _qkv(b=1, sq=5, sk=7, hq=2, hk=1, d=8, dtype=torch.float32)
    masking = (None, None, 5, 7, 0.3, True, -1, -1, 0.0, 0.0, None)
    fwd_args = (q, k, v, *masking, True, 2.0, 1e-3, 4e-3, 64.0, True, "reference")
    torch.library.opcheck(torch.ops.hf_stable_attn.fwd.default, fwd_args)
    out, lse = torch.ops.hf_stable_attn.fwd.default(*fwd_args)
    bwd_args = (torch.randn_like(out), q, k, v, out, lse, *masking, True, "reference")
    torch.library.opcheck(torch.ops.hf_stable_attn.bwd.default, bwd_args)
    keys = torch.tensor([[False, True, True, True, False, True, True]])
    torch.library.opcheck(torch.ops.hf_stable_attn.fwd.default, (*fwd_args, keys))
    torch.library.opcheck(torch.ops.hf_stable_attn.bwd.default, (*bwd_args, keys))


def test_key_padding_mask_equals_unpadding():
    """A left-padded batch with its key padding mask gives, on every real query, what each
    sequence gives alone (what Transformers' unpadding computes); masked keys get no gradient."""
    q, k, v = _qkv(b=3, sq=14, sk=14, requires_grad=True)
    lengths = [14, 9, 3]
    keys = torch.arange(14)[None, :] >= 14 - torch.tensor(lengths)[:, None]
    out = flash_attn_func(q, k, v, causal=True, key_padding_mask=keys)
    for row, n in enumerate(lengths):
        alone = flash_attn_func(*(t[row : row + 1, 14 - n :] for t in (q, k, v)), causal=True)
        torch.testing.assert_close(out[row : row + 1, 14 - n :], alone, rtol=0, atol=0)
    assert (out[2, :11] == 0).all(), "padding queries see no key here, so they give 0"
    out.float().square().sum().backward()
    assert (k.grad[~keys] == 0).all() and (v.grad[~keys] == 0).all()
    assert torch.isfinite(q.grad).all() and k.grad[keys].abs().sum() > 0
    with pytest.raises(ValueError, match="key_padding_mask must be"):
        flash_attn_func(q, k, v, key_padding_mask=keys[:, :5])
    additive = torch.zeros(keys.shape).masked_fill(~keys, float("-inf"))  # would read backwards
    with pytest.raises(TypeError, match="pass mask == 0"):
        flash_attn_func(q, k, v, key_padding_mask=additive)
    assert torch.equal(flash_attn_func(q, k, v, causal=True, key_padding_mask=keys.long()),
                       flash_attn_func(q, k, v, causal=True, key_padding_mask=keys))


def test_heads_first_inputs_give_flash_attn_funcs_output_and_gradients():
    """``attend_heads_first`` (Transformers' (B, H, S, D) layout, the registered attention
    function's route) computes what ``flash_attn_func`` computes on the transposed inputs, with
    and without grad, key padding included, and its graph holds no transpose nodes."""
    from hf_stable_attn.interface import attend_heads_first

    torch.manual_seed(3)
    q, k, v = (t.transpose(1, 2).detach().requires_grad_() for t in _qkv(sq=13, sk=13))
    keys = torch.arange(13)[None, :] >= torch.tensor([0, 4])[:, None]
    common = dict(softmax_scale=0.3, causal=True)
    kw = dict(common, window_size=(-1, -1), softcap=0.0)
    out = attend_heads_first(q, k, v, dropout_p=0.0, key_padding_mask=keys, **kw)
    assert type(out.grad_fn).__name__ == "_AttentionBackward"
    assert all(leaf is None or type(leaf).__name__ == "AccumulateGrad"
               for leaf, _ in out.grad_fn.next_functions[:3])
    dout = torch.randn_like(out)
    grads = torch.autograd.grad(out, (q, k, v), dout)
    seq_first = [t.transpose(1, 2) for t in (q, k, v)]
    ref = flash_attn_func(*seq_first, key_padding_mask=keys, **common)
    ref_grads = torch.autograd.grad(ref, (q, k, v), dout)
    assert torch.equal(out, ref)
    for g, r, t in zip(grads, ref_grads, (q, k, v)):
        assert g.shape == t.shape and torch.equal(g, r)
    with torch.no_grad():
        assert torch.equal(attend_heads_first(q, k, v, dropout_p=0.0, **kw),
                           flash_attn_func(*seq_first, **common))
    with pytest.raises(ValueError, match=r"batch, heads, seqlen.*got shape \(2, 4, 13\)"):
        attend_heads_first(q[..., 0], k, v, dropout_p=0.0, **kw)
    with pytest.raises(ValueError, match="multiple of key/value heads"):
        attend_heads_first(q[:, :3], k, v, dropout_p=0.0, **kw)
    with pytest.raises(ValueError, match=r"key_padding_mask must be \(batch, seqlen_k\) = \(2, 13\)"):
        attend_heads_first(q, k, v, dropout_p=0.0, key_padding_mask=keys[:, :5], **kw)


def test_the_registered_attention_adds_one_node_to_the_graph():
    """Host time per layer: the registered attention function hands Transformers' (B, H, S, D)
    projections to the autograd function as they come, so its output's node reads them directly
    (no transpose or slicing nodes of ours, each a few microseconds per layer and pass)."""
    from transformers import GPT2Config, GPT2Model

    from hf_stable_attn.integration import stable_flash_attention_forward

    attention = GPT2Model(GPT2Config(n_layer=1, n_embd=32, n_head=2)).h[0].attn
    x = torch.randn(2, 7, 32, requires_grad=True)
    q, k, v = (x.view(2, 7, 2, 16).transpose(1, 2) * s for s in (1.0, 2.0, 3.0))
    out, weights = stable_flash_attention_forward(attention, q, k, v, None, dropout=0.0,
                                                  scaling=0.25, is_causal=True)
    assert weights is None and out.shape == (2, 7, 2, 16)
    assert type(out.grad_fn).__name__ == "_AttentionBackward"
    assert [fn for fn, _ in out.grad_fn.next_functions[:3]] == [t.grad_fn for t in (q, k, v)]


def test_set_default_options_changes_the_process_default():
    q, k, v = _qkv()
    try:
        hf_stable_attn.set_default_options(stabilize=False)
        off = flash_attn_func(q, k, v)
    finally:
        hf_stable_attn.set_default_options(stabilize=True)
    assert torch.equal(off, flash_attn_func(q, k, v, stabilize=False))


@pytest.mark.parametrize(
    "make, error, match",
    [
        (lambda: _qkv(dtype=torch.float64), TypeError, "not supported"),
        (lambda: _qkv(d=320), ValueError, "head dims"),
        (lambda: _qkv(hq=3, hk=2), ValueError, "multiple"),
        (lambda: (torch.randn(2, 3, 4), torch.randn(2, 3, 4), torch.randn(2, 3, 4)), ValueError, "batch, seqlen"),
        (lambda: (_qkv()[0], _qkv()[1].to("meta"), _qkv()[2]), ValueError, "different devices"),
    ],
)
def test_bad_inputs_get_clear_errors(make, error, match):
    with pytest.raises(error, match=match):
        flash_attn_func(*make())


@pytest.mark.parametrize("options, match", [
    (dict(dropout_p=1.0), r"dropout_p must be in \[0, 1\); got 1.0"),  # would divide by 0
    (dict(dropout_p=-0.1), r"dropout_p must be in \[0, 1\)"),
    (dict(softmax_scale=0.0), "softmax_scale must be a finite number > 0"),
    (dict(softmax_scale=float("nan")), "softmax_scale must be a finite number > 0"),
    (dict(softcap=-2.0), "softcap must be a finite number >= 0"),
    (dict(softcap=float("inf")), "softcap must be a finite number >= 0"),
])
@pytest.mark.parametrize("backend", ["reference", "triton"])
def test_bad_options_get_clear_errors(options, match, backend):
    """Options no path computes correctly are refused on either backend (before, the reference
    path took dropout 1.0 to a non-finite output and a negative softcap as none)."""
    with pytest.raises(ValueError, match=match):
        flash_attn_func(*_qkv(), **options, backend=backend)


def _cu(*offsets):
    return torch.tensor(offsets, dtype=torch.int32)


@pytest.mark.parametrize(
    "cu_q, cu_k, max_q, max_k, match",
    [
        (_cu(0, 4, 10), _cu(0, 10), 6, 10, "same number of sequences; got 2 and 1"),
        (_cu(0, 4, 12), _cu(0, 4, 12), 8, 8, "cu_seqlens_q ends at 12, past the 10 tokens"),
        (_cu(0, 4, 10), _cu(0, 4, 12), 6, 8, "cu_seqlens_k ends at 12, past the 10 tokens"),
        (_cu(0, 4, 10), _cu(0, 4, 10), 3, 6, "has 6 tokens, more than max_seqlen_q=3"),
        (_cu(0, 4, 10), _cu(0, 4, 10), 6, torch.tensor(5), "more than max_seqlen_k=5"),
        (_cu(0, 6, 4), _cu(0, 6, 4), 6, 6, "never decrease.*a step of -2"),
        (_cu(1, 4, 10), _cu(1, 4, 10), 6, 6, "start at 0.*got first 1"),
        (_cu(0, 4, 10)[None], _cu(0, 4, 10)[None], 6, 6, r"1-D int32 tensor.*shape \(1, 3\)"),
        (_cu(0, 4, 10), _cu(0, 4, 10).to("meta"), 6, 6, "cu_seqlens_k is on meta"),
        (_cu(0, 4, 10), _cu(0, 4, 10), None, 6, "max_seqlen_q and max_seqlen_k are required"),
    ],
)
@pytest.mark.parametrize("backend", ["reference", "triton"])
def test_bad_packing_gets_clear_errors(cu_q, cu_k, max_q, max_k, match, backend):
    """Inconsistent cu_seqlens or max_seqlen would make a kernel skip rows or read other memory:
    each is refused with what to pass instead, on either backend, before any kernel runs."""
    q = torch.randn(10, 2, 16, dtype=BF16)
    with pytest.raises(ValueError, match=match):
        flash_attn_varlen_func(q, q, q, cu_q, cu_k, max_q, max_k, causal=True, backend=backend)


def test_rows_in_no_sequence_give_zeros_and_zero_gradients():
    check_rows_in_no_sequence("reference")  # the Triton kernels': test_kernel_interpret


def check_rows_in_no_sequence(backend):
    """q, k, v may hold rows past the last sequence (flash-attn allows it, e.g. padded to a
    fixed size): no kernel reads them, their output is 0 (lse +inf) and their gradients are 0;
    the other rows are those of the call without them."""
    g = torch.Generator().manual_seed(3)
    q, k, v = (torch.randn(12, 2, 16, generator=g).to(BF16).requires_grad_() for _ in range(3))
    cu_q, cu_k = _cu(0, 4, 9), _cu(0, 5, 10)
    out, lse, _ = flash_attn_varlen_func(q, k, v, cu_q, cu_k, 5, 5, causal=True,
                                         return_attn_probs=True, backend=backend)
    trimmed = [t.detach()[:n].requires_grad_() for t, n in ((q, 9), (k, 10), (v, 10))]
    want, want_lse, _ = flash_attn_varlen_func(*trimmed, cu_q, cu_k, 5, 5, causal=True,
                                               return_attn_probs=True, backend=backend)
    assert torch.equal(out[:9], want) and torch.equal(lse[:, :9], want_lse)
    assert (out[9:] == 0).all() and (lse[:, 9:] == float("inf")).all()
    dout = torch.randn(out.shape, generator=g).to(BF16)
    grads = torch.autograd.grad(out, (q, k, v), dout)
    want_grads = torch.autograd.grad(want, trimmed, dout[:9])
    for got, exp, n in zip(grads, want_grads, (9, 10, 10)):
        assert torch.equal(got[:n], exp) and (got[n:] == 0).all()


def test_packing_checks_can_be_turned_off(monkeypatch):
    """HF_STABLE_ATTN_CHECK_PACKING=0 (read at import) leaves only the shape checks: a too-small
    max_seqlen passes validation unread, and the rows are taken as all in sequences."""
    code = "from hf_stable_attn import ops; print(ops.CHECK_PACKING)"
    for setting, expected in (("0", "False"), ("1", "True")):
        env = {**os.environ, "HF_STABLE_ATTN_CHECK_PACKING": setting}
        proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                              text=True, timeout=120)
        assert proc.stdout.strip() == expected, proc.stderr[-2000:]
    q = torch.randn(10, 2, 16, dtype=BF16)
    monkeypatch.setattr(ops, "CHECK_PACKING", False)
    assert ops.validate_packing(q, q, _cu(0, 4, 8), _cu(0, 4, 8), 3, 3) == (3, 3, 10, 10)
    with pytest.raises(ValueError, match="same number of sequences"):  # shapes still checked
        ops.validate_packing(q, q, _cu(0, 4, 8), _cu(0, 8), 3, 3)


def test_packing_takes_the_longest_lengths_as_tensors():
    """Transformers' packed path passes max_seqlen as 0-d tensors: the same output as ints."""
    q = torch.randn(10, 2, 16, dtype=BF16)
    cu = _cu(0, 4, 10)
    as_ints = flash_attn_varlen_func(q, q, q, cu, cu, 6, 6, causal=True)
    as_tensors = flash_attn_varlen_func(q, q, q, cu, cu, torch.tensor(6), torch.tensor(7),
                                        causal=True)
    assert torch.equal(as_ints, as_tensors)


def test_packing_reads_shared_offsets_and_lengths_once_and_returns_ints():
    """Transformers passes one offsets tensor and one 0-d length for q and k, read once but
    checked for both sides; mixed int dtypes, a float length and a length of several elements."""
    q = torch.randn(10, 2, 16, dtype=BF16)
    cu, m = _cu(0, 4, 10), torch.tensor(6)
    for args in ((cu, cu, m, m), (cu, cu, 6, 6), (cu, cu.long(), torch.tensor(6.0), 6)):
        got = ops.validate_packing(q, q, *args)
        assert got == (6, 6, 10, 10) and all(type(x) is int for x in got)
    short = torch.tensor(5)
    with pytest.raises(ValueError, match="more than max_seqlen_q=5"):
        ops.validate_packing(q, q, cu, cu, short, short)
    with pytest.raises(ValueError, match="more than max_seqlen_k=5"):
        ops.validate_packing(q, q, cu, cu, m, short)
    with pytest.raises(ValueError, match="ints or one-element tensors"):
        ops.validate_packing(q, q, cu, cu, torch.tensor([6, 6]), 6)


def test_unsupported_features_say_what_to_use():
    q, k, v = _qkv()
    with pytest.raises(NotImplementedError, match="ALiBi"):
        flash_attn_func(q, k, v, alibi_slopes=torch.ones(4))
    with pytest.raises(ValueError, match="backend"):
        flash_attn_func(q, k, v, backend="cuda")
    with pytest.raises(ValueError, match="beta"):
        flash_attn_func(q, k, v, beta=0.5)
    with pytest.raises(TypeError, match="stabilize must be True or False, got 'false'"):
        flash_attn_func(q, k, v, stabilize="false")  # a truthy string would turn the fix on


def test_eager_calls_the_implementation_and_compile_calls_the_op(monkeypatch):
    """ops._dispatch_free: eager mode skips the dispatcher, torch.compile must go through the op
    (whose implementation is the function the op was built from, not the module attribute)."""
    from hf_stable_attn import ops

    calls = []
    real = ops._forward_impl

    def spy(*args):
        calls.append(1)
        return real(*args)

    monkeypatch.setattr(ops, "_forward_impl", spy)
    q, k, v = _qkv(dtype=torch.float32)
    eager = flash_attn_func(q, k, v, causal=True)
    assert len(calls) == 1
    torch._dynamo.reset()
    compiled = torch.compile(lambda a, b, c: flash_attn_func(a, b, c, causal=True), fullgraph=True,
                             backend="aot_eager")(q, k, v)
    assert len(calls) == 1
    torch.testing.assert_close(compiled, eager)


def test_auto_backend_logs_the_reference_path_on_cuda_once_per_dtype(monkeypatch, caplog):
    """A stand-in CUDA tensor (the rule reads only ``is_cuda`` and ``dtype``)."""
    monkeypatch.setattr(ops, "_warned_dtypes", set())

    with caplog.at_level("WARNING", logger=ops.__name__):
        picks = [ops.resolve_backend("auto", SimpleNamespace(is_cuda=True, dtype=dtype))
                 for dtype in (torch.float32, torch.float32, torch.float64, BF16)]
    assert picks == ["reference", "reference", "reference", "triton"]
    warned = [r.getMessage() for r in caplog.records if "reference path" in r.getMessage()]
    assert len(warned) == 2
    assert "torch.float32" in warned[0] and "torch.float64" in warned[1]

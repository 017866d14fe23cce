"""stable_flash inside every supported transformers family, against eager attention (CPU)."""

import os
import warnings

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import pytest
import torch
import transformers
from model_zoo import FAMILIES, left_padded_batch, lm_labels, tiny_model
from packaging import version

import hf_stable_attn
from hf_stable_attn import ops


def _loss_and_grads(model, ids, mask):
    model.zero_grad()
    out = model(input_ids=ids, attention_mask=mask, labels=lm_labels(ids, mask))
    out.loss.backward()
    grads = {n: p.grad.detach().clone() for n, p in model.named_parameters() if p.grad is not None}
    return out.logits.detach(), grads


@pytest.mark.parametrize("padded", [False, True], ids=["full", "left-padded"])
@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_logits_and_gradients_match_eager(family, padded):
    ids, mask = left_padded_batch(seed=1)
    if not padded:
        mask = torch.ones_like(mask)
    eager = tiny_model(family, "eager").train()
    ours = tiny_model(family, "stable_flash").train()
    logits_e, grads_e = _loss_and_grads(eager, ids, mask)
    logits_o, grads_o = _loss_and_grads(ours, ids, mask)
    valid = mask.bool()
    torch.testing.assert_close(logits_o[valid], logits_e[valid], rtol=1e-4, atol=1e-4)
    assert grads_o.keys() == grads_e.keys()
    for name in grads_e:
        torch.testing.assert_close(grads_o[name], grads_e[name], rtol=1e-3, atol=1e-5, msg=name)


@pytest.mark.parametrize("cache", ["dynamic", "static", "static-compiled-route"])
@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_greedy_generate_matches_eager(family, cache, monkeypatch):
    """``static-compiled-route``: the path a compiled model takes (the padding mask as the
    kernel's key padding mask, keys cut to the mask; Transformers compiles static-cache
    generation on a GPU), forced here in eager mode."""
    if cache == "static-compiled-route":
        from hf_stable_attn import integration

        monkeypatch.setattr(integration, "is_compiling", lambda: True)
        cache = "static"
    ids, mask = left_padded_batch(seed=2, lengths=(9, 5, 12))
    kwargs = dict(max_new_tokens=6, do_sample=False, attention_mask=mask, pad_token_id=0)
    if cache == "static":
        kwargs["cache_implementation"] = "static"
    expected = tiny_model(family, "eager").eval().generate(ids, **kwargs)
    got = tiny_model(family, "stable_flash").eval().generate(ids, **kwargs)
    assert torch.equal(got, expected)


@pytest.mark.skipif(version.parse(transformers.__version__) < version.parse("5.19"),
                    reason="before 5.19 continuous batching runs only Transformers' own kernels "
                           "(its 'paged|' names)")
@pytest.mark.parametrize("family", ["llama", "gpt_oss", "gemma2"])
def test_continuous_batching_matches_eager(family):
    """``generate_batch`` (Transformers' continuous batching: a paged cache read into packed
    sequences, served by ``flash_attn_varlen_func``) gives eager attention's greedy tokens."""
    from transformers import GenerationConfig

    g = torch.Generator().manual_seed(10)
    prompts = [torch.randint(3, 128, (n,), generator=g).tolist() for n in (7, 12, 5)]
    config = GenerationConfig(max_new_tokens=6, do_sample=False, eos_token_id=-1, pad_token_id=0)
    tokens = {}
    for impl in ("eager", "stable_flash"):
        out = tiny_model(family, impl).eval().generate_batch(inputs=prompts,
                                                             generation_config=config)
        tokens[impl] = {rid: r.generated_tokens for rid, r in out.items()}
    assert len(tokens["eager"]) == 3
    assert tokens["stable_flash"] == tokens["eager"]


def test_a_paged_cache_handed_to_the_attention_is_read_first():
    """Transformers 5.19-5.23 hand continuous batching's ``PagedAttentionCache`` to the attention
    function (``cache``) to update, with the keys' sequence offsets given per layer type: the
    output is that of the rows ``update`` returns and the offsets it sets (a stand-in cache here;
    ``test_continuous_batching_matches_eager`` runs the real one on releases that pass none)."""
    from transformers.generation.continuous_batching import PagedAttentionCache

    from hf_stable_attn.integration import stable_flash_attention_forward

    module = tiny_model("llama", "stable_flash").model.layers[1].self_attn
    g = torch.Generator().manual_seed(4)
    q, new_k, new_v = (torch.randn(1, h, 5, 16, generator=g) for h in (4, 2, 2))
    past_k, past_v = (torch.randn(1, 2, 9, 16, generator=g) for _ in range(2))
    full_k, full_v = torch.cat([past_k, new_k], 2), torch.cat([past_v, new_v], 2)
    cu_q, cu_k = torch.tensor([0, 2, 5], dtype=torch.int32), torch.tensor([0, 6, 14])

    class StandIn(PagedAttentionCache):
        def __init__(self):  # nothing of the real cache's state is needed
            self.calls = []

        def update(self, key_states, value_states, layer_idx, kwargs):
            self.calls.append((layer_idx, key_states, value_states))
            kwargs["cu_seq_lens_k"] = kwargs["cu_seq_lens_k"]["full_attention"].to(torch.int32)
            kwargs["max_length_k"] = kwargs["max_length_k"]["full_attention"]
            return full_k, full_v

    cache = StandIn()
    out, _ = stable_flash_attention_forward(
        module, q, new_k, new_v, None, cache=cache, cu_seq_lens_q=cu_q, max_length_q=3,
        cu_seq_lens_k={"full_attention": cu_k}, max_length_k={"full_attention": 8})
    expected, _ = stable_flash_attention_forward(
        module, q, full_k, full_v, None, cu_seq_lens_q=cu_q, max_length_q=3,
        cu_seq_lens_k=cu_k.to(torch.int32), max_length_k=8)
    assert [c[0] for c in cache.calls] == [1] and cache.calls[0][1] is new_k
    torch.testing.assert_close(out, expected, rtol=0, atol=0)


@pytest.mark.parametrize("family", ["llama", "gemma2", "gpt2"])
def test_bf16_matches_eager_within_bf16_tolerance(family):
    ids, mask = left_padded_batch(seed=3)
    eager = tiny_model(family, "eager", dtype=torch.bfloat16).eval()
    ours = tiny_model(family, "stable_flash", dtype=torch.bfloat16).eval()
    with torch.no_grad():
        a = eager(input_ids=ids, attention_mask=mask).logits.float()
        b = ours(input_ids=ids, attention_mask=mask).logits.float()
    valid = mask.bool()
    assert torch.isfinite(b).all()
    assert (a[valid] - b[valid]).abs().max() < 0.1 * a[valid].abs().max()


@pytest.mark.parametrize("family", ["llama", "qwen3", "gpt_oss"])
def test_packed_sequences_match_unpacked(family):
    from transformers import DataCollatorWithFlattening

    g = torch.Generator().manual_seed(4)
    features = [{"input_ids": torch.randint(3, 128, (n,), generator=g).tolist()} for n in (7, 12, 4)]
    packed = DataCollatorWithFlattening(return_tensors="pt")(features)
    model = tiny_model(family, "stable_flash").eval()
    with torch.no_grad():
        logits = model(input_ids=packed["input_ids"], position_ids=packed["position_ids"]).logits[0]
        start = 0
        for f in features:
            n = len(f["input_ids"])
            alone = model(input_ids=torch.tensor([f["input_ids"]])).logits[0]
            torch.testing.assert_close(logits[start:start + n], alone, rtol=1e-4, atol=1e-4)
            start += n


# Before 5.23 gpt-oss's mixture of experts does not compile with fullgraph=True under torch 2.13
# (a data-dependent guard in Transformers' grouped-matmul backward), eager attention included.
_MOE_COMPILES = not (version.parse(transformers.__version__) < version.parse("5.23")
                     and version.parse(torch.__version__.split("+")[0]) >= version.parse("2.13"))


@pytest.mark.parametrize("family", ["llama", pytest.param("gpt_oss", marks=pytest.mark.skipif(
    not _MOE_COMPILES, reason="Transformers < 5.23's MoE backward does not compile under torch "
                              ">= 2.13, whatever the attention"))])
def test_torch_compile_fullgraph_forward_backward(family):
    """A compiled training step: the eager loss, finite gradients, and no warning from Dynamo
    about our code (such as tracing through an ``lru_cache``). gpt-oss: with attention sinks."""
    from torch._dynamo.utils import warn_once_cache

    model = tiny_model(family, "stable_flash").train()
    ids, _ = left_padded_batch(seed=5, lengths=(12, 12))
    compiled = torch.compile(model, fullgraph=True, backend="aot_eager")
    warn_once_cache.clear()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        loss = compiled(input_ids=ids, labels=ids).loss
    assert not [w for w in caught if "hf_stable_attn" in str(w.message)]
    loss.backward()
    expected = tiny_model(family, "stable_flash").train()(input_ids=ids, labels=ids).loss
    torch.testing.assert_close(loss, expected, rtol=1e-5, atol=1e-5)
    assert all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None)


def test_padding_is_served_without_unpadding_eager_and_compiled(monkeypatch):
    """A padding mask goes to the kernel as a key padding mask, not through Transformers'
    unpadding (a device sync per layer; data-dependent shapes, graph breaks under
    torch.compile): eager and compiled, the logits on real tokens are the unpadding path's."""
    from transformers import modeling_flash_attention_utils as fa_utils

    from hf_stable_attn import integration

    unpadded = []
    original = fa_utils._upad_input
    monkeypatch.setattr(fa_utils, "_upad_input", lambda *a, **k: unpadded.append(1) or original(*a, **k))
    model = tiny_model("llama", "stable_flash").eval()
    ids, mask = left_padded_batch(seed=6, lengths=(9, 12))
    with torch.no_grad():
        eager = model(input_ids=ids, attention_mask=mask).logits
        compiled = torch.compile(model, backend="aot_eager")(input_ids=ids, attention_mask=mask).logits
        assert not unpadded
        monkeypatch.setattr(integration, "_flash_path_needed", lambda *a: True)
        expected = model(input_ids=ids, attention_mask=mask).logits
        assert unpadded, "the forced flash path unpads"
    real = mask.bool()
    torch.testing.assert_close(eager[real], expected[real], rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(compiled[real], expected[real], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("family", ["gpt2", "llama", "gpt_oss"])
def test_compiled_static_cache_generation_has_no_graph_break(family):
    """Static-cache generation with a compiled forward (as Transformers compiles it on a GPU) on
    a left-padded batch: no graph break in the prefill or the decoding steps (our mask function
    skips Transformers' data-dependent ``.all()``), and the tokens of eager attention."""
    from torch._dynamo.utils import counters

    ids, mask = left_padded_batch(seed=9, lengths=(9, 6))
    kwargs = dict(attention_mask=mask, max_new_tokens=4, do_sample=False, pad_token_id=0,
                  cache_implementation="static")
    expected = tiny_model(family, "eager").eval().generate(ids, **kwargs)
    model = tiny_model(family, "stable_flash").eval()
    model.forward = torch.compile(model.forward, backend="eager")
    torch._dynamo.reset()
    counters.clear()
    got = model.generate(ids, **kwargs)
    assert dict(counters["graph_break"]) == {}
    assert torch.equal(got, expected)


def test_per_model_options_reach_the_op(monkeypatch):
    seen = []
    real = ops.attention

    def spy(*args, **kwargs):
        seen.append((kwargs["shift"].stabilize, kwargs["shift"].beta))
        return real(*args, **kwargs)

    monkeypatch.setattr(ops, "attention", spy)
    fixed = tiny_model("llama", "stable_flash").eval()
    plain = tiny_model("llama", "stable_flash").eval()
    hf_stable_attn.configure(fixed, beta=6.0)
    hf_stable_attn.configure(plain, stabilize=False)
    ids, _ = left_padded_batch(seed=6, lengths=(8,))
    with torch.no_grad():
        fixed(input_ids=ids)
        plain(input_ids=ids)
    assert seen == [(True, 6.0)] * 2 + [(False, 2.0)] * 2
    assert fixed.config.stable_flash["beta"] == 6.0
    assert fixed.config.to_dict()["stable_flash"]["beta"] == 6.0  # saved with the config


def test_from_pretrained_and_set_attn_implementation(tmp_path):
    from transformers import AutoModelForCausalLM

    tiny_model("qwen2", "eager").save_pretrained(tmp_path)
    model = AutoModelForCausalLM.from_pretrained(tmp_path, attn_implementation="stable_flash")
    assert model.config._attn_implementation == "stable_flash"
    model.set_attn_implementation("sdpa")
    model.set_attn_implementation("stable_flash")
    assert model.config._attn_implementation == "stable_flash"


def test_output_attentions_gives_a_clear_error():
    model = tiny_model("llama", "stable_flash").eval()
    ids, _ = left_padded_batch(seed=7, lengths=(5,))
    with pytest.raises(ValueError, match="output_attentions"):
        model(input_ids=ids, output_attentions=True)


def test_custom_4d_mask_gets_a_clear_error():
    model = tiny_model("llama", "stable_flash").eval()
    ids, _ = left_padded_batch(seed=8, lengths=(6,))
    mask4d = torch.ones(1, 1, 6, 6, dtype=torch.bool).tril()
    with pytest.raises(ValueError, match="padding masks"):
        model(input_ids=ids, attention_mask=mask4d)

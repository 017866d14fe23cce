"""The transformers internals our registration relies on. A failure here means a transformers
release moved something that ``hf_stable_attn/integration.py`` must follow."""

import inspect

import pytest
import torch
from model_zoo import left_padded_batch, tiny_model
from transformers import AttentionInterface, PreTrainedModel
from transformers import modeling_flash_attention_utils as fa_utils
from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, flash_attention_mask

import hf_stable_attn
from hf_stable_attn import hooks, integration
from hf_stable_attn.integration import (ATTN_IMPLEMENTATION, stable_flash_attention_forward,
                                        stable_flash_mask)


def test_lazy_imports_is_wrapped_and_resolves_our_functions():
    assert hasattr(fa_utils._lazy_imports, "__wrapped_by_hf_stable_attn__")
    params = list(inspect.signature(fa_utils._lazy_imports.__wrapped_by_hf_stable_attn__).parameters)
    assert params[0] == "implementation"
    (fn, varlen_fn, *_), _ = fa_utils.lazy_import_flash_attention(ATTN_IMPLEMENTATION)
    assert fn is hf_stable_attn.flash_attn_func
    assert varlen_fn is hf_stable_attn.flash_attn_varlen_func


def test_register_is_idempotent():
    wrapped = fa_utils._lazy_imports
    check = PreTrainedModel._check_and_adjust_attn_implementation
    hf_stable_attn.register()
    assert fa_utils._lazy_imports is wrapped
    assert PreTrainedModel._check_and_adjust_attn_implementation is check


def test_models_listing_their_own_flash_kernels_keep_our_name():
    """gpt-oss lists its flash kernels (``_compatible_flash_implementations``), and
    Transformers swaps any other name containing "flash" for the first of them; ours stays
    (``integration._keeps_our_name``), at init and through ``set_attn_implementation``, and the
    model's list is left as it was."""
    check = PreTrainedModel._check_and_adjust_attn_implementation
    params = list(inspect.signature(check.__wrapped_by_hf_stable_attn__).parameters)
    assert params[:2] == ["self", "attn_implementation"]
    model = tiny_model("gpt_oss", "stable_flash")
    own = type(model)._compatible_flash_implementations
    assert own and ATTN_IMPLEMENTATION not in own
    assert model.config._attn_implementation == ATTN_IMPLEMENTATION
    model.set_attn_implementation("eager")
    model.set_attn_implementation(ATTN_IMPLEMENTATION)
    assert model.config._attn_implementation == ATTN_IMPLEMENTATION
    assert "_compatible_flash_implementations" not in vars(model)


def test_attention_and_mask_functions_are_registered():
    assert AttentionInterface()[ATTN_IMPLEMENTATION] is stable_flash_attention_forward
    assert ALL_MASK_ATTENTION_FUNCTIONS[ATTN_IMPLEMENTATION] is stable_flash_mask


def test_mask_function_is_flash_attention_mask_outside_static_decoding():
    """Where no static cache's decoding step is concerned our mask function returns what
    Transformers' flash mask returns (None without padding, else the sliced padding mask)."""
    mask = torch.ones(2, 9, dtype=torch.bool)
    assert stable_flash_mask(2, 9, 9, attention_mask=mask) is None
    assert flash_attention_mask(2, 9, 9, attention_mask=mask) is None
    mask[0, :3] = False
    for q_length, kv_length in ((9, 9), (1, 9), (2, 12), (1, 6)):
        ours = stable_flash_mask(2, q_length, kv_length, attention_mask=mask)
        theirs = flash_attention_mask(2, q_length, kv_length, attention_mask=mask)
        assert (ours is None and theirs is None) or torch.equal(ours, theirs)
    assert stable_flash_mask(2, 9, 9, attention_mask=mask) is not None


def test_flash_kwargs_reach_our_function(monkeypatch):
    """window_size and softcap must arrive (transformers drops kwargs a function lacks) where
    Transformers' flash path runs (packed sequences; forced here for a padded batch)."""
    monkeypatch.setattr(integration, "_flash_path_needed", lambda *a: True)
    seen = {}
    real = hf_stable_attn.flash_attn_varlen_func

    def spy(*args, **kwargs):
        seen.update(kwargs)
        return real(*args, **kwargs)

    spy.__signature__ = inspect.signature(real)
    monkeypatch.setattr(fa_utils, "_flash_varlen_fn", spy)
    monkeypatch.setattr(fa_utils, "_loaded_implementation", ATTN_IMPLEMENTATION)
    model = tiny_model("gemma2", "stable_flash").eval()
    ids, mask = left_padded_batch(seed=0, lengths=(13, 9))
    with torch.no_grad():
        model(input_ids=ids, attention_mask=mask)
    assert seen["softcap"] == 5.0
    assert seen["window_size"] == (5, 5)
    assert seen["causal"] is True


@pytest.mark.parametrize("padded", [False, True])
def test_padding_mask_reaches_the_attention_function(padded):
    masks = []
    model = tiny_model("llama", "stable_flash").eval()
    ids, mask = left_padded_batch(seed=0)
    if not padded:
        mask = torch.ones_like(mask)
    with hooks.observe_attention(lambda m, q, k, v, am, **kw: masks.append(am)), torch.no_grad():
        model(input_ids=ids, attention_mask=mask)
    assert len(masks) == 2
    if padded:
        assert all(m is not None and torch.equal(m.bool(), mask.bool()) for m in masks)
    else:
        assert all(m is None for m in masks)


def test_position_ids_mark_packing_only_in_one_row_of_several_positions():
    """``integration._without_unused_position_ids`` drops position_ids elsewhere; that is
    equivalent only while transformers reads them just for this test."""
    restarts = torch.tensor([[0, 1, 2, 0, 1]])
    assert bool(fa_utils._is_packed_sequence(restarts, batch_size=1))
    assert not bool(fa_utils._is_packed_sequence(restarts, batch_size=2))
    assert not bool(fa_utils._is_packed_sequence(torch.tensor([[7]]), batch_size=1))


@pytest.mark.parametrize("batch,length,padded,reached,kept", [
    (2, 9, False, False, False), (1, 9, False, True, True), (1, 1, False, False, False),
    (2, 9, True, False, False), (1, 9, True, False, False),
])
def test_only_packing_takes_the_flash_path(monkeypatch, batch, length, padded, reached, kept):
    """Transformers' flash path serves packed sequences (a one-row batch of several positions
    without a padding mask); other calls, padded ones included, go straight to our kernel.
    Where the path runs, it gets ``position_ids`` only where they can mark packing."""
    seen = []
    real = fa_utils._flash_attention_forward

    def spy(*args, **kwargs):
        seen.append(kwargs.get("position_ids"))
        return real(*args, **kwargs)

    monkeypatch.setattr(fa_utils, "_flash_attention_forward", spy)
    model = tiny_model("llama", "stable_flash").eval()
    ids = torch.randint(3, 100, (batch, length))
    mask = torch.ones_like(ids)
    mask[0, :2] = 0 if padded else 1
    with torch.no_grad():
        model(input_ids=ids, attention_mask=mask,
              position_ids=torch.arange(length).expand(batch, length))
    assert len(seen) == (2 if reached else 0)
    assert all((p is not None) == kept for p in seen)


def test_padded_generation_never_unpads(monkeypatch):
    """Greedy generation on a left-padded batch serves the prompt's and every decoding step's
    padding mask in the kernel (no unpadding, no device sync) and gives the tokens of
    Transformers' unpadding path."""
    unpadded = []
    real = fa_utils._upad_input
    monkeypatch.setattr(fa_utils, "_upad_input",
                        lambda *a, **k: unpadded.append(a[0].shape[1]) or real(*a, **k))
    model = tiny_model("llama", "stable_flash").eval()
    ids, mask = left_padded_batch(seed=7, lengths=(9, 5))
    settings = dict(attention_mask=mask, max_new_tokens=4, do_sample=False, pad_token_id=0)
    tokens = model.generate(ids, **settings)
    assert unpadded == []
    monkeypatch.setattr(integration, "_flash_path_needed", lambda *a: True)
    expected = model.generate(ids, **settings)
    assert unpadded, "the forced flash path unpads"
    torch.testing.assert_close(tokens, expected, rtol=0, atol=0)


@pytest.mark.parametrize("family", ["llama", "gemma2"])
def test_static_cache_decoding_steps_see_one_mask_shape(family):
    """With a static cache every decoding step's attention gets a padding mask of the cache's
    length (so a compiled model sees one shape); the generated tokens equal eager's."""
    shapes = []

    def record(module, q, k, v, mask, **kwargs):
        if q.shape[2] == 1 and kwargs["sliding_window"] is None:
            shapes.append((tuple(mask.shape), k.shape[2]))

    ids, mask = left_padded_batch(seed=8, lengths=(9, 5))
    kwargs = dict(attention_mask=mask, max_new_tokens=5, do_sample=False, pad_token_id=0,
                  cache_implementation="static")
    with hooks.observe_attention(record):
        got = tiny_model(family, "stable_flash").eval().generate(ids, **kwargs)
    expected = tiny_model(family, "eager").eval().generate(ids, **kwargs)
    assert torch.equal(got, expected)
    assert len(shapes) >= 4 and len(set(shapes)) == 1
    (mask_shape, keys), = set(shapes)
    assert mask_shape == (2, keys)

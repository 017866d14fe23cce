"""The probe: score masks, repeated maxima, rank-1 similarity, and planted patterns in tiny models."""

import json
import math
import os

import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from hf_stable_attn.probe import (  # noqa: E402
    attention_scores,
    rank1_matrices,
    rank1_similarity,
    row_ties,
    visible_keys,
)
from hf_stable_attn.shift_rule import tie_window  # noqa: E402


# ----------------------------------------------------------------------------- the math


def test_visible_keys_causal_bottom_right_and_window():
    keep = visible_keys(2, 5, causal=True, sliding_window=None)
    assert keep.tolist() == [[1, 1, 1, 1, 0], [1, 1, 1, 1, 1]]
    keep = visible_keys(4, 4, causal=True, sliding_window=2)
    for i in range(4):
        assert keep[i].nonzero()[:, 0].tolist() == list(range(max(0, i - 1), i + 1))
    assert visible_keys(3, 3, causal=False, sliding_window=None).all()


def test_attention_scores_match_dense_softcap_and_mask():
    torch.manual_seed(0)
    q, k = torch.randn(2, 3, 5, 8), torch.randn(2, 3, 7, 8)
    keep = visible_keys(5, 7, causal=True, sliding_window=None)
    s = attention_scores(q, k, scaling=0.3, softcap=2.0, keep=keep)
    want = 2.0 * torch.tanh(0.3 * q @ k.transpose(-1, -2) / 2.0)
    assert torch.allclose(s[..., keep], want[..., keep], atol=1e-6)
    assert (s[..., ~keep] == float("-inf")).all()


def test_row_ties_window_sink_and_ones():
    w = tie_window(torch.bfloat16)
    s = torch.tensor([
        [3.0, 1.0, 3.0, -1.0],  # exact tie with the sink
        [0.5, 2.0, 2.0 - 0.25 * w, 1.0],  # tie inside the window
        [0.5, 2.0, 2.0 - 3.0 * w, 1.0],  # just outside the window
        [1.0, float("-inf"), float("-inf"), float("-inf")],  # one visible key
        [float("-inf")] * 4,  # no visible key
    ])
    t = row_ties(s, torch.bfloat16)
    assert t.tied.tolist() == [True, True, False, False, False]
    assert t.tied_keys[0].nonzero()[:, 0].tolist() == [0, 2]
    assert t.tied_keys[1].nonzero()[:, 0].tolist() == [1, 2]
    assert not t.tied_keys[2:].any()
    # exp(S - m1) rounded to bf16: 1.0 exactly at the maxima (and nowhere for a hidden row)
    assert t.ones.tolist() == [2, 2, 1, 1, 0]
    assert not torch.isnan(t.gap).any()
    # fp32 has a far narrower window: the near tie is no longer one
    assert row_ties(s, torch.float32).tied.tolist() == [True, False, False, False, False]


def test_rank1_similarity_matches_explicit_outer_products():
    torch.manual_seed(1)
    pk, x = torch.randn(6, 4), torch.randn(6, 10)
    x[4] = x[1]  # a copied input row
    pk[4] = 2.0 * pk[1]
    sim = rank1_similarity(pk, x, top_k=3)
    r = rank1_matrices(pk, x).flatten(1)
    want = torch.nn.functional.cosine_similarity(r[:, None], r[None, :], dim=-1)
    assert torch.allclose(sim.flat_cosine, want, atol=1e-5)
    assert sim.flat_cosine[1, 4] == pytest.approx(1.0, abs=1e-5)
    assert set(sim.top_columns[1].tolist()) == set(sim.top_columns[4].tolist())
    # column cosine of a pair = explicit cosine over the union of their top columns
    i, j = 0, 2
    cols = sorted(set(sim.top_columns[i].tolist()) | set(sim.top_columns[j].tolist()))
    ri, rj = rank1_matrices(pk, x)[[i, j]][:, :, cols].flatten(1)
    assert sim.column_cosine[i, j] == pytest.approx(float(torch.cosine_similarity(ri, rj, dim=0)), abs=1e-5)
    assert dict(sim.shared_columns)  # the copied row shares its columns with itself at least


# ----------------------------------------------------------------------------- tiny models

from model_zoo import llama31_like  # noqa: E402

import hf_stable_attn  # noqa: E402  (registers attn_implementation="stable_flash")
from hf_stable_attn.probe import AttentionProbe, run_probe, text_summary, write_outputs  # noqa: E402

SINK_TOKEN, COPIED_TOKEN = 7, 11


def _gpt2(initializer_range=0.5, seed=0):
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(seed)
    cfg = GPT2Config(n_embd=64, n_head=4, n_layer=2, vocab_size=64, n_positions=64,
                     bos_token_id=0, eos_token_id=0, initializer_range=initializer_range,
                     attn_implementation="stable_flash")
    return GPT2LMHeadModel(cfg).eval()


def _llama(seed=0):
    model = llama31_like(seed).eval()  # token 0 (padding) embeds to zero: tests avoid it
    assert model.model.rotary_emb.rope_type == "llama3"
    return model


def _plant_gpt2_sink(model):
    """Layer 0, head 0: constant queries c and keys (u . x) c, so that every row's scores are
    4 (u . x_j); token SINK_TOKEN has u . x = 8, far above any other token. With SINK_TOKEN at
    positions 0 and 4 (and no position embedding), every row from 4 on has two maxima, the sink
    and key 4, and P K is the same for all those rows."""
    with torch.no_grad():
        d, e = 16, model.config.n_embd
        u = torch.randn(e)
        u -= u.mean()
        u /= u.norm()
        model.transformer.wpe.weight.zero_()
        model.transformer.wte.weight[SINK_TOKEN] = 10.0 * u
        w, b = model.transformer.h[0].attn.c_attn.weight, model.transformer.h[0].attn.c_attn.bias
        w[:, :d] = 0.0
        b[:d] = 1.0
        w[:, e:e + d] = u[:, None] * torch.ones(d)[None, :]
        b[e:e + d] = 0.0
    return model


def test_probe_finds_planted_ties_sink_and_similar_rank1_in_gpt2(tmp_path):
    model = _plant_gpt2_sink(_gpt2()).to(torch.bfloat16)
    ids = torch.tensor([[SINK_TOKEN, 3, 5, 9, SINK_TOKEN, 13, COPIED_TOKEN, 17, 19, COPIED_TOKEN, 23, 29]])
    result = run_probe(model, [ids], chosen=[(0, 0)])
    head = result.summary["layers"][0]["heads"][0]
    assert (head["rows"], head["repeated_max_rows"], head["sink_tied_rows"]) == (12, 8, 8)
    assert [r["row"] for r in head["tied_rows"]] == list(range(4, 12))
    assert all(r["keys"] == [0, 4] and r["sink"] for r in head["tied_rows"])
    assert head["p_ones"] == 12 + 8  # one 1.0 per row, two in each tied row
    # copied input rows (0 and 4, 6 and 9): identical X, and P K ~ k_0 -> the same R[T]
    rank1 = head["rank1"]
    assert rank1["most_similar_pair"][:2] in ([0, 4], [6, 9]) and rank1["most_similar_pair"][2] > 0.99
    flat = result.tensors["layer0.head0.flat_cosine"]
    assert flat[6, 9] > 0.99 and result.tensors["layer0.head0.column_cosine"][6, 9] > 0.99
    assert flat[0, 4] > 0.99 and flat[3, 6] < 0.9  # token 3 comes before the second maximum
    assert result.tensors["layer0.head0.rank1"].shape == (12, 16, 64)
    paths = write_outputs(result, tmp_path)
    assert {p.name for p in paths} >= {"summary.json", "summary.txt", "tensors.safetensors",
                                        "overview.png", "scores_layer0.head0.png", "rank1_layer0.head0.png"}
    assert all(p.stat().st_size > 1000 for p in paths if p.suffix == ".png")
    saved = json.loads((tmp_path / "summary.json").read_text())
    assert saved["layers"][0]["heads"][0]["repeated_max_rows"] == 8
    assert "8 of" in text_summary(saved) or "tied" in text_summary(saved)


@pytest.mark.parametrize("make", [_gpt2, _llama], ids=["gpt2", "llama3"])
def test_probe_reports_no_ties_in_random_models(make):
    model = make().to(torch.bfloat16)
    ids = (1 + torch.randperm(63, generator=torch.Generator().manual_seed(1)))[:24][None]
    summary = run_probe(model, [ids], chosen=[]).summary
    heads = [h for l in summary["layers"] for h in l["heads"]]
    assert len(heads) == 8
    for h in heads:
        assert h["rows"] == 24 and h["repeated_max_rows"] == 0 and h["tied_rows"] == []
        assert h["p_ones"] == h["rows"] and math.isfinite(h["max_logit"])


def test_probe_maps_gqa_heads_in_llama3():
    """Zero keys for KV head 0 of layer 0: query heads 0 and 1 (its group) tie on every key of
    every row; heads 2 and 3 (KV head 1) and layer 1 are untouched."""
    model = _llama()
    with torch.no_grad():
        model.model.layers[0].self_attn.k_proj.weight[:16] = 0.0
    model = model.to(torch.bfloat16)
    n = 20
    ids = (1 + torch.randperm(63, generator=torch.Generator().manual_seed(2)))[:n][None]
    summary = run_probe(model, [ids, ids[:, :10]], chosen=[], max_listed_rows=64).summary
    layer0 = {h["head"]: h for h in summary["layers"][0]["heads"]}
    for h in (0, 1):
        assert layer0[h]["rows"] == n + 10
        assert layer0[h]["repeated_max_rows"] == (n - 1) + 9  # every row that sees two keys
        assert layer0[h]["sink_tied_rows"] == (n - 1) + 9
        assert layer0[h]["p_ones"] == n * (n + 1) // 2 + 10 * 11 // 2
        last = [r for r in layer0[h]["tied_rows"] if r["text"] == 0][-1]
        assert last["row"] == n - 1 and last["n_keys"] == n and last["keys"] == list(range(16))
    for h in (2, 3):
        assert layer0[h]["repeated_max_rows"] == 0
    assert all(h["repeated_max_rows"] == 0 for h in summary["layers"][1]["heads"])


def test_probe_respects_padding_mask_and_head_selection():
    model = _llama()
    with torch.no_grad():
        model.model.layers[0].self_attn.k_proj.weight[:16] = 0.0
    model = model.to(torch.bfloat16)
    ids = (1 + torch.randperm(63, generator=torch.Generator().manual_seed(3)))[:8][None].repeat(2, 1)
    mask = torch.ones(2, 8, dtype=torch.long)
    mask[1, :3] = 0  # left padding
    probe = AttentionProbe(layers=[0], heads=[1, 2])
    with probe.attach(model), torch.no_grad():
        model(input_ids=ids, attention_mask=mask, use_cache=False)
    summary = probe.summary()
    assert [l["layer"] for l in summary["layers"]] == [0]
    heads = {h["head"]: h for h in summary["layers"][0]["heads"]}
    assert sorted(heads) == [1, 2]
    assert heads[1]["rows"] == 8 + 5 and heads[1]["repeated_max_rows"] == 7 + 4
    # the sink of the padded sequence is its first real token (key 3)
    padded = [r for r in heads[1]["tied_rows"] if r["batch"] == 1]
    assert padded and all(r["keys"][0] == 3 and r["sink"] for r in padded)
    assert heads[2]["repeated_max_rows"] == 0


def test_probe_command_line_on_a_saved_model(tmp_path, capsys):
    import argparse

    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    from hf_stable_attn.probe import add_subparser

    words = "the quick brown fox jumps over lazy dog".split()
    tok = Tokenizer(models.WordLevel({w: i + 1 for i, w in enumerate(words)} | {"[UNK]": 0}, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]").save_pretrained(tmp_path / "model")
    _llama().save_pretrained(tmp_path / "model")
    (tmp_path / "texts.txt").write_text("the quick brown fox\n\nthe lazy dog jumps over the fox\n")
    parser = argparse.ArgumentParser()
    add_subparser(parser.add_subparsers())
    args = parser.parse_args([
        "probe", "--model", str(tmp_path / "model"), "--text-file", str(tmp_path / "texts.txt"),
        "--layers", "0-1", "--heads", "1", "--out", str(tmp_path / "out"), "--device", "cpu",
    ])
    assert args.func(args) == 0
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["texts"] == 2 and summary["dtype"] == "bfloat16"
    assert summary["chosen"] == [[0, 1], [1, 1]]
    assert [h["rows"] for l in summary["layers"] for h in l["heads"]] == [4 + 7, 4 + 7]
    assert (tmp_path / "out" / "rank1_layer1.head1.png").is_file()
    assert "rows with a repeated maximum" in capsys.readouterr().out


def test_probe_respects_the_sliding_window():
    """Mistral with a window of 4 keys and zero keys for KV head 0: row i ties on its last
    min(i + 1, 4) keys, and the sink is among them only while it is inside the window."""
    from transformers import MistralConfig, MistralForCausalLM

    torch.manual_seed(0)
    cfg = MistralConfig(hidden_size=64, intermediate_size=128, num_attention_heads=4,
                        num_key_value_heads=2, head_dim=16, num_hidden_layers=1, vocab_size=64,
                        sliding_window=4, initializer_range=0.5, attn_implementation="stable_flash")
    model = MistralForCausalLM(cfg).eval()
    with torch.no_grad():
        model.model.layers[0].self_attn.k_proj.weight[:16] = 0.0
    ids = (1 + torch.randperm(63, generator=torch.Generator().manual_seed(4)))[:10][None]
    head = run_probe(model.to(torch.bfloat16), [ids], heads=[0], chosen=[]).summary["layers"][0]["heads"][0]
    assert (head["repeated_max_rows"], head["sink_tied_rows"]) == (9, 3)
    assert head["p_ones"] == 1 + 2 + 3 + 4 * 7
    for r in head["tied_rows"]:
        assert r["keys"] == list(range(max(0, r["row"] - 3), r["row"] + 1))


def test_probe_separates_packed_sequences():
    """Two sequences packed in one row (position_ids restart at 0): each row ties only on the
    keys of its own sequence, whose first token is its sink."""
    model = _llama()
    with torch.no_grad():
        model.model.layers[0].self_attn.k_proj.weight[:16] = 0.0
    ids = (1 + torch.randperm(63, generator=torch.Generator().manual_seed(5)))[:11][None]
    position_ids = torch.tensor([[0, 1, 2, 3, 4, 0, 1, 2, 3, 4, 5]])
    probe = AttentionProbe(layers=[0], heads=[0], max_listed_rows=64)
    with probe.attach(model.to(torch.bfloat16)), torch.no_grad():
        model(input_ids=ids, position_ids=position_ids, use_cache=False)
    head = probe.summary()["layers"][0]["heads"][0]
    assert (head["rows"], head["repeated_max_rows"], head["sink_tied_rows"]) == (11, 4 + 5, 4 + 5)
    for r in head["tied_rows"]:
        start = 0 if r["row"] < 5 else 5
        assert r["keys"] == list(range(start, r["row"] + 1)) and r["sink"]

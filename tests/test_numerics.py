"""CPU tests of the numerics lab: the paper's BF16 example, the metrics, the inputs, the runner."""

import json
import math
import os

import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from hf_stable_attn.numerics.bf16_addition import appendix_b_example, float_bits, two_bit_table
from hf_stable_attn.numerics.drift import dq_along_rank1, drift_score, summarize
from hf_stable_attn.numerics.exact import exact_attention
from hf_stable_attn.numerics.implementations import IMPLEMENTATIONS
from hf_stable_attn.numerics.inputs import CASES, make_inputs
from hf_stable_attn.numerics.lab import LabConfig, markdown_tables, run_lab


def test_appendix_b_example_bit_for_bit():
    ex = appendix_b_example()
    assert ex.acc_fp32 == -2.4071154594421387
    assert ex.addend_bf16 == -2.296875
    assert float_bits(ex.acc_fp32, torch.float32) == "11000000000110100000111000101110"
    assert float_bits(ex.addend_bf16, torch.float32) == "11000000000100110000000000000000"
    assert ex.sum_fp32 == -4.703990459442139
    assert float_bits(ex.sum_fp32, torch.float32) == "11000000100101101000011100010111"
    assert ex.sum_bf16 == -4.71875
    assert float_bits(ex.sum_bf16, torch.bfloat16) == "1100000010010111"
    assert ex.error == -0.014759540557861328


def test_two_bit_table_rounding_directions():
    rows = two_bit_table()
    assert [(r.tail_a, r.tail_b) for r in rows][:5] == [("00", "00"), ("00", "01"), ("00", "10"), ("00", "11"), ("01", "01")]
    assert len(rows) == 10
    even = [r for r in rows if r.shifted_out == 0]
    odd = [r for r in rows if r.shifted_out == 1]
    assert len(even) == 6 and len(odd) == 4
    # A shifted-out 0 is exact; a 1 is a tie: ties-to-even goes both ways (unbiased) ...
    assert all(r.error_exact == 0.0 for r in even)
    assert all(r.error_sticky == pytest.approx(0.0, abs=1e-3) for r in even)  # only the residual
    assert sorted(r.error_exact for r in odd) == [-0.5, -0.5, 0.5, 0.5]
    # ... unless sticky bits are set: then every sum of negative numbers rounds away from zero.
    assert all(r.error_sticky == pytest.approx(-0.5, abs=1e-3) for r in odd)


def test_drift_detects_planted_bias_and_not_noise():
    gen = torch.Generator().manual_seed(0)
    noise = torch.randn(8, 8, 512, generator=gen, dtype=torch.float64)
    clean = summarize(noise)
    assert clean.heads == 64 and not clean.biased
    assert 0.5 < clean.drift_abs_mean < 1.2  # random walk: E|N(0,1)| = 0.8
    planted = summarize(noise + 0.3)  # a bias of 0.3 sigma per token
    assert planted.biased and planted.drift_abs_mean > 5.0
    assert planted.biased_heads > 0.9 and planted.drift_signed_mean > 0
    # The verdict is per head: a bias whose sign differs between heads is still a bias.
    signs = torch.where(torch.arange(8) % 2 == 0, 1.0, -1.0).double().view(8, 1, 1)
    mixed = summarize(noise + 0.3 * signs)
    assert mixed.biased and abs(mixed.drift_signed_mean) < 1.0


def test_drift_edge_cases():
    assert drift_score(torch.zeros(3, 10)).eq(0).all()
    assert drift_score(torch.ones(100)).item() == pytest.approx(10.0)
    assert summarize(torch.full((2, 2, 8), float("nan"))).biased  # NaN never passes


def test_dq_rank1_projection_sees_eq1_error():
    gen = torch.Generator().manual_seed(1)
    b, s, h, d = 2, 256, 4, 16
    pk = torch.randn(b, h, 1, d, generator=gen, dtype=torch.float64) + 0.1 * torch.randn(b, h, s, d, generator=gen, dtype=torch.float64)
    dq_hp = torch.randn(b, s, h, d, generator=gen, dtype=torch.float64)
    noise = 1e-3 * torch.randn(b, s, h, d, generator=gen, dtype=torch.float64)
    e = 1e-3 * torch.ones(b, h, s, dtype=torch.float64)  # one-signed delta error
    eq1 = (e[..., None] * pk).transpose(1, 2)  # alpha * diag(delta_lp - delta_hp) (PK)
    assert summarize(dq_along_rank1(dq_hp + eq1 + noise, dq_hp, pk)).biased
    assert not summarize(dq_along_rank1(dq_hp + noise, dq_hp, pk)).biased


def _scores(x):
    return torch.einsum("bshd,bthd->bhst", x.q.float(), x.k.float()) * x.q.shape[-1] ** -0.5


def test_inputs_have_the_requested_structure():
    kw = dict(batch=2, heads=2, seqlen=512, head_dim=64, seed=3)
    sink = make_inputs(CASES["sink4"], **kw)
    top = _scores(sink).topk(2, dim=-1)
    assert (top.values[..., 0] == top.values[..., 1]).double().mean() > 0.9
    assert (top.indices[..., 0] < 4).double().mean() > 0.9
    near = exact_attention(make_inputs(CASES["near_tie2"], **kw), 0.125, False)
    assert near.tied_frac > 0.8 and near.exact_tie_frac < 0.05
    split = make_inputs(CASES["tile_split4_dom"], **kw)
    assert split.sink_positions == (0, 128, 256, 384)
    assert torch.equal(split.k[:, 0], split.k[:, 384])
    single = exact_attention(make_inputs(CASES["single_dom"], **kw), 0.125, False)
    assert single.tied_frac < 0.01
    for x in (sink, split):
        assert x.v.float().mean() < -0.5 and x.dout.float().mean() < -0.5
        assert x.q.dtype == torch.bfloat16 and x.q.shape == (2, 512, 2, 64)


def test_lab_finds_the_bias_and_the_fixes_remove_it():
    """End to end on the reference path: the seeded results these tests pin were measured."""
    config = LabConfig(
        cases=("random", "single_dom", "sink2_dom", "near_tie2"),
        implementations=("ref_fa2", "ref_b2", "ref_single_b2", "ref_out_fp32"),
        batch=4, heads=4, seeds=1,
    )
    result = run_lab(config, log=lambda m: None)
    biased = {(r["impl"], r["case"]): r["biased"] for r in result["rows"]}
    assert len(biased) == 16
    assert all(math.isfinite(r["delta_drift"]) and math.isfinite(r["dq_drift"]) for r in result["rows"])
    assert not any(biased[(i, "random")] for i in config.implementations)
    # FlashAttention-2 numerics: biased on dominant sinks, single or repeated, and near-ties.
    assert biased[("ref_fa2", "single_dom")] and biased[("ref_fa2", "sink2_dom")] and biased[("ref_fa2", "near_tie2")]
    # The paper's fix: removes the repeated-maximum and near-tie bias, not the single-maximum one.
    assert biased[("ref_b2", "single_dom")]
    assert not biased[("ref_b2", "sink2_dom")] and not biased[("ref_b2", "near_tie2")]
    assert not any(biased[("ref_single_b2", c)] for c in config.cases)
    md = markdown_tables(result)
    assert "ref_single_b2" in md and "single_dom" in md
    json.dumps(result)


def test_triton_implementations_are_skipped_on_cpu():
    cpu = torch.device("cpu")
    assert not IMPLEMENTATIONS["triton_b2"].supports(cpu)
    config = LabConfig(cases=("random",), implementations=("triton_fa2", "sdpa_math"), batch=1, heads=2, seeds=1)
    result = run_lab(config, log=lambda m: None)
    assert "triton_fa2" in result["unavailable"]
    assert [r["impl"] for r in result["rows"]] == ["sdpa_math"]


def test_cli_quick_writes_results(tmp_path, capsys):
    from hf_stable_attn.numerics.cli import main

    main(["bias", "--device", "cpu", "--quick", "--cases", "sink2_dom", "--impls", "ref_fa2,ref_b2", "--out", str(tmp_path)])
    printed = capsys.readouterr().out
    assert "ref_fa2" in printed and "sink2_dom" in printed
    assert {p.name for p in tmp_path.iterdir()} >= {"numerics.json", "numerics_tables.md", "delta_drift.png", "delta_cumulative.png"}


def test_training_experiment_tiny():
    import dataclasses

    from hf_stable_attn.numerics.train_experiment import TINY, train

    run = train(dataclasses.replace(TINY, steps=2), stabilize=True, log=lambda m: None)
    assert [p["step"] for p in run["points"]] == [0, 1]
    for p in run["points"]:
        assert 0.0 <= p["tied_frac"] <= 1.0
        assert math.isfinite(p["loss"]) and math.isfinite(p["delta_drift_abs_mean"])
        assert len(p["layers"]) == TINY.n_layer and len(p["layers"][0]["delta_drift"]) == TINY.n_head
        assert p["cum_delta_err_max_head"] > 0  # bf16 delta differs from float64 somewhere

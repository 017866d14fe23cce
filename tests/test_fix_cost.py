"""``benchmarks.fix_cost``: the fix's cost per target shape pooled over runs (median of the
runs' ratios), then the geometric mean over the shapes."""

from __future__ import annotations

import json

import pytest

from benchmarks import fix_cost


def _pair(fix, nofix, seqlen=4096, heads_kv=16, sustained=(None, None)):
    """Our two records of one D128 causal shape, TFLOP/s ``fix`` and ``nofix``."""
    shape = {"dtype": "bf16", "mode": "fwd_bwd", "seqlen": seqlen, "head_dim": 128,
             "causal": True, "heads_q": 16, "heads_kv": heads_kv, "batch": 4}
    return [{"impl": "stable_flash", "tflops": fix, "tflops_sustained": sustained[0], **shape},
            {"impl": "stable_flash_nofix", "tflops": nofix, "tflops_sustained": sustained[1],
             **shape}]


def _write(path, records, benchmark="attention"):
    path.write_text(json.dumps({"benchmark": benchmark, "records": records}))
    return str(path)


def test_each_shape_takes_the_median_of_its_runs(tmp_path):
    runs = [_write(tmp_path / "a.json", _pair(100.0, 101.0) + _pair(100.0, 105.0, heads_kv=2)),
            _write(tmp_path / "b.json", _pair(100.0, 104.0, sustained=(90.0, 99.0))),
            _write(tmp_path / "c.json", _pair(100.0, 102.0)
                   + _pair(100.0, 150.0, seqlen=1024))]  # outside the targets
    pooled = fix_cost.run_ratios(runs)
    assert sorted(len(v["tflops"]) for v in pooled.values()) == [1, 3]
    text = fix_cost.report(runs)
    mha = next(line for line in text.splitlines() if line.startswith("| 4096 | 128 | yes | 16/16"))
    assert "| 1.010 1.040 1.020 | 1.020 |" in mha and "| 1.100 | 1.100 |" in mha
    medians = next(line for line in text.splitlines() if line.startswith("| medians |"))
    assert medians == "| medians | 1.0349 | 1.050 | 1 of 2 |"  # sqrt(1.02 * 1.05); GQA above
    assert "| back to back | 1.1000 | 1.100 | 1 of 1 |" in text
    assert "2 of 32 target shapes" in text


def test_a_run_without_the_fix_off_adds_nothing(tmp_path):
    only_ours = _write(tmp_path / "a.json", _pair(100.0, 101.0)[:1])
    assert fix_cost.run_ratios([only_ours]) == {}


def test_an_end_to_end_file_is_refused(tmp_path):
    with pytest.raises(ValueError, match="not an attention sweep"):
        fix_cost.run_ratios([_write(tmp_path / "e2e.json", [], benchmark="e2e")])

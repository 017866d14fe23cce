"""``benchmarks.targets``: issue 4's targets over several sweeps, each shape from one run."""

from __future__ import annotations

import json

import pytest

from benchmarks import targets


def _rec(impl, tflops, seqlen=4096, causal=True, heads_kv=16, sustained=None):
    return {"impl": impl, "dtype": "bf16", "mode": "fwd_bwd", "seqlen": seqlen, "head_dim": 128,
            "causal": causal, "heads_q": 16, "heads_kv": heads_kv, "batch": 4, "tflops": tflops,
            "ms": 100.0 / tflops, "tflops_sustained": sustained}


def _shape(ours, fa2, nofix, **shape):
    return [_rec("stable_flash", ours, **shape), _rec("sdpa_flash", fa2, **shape),
            _rec("stable_flash_nofix", nofix, **shape), _rec("sdpa_cudnn", ours, **shape),
            _rec("flex", ours / 1.1, **shape)]


def _write(path, records, benchmark="attention"):
    path.write_text(json.dumps({"benchmark": benchmark, "records": records}))
    return str(path)


def _rows(text):
    return [line for line in text.splitlines() if line.startswith("| 4096 | 128 |")]


def test_a_later_file_replaces_an_earlier_ones_shape(tmp_path):
    old = _write(tmp_path / "old.json", _shape(300.0, 250.0, 330.0))  # 1.2x FA2, fix 10%
    new = _write(tmp_path / "new.json", _shape(400.0, 300.0, 404.0)  # 1.333x FA2, fix 1%
                 + _shape(400.0, 250.0, 400.0, causal=False, heads_kv=2))
    records, sources = targets.stitch([old, new])
    assert len(records) == 10 and set(sources.values()) == {"new.json"}
    text = targets.report([old, new])
    causal_row = next(r for r in _rows(text) if "| yes | 16/16 |" in r)
    assert "| 1.333 |" in causal_row and "`new.json`" in causal_row
    assert causal_row.endswith("| none |")
    fa2 = next(line for line in text.splitlines() if line.startswith("| ours / sdpa_flash"))
    assert "| 1.461 | 1.333 | 2 | met |" in fa2  # geomean of 1.333 and 1.6
    assert "Targets, back to back:" not in text  # no sustained timings in these runs
    assert "Not covered (30 of 32)" in text and "S 4096 D128 causal MHA" not in text

    _, sources = targets.stitch([new, old])  # the older run named last wins its shape
    missed = next(r for r in _rows(targets.report([new, old])) if "| yes | 16/16 |" in r)
    assert "`old.json`" in missed and "| 1.200 |" in missed
    assert missed.endswith("| ours / sdpa_flash (FA2), fix cost (nofix / fix) |")


def test_back_to_back_targets_come_from_the_sustained_rates(tmp_path):
    records = _shape(400.0, 300.0, 404.0)
    for r in records:
        r["tflops_sustained"] = r["tflops"] * (0.9 if r["impl"] == "stable_flash" else 1.0)
    text = targets.report([_write(tmp_path / "run.json", records)])
    assert "Targets, back to back:" in text
    row = _rows(text)[0]
    assert "| 1.200 | 1.122 |" in row  # ours/FA2 back to back 360 / 300; fix 404 / 360


def test_an_end_to_end_file_is_refused(tmp_path):
    e2e = _write(tmp_path / "e2e.json", [], benchmark="e2e")
    with pytest.raises(ValueError, match="not an attention sweep"):
        targets.stitch([e2e])


def test_the_target_set_has_issue_4s_32_shapes():
    assert len(set(targets.TARGET_SET)) == 32
    assert {s for s, _, _, _ in targets.TARGET_SET} == {2048, 4096, 8192, 16384}

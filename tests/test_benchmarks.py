"""CPU smoke tests of the benchmark plumbing: records, JSON schema, budget, tables.

The GPU numbers come from ``benchmarks/gpu_run.sh``; here the same code paths run on tiny shapes
with the reference backend and SDPA's CPU backends, so a broken record or table shows up in CI.
"""

from __future__ import annotations

import json
import math
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from benchmarks import (  # noqa: E402
    bench_attention, bench_e2e, gpu_clocks, make_tables, runinfo, timing,
)

RECORD_KEYS = {
    "impl", "dtype", "seqlen", "batch", "heads_q", "heads_kv", "head_dim", "causal", "mode",
    "ms", "tflops", "peak_mem_mb",
}


def test_flop_convention():
    shape = bench_attention.Shape("bf16", 1024, 4, 16, 2, 128, causal=False)
    fwd = 4.0 * 4 * 16 * 1024 * 1024 * 128
    assert bench_attention.attention_flops(shape, "fwd") == fwd
    assert bench_attention.attention_flops(shape, "bwd") == 2.5 * fwd
    assert bench_attention.attention_flops(shape, "fwd_bwd") == 3.5 * fwd
    causal = bench_attention.Shape("bf16", 1024, 4, 16, 2, 128, causal=True)
    assert bench_attention.attention_flops(causal, "fwd_bwd") == 3.5 * fwd / 2


def test_quick_sweep_keeps_tokens_fixed_and_orders_targets_first():
    args = bench_attention.parse_args(["--quick", "--device", "cuda"])
    assert args.dtypes == ["bf16"] and set(args.modes) == {"fwd", "fwd_bwd"}
    assert args.impls == list(bench_attention.IMPLS_CUDA)
    shapes = bench_attention.sweep_shapes(
        args.dtypes, args.seqlens, args.head_dims, [True, False], args.kv_groups, args.total_tokens, args.hidden
    )
    assert len(shapes) == 4 * 2 * 2 * 2
    assert {s.batch * s.seqlen for s in shapes} == {16384}
    assert {s.heads_q * s.head_dim for s in shapes} == {2048}
    assert {s.heads_q // s.heads_kv for s in shapes} == {1, 8}
    # a time budget cuts the tail: seqlen 1024 (outside the targets) comes last
    assert shapes[0].seqlen == 4096 and shapes[0].head_dim == 128
    assert {s.seqlen for s in shapes[-8:]} == {1024}


def test_rounds_start_at_a_different_implementation_each_time():
    """Each round times every prepared entry once, rotated, and ``ms`` is the rounds' median."""
    calls = []
    shape = bench_attention.Shape("bf16", 16, 1, 2, 1, 16, causal=False)
    entries = [bench_attention.Entry({"impl": name, "mode": "fwd"}, lambda name=name: calls.append(name))
               for name in "abcd"]
    entries.append(bench_attention.Entry({"impl": "refused", "mode": "fwd", "ms": None}))
    args = bench_attention.parse_args(["--device", "cpu", "--rounds", "2"])
    bench_attention.time_in_rounds(entries, shape, torch.device("cpu"), args,
                                   gpu_clocks.ClockSampler())
    reps = len(calls) // 8  # timing.median_ms calls each entry cpu_reps times per round
    assert calls[::reps] == ["a", "b", "c", "d", "c", "d", "a", "b"]
    for e in entries[:4]:
        assert len(e.record["ms_rounds"]) == 2 and e.record["tflops"] > 0
    assert entries[4].record["ms"] is None and "ms_rounds" not in entries[4].record
    assert "ms_sustained" not in entries[0].record  # --sustain-s not given


def test_sustained_rounds_follow_the_median_rounds():
    """With ``--sustain-s`` each entry also runs back to back for that long per round, after
    every ``ms`` round; its rate comes from the sustained median."""
    calls = []
    shape = bench_attention.Shape("bf16", 16, 1, 2, 1, 16, causal=False)
    entries = [bench_attention.Entry({"impl": name, "mode": "fwd"},
                                     lambda name=name: calls.append(name) or time.sleep(0.01))
               for name in "ab"]
    args = bench_attention.parse_args(["--device", "cpu", "--rounds", "1", "--sustain-s", "0.1",
                                       "--sustain-rounds", "3"])
    bench_attention.time_in_rounds(entries, shape, torch.device("cpu"), args,
                                   gpu_clocks.ClockSampler())
    median_calls = 2 * 3  # one round of cpu_reps calls each
    assert calls[:median_calls] == ["a"] * 3 + ["b"] * 3
    assert 3 * 2 * 5 <= len(calls) - median_calls <= 3 * 2 * 12  # 0.1 s of 10 ms calls
    for e in entries:
        assert len(e.record["ms_sustained_rounds"]) == 3
        assert 10 <= e.record["ms_sustained"] < 20
        flops = bench_attention.attention_flops(shape, "fwd")
        assert math.isclose(e.record["tflops_sustained"],
                            flops / (e.record["ms_sustained"] * 1e-3) / 1e12)


def test_attention_cpu_smoke_records_budget_and_tables(tmp_path):
    out = tmp_path / "attention.json"
    result = bench_attention.main([
        "--device", "cpu", "--dtypes", "bf16", "--total-tokens", "64", "--hidden", "32",
        "--seqlens", "32", "16", "--head-dims", "16", "--kv-groups", "2", "--causal", "true",
        "--impls", "stable_flash", "stable_flash_nofix", "sdpa_math", "sdpa_cudnn",
        "--time-budget-s", "0", "--rounds", "2", "--out", str(out),
    ])
    data = json.loads(out.read_text())
    assert data["records"] == result["records"]
    assert {"gpu", "versions", "date", "records"} <= data.keys()
    assert data["gpu"] == "cpu" and data["versions"]["torch"]
    # the budget of 0 s lets the first shape run and nothing after it
    assert {r["seqlen"] for r in data["records"]} == {32}
    assert [s["seqlen"] for s in data["not_run"]] == [16]
    assert len(data["records"]) == 4 * 3
    for r in data["records"]:
        assert RECORD_KEYS <= r.keys()
        assert (r["heads_q"], r["heads_kv"], r["batch"]) == (2, 1, 2)
        if r["impl"] == "sdpa_cudnn":  # no cuDNN on the CPU: a refusal, recorded
            assert r["error"] and r["ms"] is None and r["tflops"] is None
            continue
        assert "error" not in r, r
        assert r["ms"] > 0 and math.isfinite(r["ms"])
        assert len(r["ms_rounds"]) == 2 and r["ms"] == pytest.approx(statistics.median(r["ms_rounds"]))
        shape = bench_attention.Shape(**{k: r[k] for k in ("dtype", "seqlen", "batch", "heads_q", "heads_kv", "head_dim", "causal")})
        assert r["tflops"] == pytest.approx(bench_attention.attention_flops(shape, r["mode"]) / r["ms"] / 1e9)
        assert r["rel_err"] < 2e-2  # NaN fails here too
        assert r["compile_s"] >= 0
    sdpa = [r for r in data["records"] if r["impl"] == "sdpa_math"]
    assert {r["gqa_via"] for r in sdpa} == {"enable_gqa"}

    tables = make_tables.render([str(out)])
    assert "#### bf16 fwd_bwd: TFLOP/s" in tables and "#### bf16 bwd: TFLOP/s" in tables
    assert "fix cost" in tables and "ours/cuDNN" in tables
    assert "| 32 | 16 | yes | 2/1 | 2 |" in tables
    assert "#### Refusals" in tables and "`sdpa_cudnn`" in tables
    assert "Note:" not in tables
    noted = tmp_path / "noted.json"
    noted.write_text(json.dumps({**data, "note": "ran the code of commit abc1234"}))
    assert "\n\nNote: ran the code of commit abc1234.\n" in make_tables.render([str(noted)])
    noted.write_text(json.dumps({**data, "note": "a note that ends a sentence."}))
    assert "\n\nNote: a note that ends a sentence.\n" in make_tables.render([str(noted)])
    doc = tmp_path / "doc.md"
    doc.write_text(f"intro\n{make_tables.BEGIN}\nold\n{make_tables.END}\noutro\n")
    make_tables.main([str(out), "--doc", str(doc)])
    text = doc.read_text()
    assert text.startswith("intro\n") and text.endswith("outro\n") and "old" not in text and "sdpa_math" in text


def test_tables_list_the_tile_configs_our_kernels_ran_with():
    def rec(impl, **tiles):
        return {"impl": impl, "dtype": "bf16", "mode": "fwd_bwd", "seqlen": 4096, "head_dim": 128,
                "causal": False, "heads_q": 16, "heads_kv": 2, "batch": 4, "tflops": 400.0, **tiles}

    data = {"gpu": "stand-in", "versions": {}, "date": "today", "records": [
        rec("stable_flash", tile_fwd=[64, 64, 4, 3, True], tile_dq=[128, 64, 8, 3, True],
            tile_dkdv=[32, 64, 4, 3, False]),
        rec("stable_flash_nofix", tile_fwd=[128, 128, 8, 3, False]), rec("sdpa_cudnn")]}
    text = "\n".join(make_tables.attention_section(data, "run.json"))
    assert ("| bf16 | 4096 | 128 | no | 16/2 | 64x64 w4 s3 TMA | 128x128 w8 s3 | 128x64 w8 s3 TMA "
            "| 32x64 w4 s3 |") in text
    untiled = {**data, "records": [rec("stable_flash"), rec("sdpa_cudnn")]}  # e.g. CPU runs
    assert "Tile configs" not in "\n".join(make_tables.attention_section(untiled, "run.json"))


def test_records_say_how_the_tuner_chose_each_new_launch_key(monkeypatch):
    """``with_tiles`` adds ``tuner_<part>`` for the launch keys a call chose first: the tuner's
    medians, fastest first, or where the pick came from; a key chosen before adds nothing."""
    from hf_stable_attn.kernels import LAUNCHES

    for launch in LAUNCHES.values():
        for name in ("chosen", "timings", "picked_by"):
            monkeypatch.setattr(launch, name, {})
        monkeypatch.setattr(launch, "last", None)
    fwd, dq, dkdv = LAUNCHES["fwd"], LAUNCHES["dq"], LAUNCHES["dkdv"]
    a, b = (64, 64, 4, 2, True, 96), (128, 64, 8, 3, False, None)
    dkdv.chosen["old"] = b

    def prepared():
        fwd.chosen["k"] = fwd.last = a
        fwd.timings["k"], fwd.picked_by["k"] = {b: 2.0, a: 1.23456}, "timed"
        dq.chosen["k"] = dq.last = b
        dq.picked_by["k"] = "disk cache"
        dkdv.last = b
        return bench_attention.Entry({"impl": "stable_flash"})

    fastest_first = [[list(a), 1.2346], [list(b), 2.0]]
    assert bench_attention.with_tiles(prepared).record == {
        "impl": "stable_flash", "tile_fwd": list(a), "tuner_fwd": [fastest_first],
        "tile_dq": list(b), "tuner_dq": ["disk cache"], "tile_dkdv": list(b)}


def test_target_summary_ratios():
    def rec(impl, tflops, seqlen=4096, head_dim=128):
        return {"impl": impl, "dtype": "bf16", "mode": "fwd_bwd", "seqlen": seqlen, "head_dim": head_dim,
                "causal": True, "heads_q": 16, "heads_kv": 16, "batch": 4, "tflops": tflops}

    records = [rec("stable_flash", 400.0), rec("stable_flash_nofix", 420.0), rec("sdpa_flash", 300.0),
               rec("flex", 410.0), rec("sdpa_cudnn", 500.0),
               rec("stable_flash", 1.0, seqlen=1024), rec("flex", 1000.0, seqlen=1024)]  # outside the targets
    rows = {line.split(" | ")[0].strip("| "): line for line in make_tables.target_summary(records)[2:]}
    assert "1.333" in rows["ours / sdpa_flash (FA2)"] and rows["ours / sdpa_flash (FA2)"].endswith("| met |")
    assert "0.976" in rows["ours / flex"] and "not met" in rows["ours / flex"]
    assert "0.800" in rows["ours / sdpa_cudnn"] and rows["ours / sdpa_cudnn"].endswith("| met |")
    assert "1.050" in rows["fix cost (nofix / fix)"] and "not met" in rows["fix cost (nofix / fix)"]
    assert make_tables.FORWARD_FIX_COST not in rows  # no fwd records: no forward-derived row


def test_target_summary_counts_the_shapes_that_miss():
    """A target met on the geometric mean but not by every shape says how many miss."""
    def rec(impl, tflops, seqlen):
        return {"impl": impl, "dtype": "bf16", "mode": "fwd_bwd", "seqlen": seqlen, "head_dim": 64,
                "causal": False, "heads_q": 32, "heads_kv": 32, "batch": 4, "tflops": tflops}

    records = [rec("stable_flash", 400.0, 2048), rec("stable_flash_nofix", 408.0, 2048),  # 1.020
               rec("stable_flash", 400.0, 4096), rec("stable_flash_nofix", 414.0, 4096),  # 1.035
               rec("stable_flash", 400.0, 8192), rec("stable_flash_nofix", 404.0, 8192)]  # 1.010
    summary = make_tables.target_summary(records)[2:]
    rows = {line.split(" | ")[0].strip("| "): line for line in summary}
    assert rows["fix cost (nofix / fix)"].endswith(
        "| 1.035 | 3 | met on geomean; 1 of 3 shapes miss |")


def test_sustained_targets_and_table():
    """A run with ``--sustain-s`` gets the targets and a table from the back-to-back rates, each
    cell with its SM clock and power-cap share; a run without gets neither."""
    def rec(impl, tflops, sustained, mhz):
        return {"impl": impl, "dtype": "bf16", "mode": "fwd_bwd", "seqlen": 4096, "head_dim": 64,
                "causal": True, "heads_q": 32, "heads_kv": 32, "batch": 4, "tflops": tflops,
                "tflops_sustained": sustained, "sustained_sm_clock_mhz": mhz,
                "sustained_power_capped": 1.0}

    records = [rec("stable_flash", 330.0, 300.0, 1830), rec("stable_flash_nofix", 340.0, 309.0, 1845),
               rec("sdpa_flash", 250.0, 240.0, 1980)]
    data = {"gpu": "stand-in", "versions": {}, "date": "today", "records": records}
    text = "\n".join(make_tables.attention_section(data, "run.json"))
    summaries = text.split("Targets from the same calls run back to back")
    assert len(summaries) == 2
    assert "1.320" in summaries[0] and "1.250" in summaries[1]  # ours / FA2: median, back to back
    assert "| 1.030 | 1.030 | 1 | met |" in summaries[1]  # fix cost 309 / 300
    assert "| 300 (1830, 1.00) | 309 (1845, 1.00) | 240 (1980, 1.00) | 1.25 | 1.030 |" in text
    plain = {**data, "records": [{k: v for k, v in r.items() if "sustained" not in k}
                                 for r in records]}
    assert "back to back" not in "\n".join(make_tables.attention_section(plain, "run.json"))


def test_fix_cost_from_forward_timings():
    def rec(impl, mode, ms, seqlen=4096):
        return {"impl": impl, "dtype": "bf16", "mode": mode, "seqlen": seqlen, "head_dim": 64, "causal": False,
                "heads_q": 32, "heads_kv": 32, "batch": 4, "ms": ms, "tflops": 1.0 / ms}

    records = [rec("stable_flash", "fwd", 1.2), rec("stable_flash_nofix", "fwd", 1.0),
               rec("stable_flash", "fwd_bwd", 5.0), rec("stable_flash_nofix", "fwd_bwd", 4.0),
               rec("stable_flash", "fwd", 9.0, seqlen=1024), rec("stable_flash_nofix", "fwd", 1.0, seqlen=1024),
               rec("stable_flash_nofix", "fwd_bwd", 1.0, seqlen=1024)]  # outside the targets
    assert make_tables.forward_fix_costs(records) == pytest.approx([1.05])
    rows = {line.split(" | ")[0].strip("| "): line for line in make_tables.target_summary(records)[2:]}
    assert ("| 1.050 | 1.050 | 1 | not met; 1 of 1 shapes miss |"
            in rows[make_tables.FORWARD_FIX_COST])
    assert "1.250" in rows["fix cost (nofix / fix)"]  # the direct ratio carries the backward's spread


def test_splice_needs_markers():
    with pytest.raises(ValueError, match="markers"):
        make_tables.splice("no markers here", "tables")


def test_render_names_a_file_that_is_not_a_sweep_or_e2e_result(tmp_path):
    other = tmp_path / "env.json"  # e.g. `hf-stable-attn env --json`, caught by a glob
    other.write_text(json.dumps({"versions": {"torch": "2.13.0"}, "gpus": []}))
    sinks = tmp_path / "sinks.json"
    sinks.write_text(json.dumps({"benchmark": "sinks", "records": []}))
    for path, kind in ((other, "None"), (sinks, "'sinks'")):
        with pytest.raises(ValueError, match=f"{path.name}: not a results file .* is {kind}"):
            make_tables.render([str(path)])


def test_e2e_cpu_smoke(tmp_path):
    out = tmp_path / "e2e.json"
    bench_e2e.main([
        "--device", "cpu", "--tiny", "--models", "gpt2-tiny", "--impls", "stable_flash", "sdpa",
        "--steps", "1", "--warmup-steps", "0", "--gen-prompts", "2", "--gen-prompt-len", "4",
        "--gen-new-tokens", "2", "--gen-reps", "1", "--out", str(out),
    ])
    data = json.loads(out.read_text())
    assert data["gpu"] == "cpu" and data["benchmark"] == "e2e" and data["not_run"] == []
    by = {(r["impl"], r["mode"]): r for r in data["records"]}
    assert set(by) == {("stable_flash", "train"), ("sdpa", "train"), ("stable_flash", "generate"), ("sdpa", "generate")}
    for r in by.values():
        assert "error" not in r, r
        assert {"impl", "model", "mode", "tokens_per_s", "ms_per_step", "peak_mem_mb"} <= r.keys()
        assert r["tokens_per_s"] > 0 and r["ms_per_step"] > 0
    # same seed, same weights, same batch: the attention implementations must agree on the loss
    assert by[("stable_flash", "train")]["loss"] == pytest.approx(by[("sdpa", "train")]["loss"], rel=1e-2)
    tables = make_tables.render([str(out)])
    assert "| gpt2-tiny | train | 2×64 | autocast |" in tables and "stable_flash / sdpa" in tables


def test_e2e_nofix_entry_runs_stable_flash_with_the_fix_off(tmp_path):
    model = bench_e2e.build_model(bench_e2e.TINY_MODELS["gpt2-tiny"], bench_e2e.NOFIX,
                                  torch.device("cpu"), torch.float32)
    assert model.config._attn_implementation == "stable_flash"
    assert model.config.stable_flash["stabilize"] is False
    out = tmp_path / "e2e.json"
    bench_e2e.main([
        "--device", "cpu", "--tiny", "--models", "gpt2-tiny", "--impls", "stable_flash",
        bench_e2e.NOFIX, "--gen-impls", "none", "--steps", "1", "--warmup-steps", "0",
        "--out", str(out),
    ])
    by = {r["impl"]: r for r in json.loads(out.read_text())["records"]}
    assert "error" not in by[bench_e2e.NOFIX], by[bench_e2e.NOFIX]
    # random weights give no tied rows worth a visible change: the losses agree to rounding
    assert by[bench_e2e.NOFIX]["loss"] == pytest.approx(by["stable_flash"]["loss"], rel=1e-3)
    tables = make_tables.render([str(out)])
    ratio = by[bench_e2e.NOFIX]["tokens_per_s"] / by["stable_flash"]["tokens_per_s"]
    assert "fix cost" in tables and f"| {ratio:.3f} |" in tables


def test_e2e_generation_with_a_static_cache(tmp_path):
    """``--gen-cache static`` records ``generate_static`` entries, exactly the asked new tokens."""
    out = tmp_path / "e2e.json"
    bench_e2e.main([
        "--device", "cpu", "--tiny", "--models", "llama-tiny", "--impls", "none",
        "--gen-impls", "stable_flash", "sdpa", "--gen-prompts", "2", "--gen-prompt-len", "4",
        "--gen-new-tokens", "3", "--gen-reps", "1", "--gen-cache", "static", "--out", str(out),
    ])
    records = json.loads(out.read_text())["records"]
    assert {(r["impl"], r["mode"]) for r in records} == {("stable_flash", "generate_static"),
                                                         ("sdpa", "generate_static")}
    for r in records:
        assert "error" not in r, r
        assert r["new_tokens"] == 3 and r["latency_ms"] == pytest.approx(3 * r["ms_per_step"])
    assert "| llama-tiny | generate_static | 2×4 | bf16 |" in make_tables.render([str(out)])


def test_e2e_compiled_training_on_a_padded_batch(tmp_path):
    """``--compile`` and ``--train-left-pad``: compiled training steps on left-padded rows, the
    records say so, and both attention implementations reach the same loss."""
    from torch._dynamo.utils import counters

    counters.clear()
    out = tmp_path / "e2e.json"
    bench_e2e.main([
        "--device", "cpu", "--tiny", "--models", "gpt2-tiny", "--impls", "stable_flash", "sdpa",
        "--gen-impls", "none", "--steps", "1", "--warmup-steps", "0", "--train-left-pad", "16",
        "--compile", "aot_eager", "--out", str(out),
    ])
    records = json.loads(out.read_text())["records"]
    assert len(records) == 2
    for r in records:
        assert "error" not in r, r
        assert r["left_pad"] == 16 and r["compile_backend"] == "aot_eager"
    assert records[0]["loss"] == pytest.approx(records[1]["loss"], rel=1e-2)
    assert counters["stats"]["unique_graphs"] > 0  # the model ran compiled
    assert "| gpt2-tiny | train | 2×64, left pad 16, compiled (aot_eager) | autocast |" in \
        make_tables.render([str(out)])
    bench_e2e.main([
        "--device", "cpu", "--tiny", "--models", "gpt2-tiny", "--impls", "sdpa",
        "--gen-impls", "none", "--steps", "1", "--warmup-steps", "0", "--out", str(out),
    ])
    (unpadded,) = json.loads(out.read_text())["records"]
    assert unpadded["loss"] != pytest.approx(records[1]["loss"], rel=1e-5)  # the padding counted


def test_e2e_training_in_several_processes(tmp_path):
    """``--processes 2``: each training entry runs in two fresh processes; the record holds both
    step times and their median, both first-step times and the first process's as ``compile_s``,
    and the tables list them."""
    out = tmp_path / "e2e.json"
    bench_e2e.main([
        "--device", "cpu", "--tiny", "--models", "gpt2-tiny", "--impls", "stable_flash",
        "--gen-impls", "none", "--steps", "1", "--warmup-steps", "0", "--processes", "2",
        "--out", str(out),
    ])
    (record,) = json.loads(out.read_text())["records"]
    assert "error" not in record, record
    times = record["ms_per_step_processes"]
    assert len(times) == 2 and all(t > 0 for t in times)
    assert record["ms_per_step"] == pytest.approx(sum(times) / 2)
    assert record["tokens_per_s"] == pytest.approx(2 * 64 / (record["ms_per_step"] * 1e-3))
    firsts = record["compile_s_processes"]
    assert len(firsts) == 2 and record["compile_s"] == firsts[0]
    assert "gpt2-tiny train `stable_flash` " + ", ".join(f"{t:.1f}" for t in times) in make_tables.render([str(out)])


def _fake_processes(monkeypatch, failing=()):
    """Replace the fresh processes of ``--processes`` by a stand-in that records the order of
    the entries it is asked for and writes a record whose ms per step is 10 x its call number
    (``failing`` implementations exit with status 1). Returns the list of calls."""
    calls = []
    real_run = subprocess.run

    def run(cmd, **kwargs):
        if "benchmarks.bench_e2e" not in cmd:  # git, asked for the results' header
            return real_run(cmd, **kwargs)
        impl = cmd[cmd.index("--impls") + 1]
        calls.append(impl)
        if impl in failing:
            return subprocess.CompletedProcess(cmd, 1, "", "refused")
        record = {"impl": impl, "ms_per_step": 10.0 * len(calls), "tokens_per_s": 1.0,
                  "peak_mem_mb": None, "compile_s": 0.5, "loss": 1.0}
        Path(cmd[cmd.index("--out") + 1]).write_text(json.dumps({"records": [record]}))
        return subprocess.CompletedProcess(cmd, 0, "", "")

    monkeypatch.setattr(bench_e2e.subprocess, "run", run)
    return calls


def test_e2e_processes_run_in_rounds(tmp_path, monkeypatch):
    """``--processes 2`` with two entries runs A, B, A, B, so that a slow stretch of the machine
    falls on both; each record merges its own two processes."""
    calls = _fake_processes(monkeypatch)
    out = tmp_path / "e2e.json"
    bench_e2e.main(["--device", "cpu", "--tiny", "--models", "gpt2-tiny", "--impls", "stable_flash",
                    "sdpa", "--gen-impls", "none", "--processes", "2", "--out", str(out)])
    assert calls == ["stable_flash", "sdpa", "stable_flash", "sdpa"]
    by = {r["impl"]: r for r in json.loads(out.read_text())["records"]}
    assert by["stable_flash"]["ms_per_step_processes"] == [10.0, 30.0]
    assert by["sdpa"]["ms_per_step_processes"] == [20.0, 40.0]
    assert by["sdpa"]["ms_per_step"] == 30.0
    assert by["sdpa"]["tokens_per_s"] == pytest.approx(2 * 64 / 0.030)


def test_e2e_a_failed_process_ends_its_entry(tmp_path, monkeypatch):
    """An entry whose process fails records the error and is not run in later rounds; the
    others go on."""
    calls = _fake_processes(monkeypatch, failing=("sdpa",))
    out = tmp_path / "e2e.json"
    data = bench_e2e.main(["--device", "cpu", "--tiny", "--models", "gpt2-tiny", "--impls",
                           "stable_flash", "sdpa", "--gen-impls", "none", "--processes", "2",
                           "--out", str(out)])
    assert calls == ["stable_flash", "sdpa", "stable_flash"]
    by = {r["impl"]: r for r in data["records"]}
    assert "exited with 1" in by["sdpa"]["error"] and by["sdpa"]["tokens_per_s"] is None
    assert by["stable_flash"]["ms_per_step_processes"] == [10.0, 30.0]
    assert data["not_run"] == []


def test_e2e_generation_in_several_processes(tmp_path):
    """``--processes 2`` for a generation entry: median ms per new token over two processes, the
    latency and throughput from it; the processes get ``--gen-left-pad``."""
    out = tmp_path / "e2e.json"
    bench_e2e.main([
        "--device", "cpu", "--tiny", "--models", "gpt2-tiny", "--impls", "none",
        "--gen-impls", "stable_flash", "--gen-prompts", "2", "--gen-prompt-len", "8",
        "--gen-new-tokens", "4", "--gen-reps", "1", "--processes", "2", "--gen-left-pad", "3",
        "--out", str(out),
    ])
    (record,) = json.loads(out.read_text())["records"]
    assert "error" not in record, record
    assert record["left_pad"] == 3
    assert record["mode"] == "generate" and record["new_tokens"] == 4
    times = record["ms_per_step_processes"]
    assert len(times) == 2 and all(t > 0 for t in times)
    assert record["ms_per_step"] == pytest.approx(sum(times) / 2)
    assert record["latency_ms"] == pytest.approx(4 * record["ms_per_step"])
    assert record["tokens_per_s"] == pytest.approx(2 / (record["ms_per_step"] * 1e-3))


def test_e2e_processes_must_be_positive():
    with pytest.raises(SystemExit):
        bench_e2e.parse_args(["--processes", "0"])


def test_e2e_left_padding_must_leave_a_token():
    with pytest.raises(SystemExit):
        bench_e2e.parse_args(["--gen-prompt-len", "8", "--gen-left-pad", "8"])
    with pytest.raises(SystemExit):
        bench_e2e.parse_args(["--tiny", "--models", "gpt2-tiny", "--train-left-pad", "64"])


def test_host_launcher_times_each_part():
    """The host-time script runs our launchers with no-op kernels (in a child process: it replaces
    the package's kernels for the rest of its process)."""
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.host_launcher", "--rounds", "1", "--calls", "2"],
        capture_output=True, text=True, cwd=Path(__file__).resolve().parents[1], timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    lines = dict(line.rsplit(": ", 1) for line in done.stdout.strip().splitlines())
    assert set(lines) == {"hf_stable_attn.kernels fwd", "hf_stable_attn.kernels bwd"}
    assert all(float(v.split()[0]) > 0 for v in lines.values())


def test_tune_kernel_shapes_and_their_compile_stand_ins():
    """The tuner compiles on small stand-ins: they must keep every compile-time property of the
    timed shape (head dim, heads, group, causal, divisibility of lengths by 16)."""
    from benchmarks import tune_kernel

    shapes = tune_kernel.default_shapes(16384, 2048)
    assert {(s.head_dim, s.causal, s.heads_q // s.heads_kv) for s in shapes} == set(tune_kernel.DEFAULT_CASES)
    for shape in shapes + tune_kernel.default_shapes(16384, 2048, [256]):
        small = tune_kernel.small(shape)
        assert shape.batch * shape.seqlen == 16384 and shape.heads_q * shape.head_dim == 2048
        assert (small.head_dim, small.heads_q, small.heads_kv, small.causal) == (
            shape.head_dim, shape.heads_q, shape.heads_kv, shape.causal)
        assert small.seqlen % 16 == 0 and shape.seqlen % 16 == 0
        assert min(small.seqlen, shape.seqlen) >= tune_kernel.TMA_MIN_SEQLEN  # TMA in both
    assert len(tune_kernel.candidates("fwd_nofix", "off")) == 36
    assert len(tune_kernel.candidates("dkdv", "off")) == 32
    tma = tune_kernel.candidates("dkdv", "only")  # TMA kernels: 3 stages or more
    assert len(tma) == 16 and all(c[4] and c[3] >= 3 for c in tma)
    assert len(tune_kernel.candidates("fwd")) == 36 + 24


def test_tune_kernel_shapes_from_the_command_line():
    """``--seqlen`` and ``--cases D:CAUSAL:GROUP`` pick the tuned shapes at a fixed token count."""
    from benchmarks import tune_kernel

    cases = [tune_kernel.parse_case(text) for text in ("64:1:1", "128:0:8")]
    assert cases == [(64, True, 1), (128, False, 8)]
    shapes = tune_kernel.default_shapes(16384, 2048, seqlen=2048, cases=cases)
    assert [(s.seqlen, s.batch, s.heads_q, s.heads_kv, s.head_dim, s.causal) for s in shapes] == [
        (2048, 8, 32, 32, 64, True), (2048, 8, 16, 2, 128, False)]


def test_tune_kernel_scores_a_config_against_the_oracles():
    """``--check``: a result equal to the float64 oracle passes the flash rule at any part; one
    that is off by more than 3x plain bf16's error fails it, NaN fails it."""
    from benchmarks import tune_kernel
    from benchmarks.bench_attention import Shape

    shape = Shape("bf16", 48, 2, 4, 2, 16, True)
    gen = torch.Generator().manual_seed(3)
    tensors = [torch.randn(2, 48, h, 16, generator=gen).to(torch.bfloat16) for h in (4, 2, 2, 4)]
    exact = tune_kernel.oracle_results(shape, tensors, torch.float64)
    plain = tune_kernel.oracle_results(shape, tensors, torch.bfloat16)
    assert exact["dkdv"][0].shape == tensors[1].shape  # summed over the KV group
    assert all(g.dtype == torch.float64 for g in (*exact["dq"], *exact["dkdv"]))  # not rounded
    lse = torch.zeros(2, 4, 48)
    forward, backward = (exact["fwd"][0], lse), (*exact["dq"], *exact["dkdv"])
    for part, got in (("fwd", forward), ("dq", backward), ("dkdv", backward)):
        scored = tune_kernel.config_errors(part, got, exact, plain)
        assert scored["err"] == 0 and scored["plain_err"] > 0 and scored["flash_rule"]
    off = (backward[0], backward[1], backward[2] + 4 * plain["dkdv"][1].double().abs().max())
    assert not tune_kernel.config_errors("dkdv", off, exact, plain)["flash_rule"]
    assert tune_kernel.config_errors("dq", off, exact, plain)["flash_rule"]  # dq untouched
    nan = (torch.full_like(forward[0], float("nan")), lse)
    assert not tune_kernel.config_errors("fwd_nofix", nan, exact, plain)["flash_rule"]


def test_compare_variants_takes_each_configs_fastest_run(tmp_path):
    """Per (part, shape): each side's fastest run per config, the median of the per-config
    ratios and the ratio of the fastest configs; failed configs and one-sided configs left out."""
    from benchmarks import compare_variants

    def run(name, times):
        records = [dict(part="fwd", head_dim=64, causal=True, heads_kv=4, block_m=bm, block_n=64,
                        num_warps=4, num_stages=3, tma=False, ms=ms) for bm, ms in times]
        path = tmp_path / name
        path.write_text(json.dumps({"records": records}))
        return str(path)

    base = [run("a1.json", [(32, 2.0), (64, 1.0), (128, None)]),
            run("a2.json", [(32, 1.6), (64, 1.2)])]
    variant = [run("b1.json", [(32, 1.2), (64, 1.1), (16, 0.5)])]
    (row,) = compare_variants.compare(compare_variants.fastest_per_config(base),
                                      compare_variants.fastest_per_config(variant))
    assert (row["part"], row["head_dim"], row["causal"], row["heads_kv"], row["configs"]) == (
        "fwd", 64, True, 4, 2)
    assert row["median_change"] == pytest.approx(statistics.median([1.2 / 1.6 - 1, 1.1 / 1.0 - 1]))
    assert row["best_change"] == pytest.approx(1.1 / 1.0 - 1)


def test_launch_order_sim_balanced_order_is_the_kernels_and_ends_evener():
    """The simulated balanced order is a permutation of the grid's programs, heaviest tile first
    within each group, and in the model it ends closer to an even split than the grid's order."""
    from benchmarks import launch_order_sim as sim

    tiles, columns = 32, 21
    grid, balanced = sim.grid_order(tiles, columns), sim.balanced_order(tiles, columns, 8)
    assert sorted(grid) == sorted(balanced)
    assert balanced[:8] == [tiles - 1] * 8
    assert balanced[16 * tiles:16 * tiles + 5] == [tiles - 1] * 5
    assert sim.makespan_over_even_split([0] * 264, 264) == pytest.approx(0.0)
    grid_over = sim.makespan_over_even_split(sim.grid_order(32, 64), 264)
    balanced_over = sim.makespan_over_even_split(sim.balanced_order(32, 64, 8), 264)
    assert balanced_over < 0.01 < 0.05 < grid_over


def test_rotated_rounds_start_each_round_at_another_timer():
    order = []
    timers = [lambda name=name, ms=ms: order.append(name) or ms
              for name, ms in zip("abc", (1.0, 2.0, 3.0))]
    laps = timing.rotated_rounds(timers, 3)
    assert order == ["a", "b", "c", "b", "c", "a", "c", "a", "b"]
    assert laps == [[1.0] * 3, [2.0] * 3, [3.0] * 3]


def test_interleaved_medians_warm_each_call_then_time_it_every_round():
    calls = {"x": 0, "y": 0}

    def call(name):
        calls[name] += 1

    fns = {name: (lambda name=name: call(name)) for name in calls}
    med, rounds = timing.interleaved_medians(fns, 2, torch.device("cpu"))
    assert set(med) == set(rounds) == {"x", "y"}
    assert all(len(v) == 2 and med[n] >= 0 for n, v in rounds.items())
    assert calls == {"x": 1 + 2 * 3, "y": 1 + 2 * 3}  # one warm-up, cpu_reps=3 per round


def test_interleaved_medians_back_to_back():
    """With ``sustain_s`` each round runs a call back to back for that long (10 ms calls, 0.1 s:
    about 10 calls a round) and reports its time per call."""
    calls = {"x": 0}

    def call():
        calls["x"] += 1
        time.sleep(0.01)

    med, rounds = timing.interleaved_medians({"x": call}, 2, torch.device("cpu"), sustain_s=0.1)
    assert 1 + 2 * 5 <= calls["x"] <= 1 + 2 * 12
    assert len(rounds["x"]) == 2 and 10 <= med["x"] < 20


def _commit_all(root: Path, message: str) -> str:
    git = ["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run(git + ["add", "-A"], check=True)
    subprocess.run(git + ["commit", "-qm", message], check=True)
    return subprocess.run(git + ["rev-parse", "HEAD"], check=True, capture_output=True,
                          text=True).stdout.strip()


def test_source_digest_names_the_code_in_a_tree_and_in_its_commit(tmp_path):
    """The digest of files on disk equals their commit's, moves with the code (not with other
    files) and leads back to the commit."""
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / "hf_stable_attn").mkdir()
    (tmp_path / "kernels").mkdir()
    (tmp_path / "hf_stable_attn" / "ops.py").write_text("A = 1\n")
    (tmp_path / "kernels" / "flash.py").write_text("B = 2\n")
    (tmp_path / "README.md").write_text("docs\n")
    first = _commit_all(tmp_path, "first")
    digest = runinfo.source_digest(tmp_path)
    assert digest == runinfo.source_digest(tmp_path, "HEAD")
    (tmp_path / "README.md").write_text("other docs\n")
    (tmp_path / "kernels" / "notes.txt").write_text("not code\n")
    assert runinfo.source_digest(tmp_path) == digest
    (tmp_path / "kernels" / "flash.py").write_text("B = 3\n")
    assert runinfo.source_digest(tmp_path) != digest
    second = _commit_all(tmp_path, "second")
    assert runinfo.source_digest(tmp_path, second) == runinfo.source_digest(tmp_path)
    assert runinfo.commits_with_digest(digest, tmp_path) == [first[:12]]


def test_results_headers_carry_the_source_digest():
    head = runinfo.header("attention", torch.device("cpu"), {})
    assert head["versions"]["hf_stable_attn_source"] == runinfo.source_digest()
    line = make_tables._run_line({**head, "records": []}, "x.json")
    assert f"source {runinfo.source_digest()}" in line


def test_sinks_benchmark_cpu_smoke(tmp_path):
    """bench_sinks on the CPU: its eager peer is gpt-oss's attention (the float64 oracle's, with
    a sliding window too), and every implementation runs, times and matches its reference."""
    from benchmarks import bench_sinks
    from hf_stable_attn.testing import attention_oracle

    q, k, v = (torch.randn(1, 40, h, 8, dtype=torch.float64) for h in (4, 2, 2))
    sinks = torch.randn(4, dtype=torch.float64)
    for window in (None, 7):
        exact = attention_oracle(q, k, v, causal=True, sinks=sinks,
                                 window_left=-1 if window is None else window - 1)
        assert torch.allclose(bench_sinks.eager_sinks(q, k, v, sinks, window), exact)
    result = bench_sinks.main(["--device", "cpu", "--total-tokens", "64", "--heads", "4", "2",
                               "--head-dim", "16", "--seqlens", "32", "--windows", "none", "8",
                               "--rounds", "1", "--out-dir", str(tmp_path)])
    saved = json.loads(next(tmp_path.glob("cpu-*-sinks.json")).read_text())
    assert saved["records"] == result["records"] and len(saved["records"]) == 6
    for r in saved["records"]:
        assert "error" not in r and r["ms"] > 0 and r["tflops"] > 0
        assert r["rel_err"] < 0.01, r


def test_tune_kernel_whole_step_wraps_each_part_in_a_forward_and_backward():
    """``--whole-step``: a forward config runs before the default backward, which gets its
    ``(out, lse)``; a dQ or dK/dV config runs after the default forward; the FLOPs counted are
    then the forward + backward's (stand-in launchers record the calls)."""
    from types import SimpleNamespace

    from benchmarks import tune_kernel

    calls = []
    runner = object.__new__(tune_kernel.Runner)
    runner.fwd_mod = SimpleNamespace(
        flash_attn_fwd=lambda q, k, v, **kw: calls.append(("fwd", kw["stabilize"])) or ("O", "L"))
    runner.bwd_mod = SimpleNamespace(
        flash_attn_bwd=lambda dout, q, k, v, out, lse, **kw: calls.append(("bwd", out, lse))
        or ("dq", "dk", "dv"))
    shape = tune_kernel.default_shapes(16384, 2048, seqlen=2048, cases=[(64, True, 1)])[0]
    tensors = tuple(torch.zeros(1, dtype=torch.bfloat16) for _ in range(4))

    def part_alone():
        calls.append(("config",))
        return ("O*", "L*")

    step = runner.whole_step("fwd_nofix", part_alone, shape, tensors)
    assert step() == ("dq", "dk", "dv")
    assert calls == [("config",), ("bwd", "O*", "L*")]
    calls.clear()
    step = runner.whole_step("dkdv", part_alone, shape, tensors)
    step()
    assert calls == [("fwd", True), ("config",)]
    assert [tune_kernel.timed_mode(p, w) for p, w in
            [("fwd", False), ("dq", False), ("dkdv", True), ("fwd_nofix", True)]] == [
        "fwd", "bwd", "fwd_bwd", "fwd_bwd"]

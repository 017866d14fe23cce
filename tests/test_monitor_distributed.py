"""The stability monitor in 2 CPU processes (gloo): DDP, FSDP2 ``fully_shard`` and FSDP1.

One ``torch.distributed.run`` launch of tests/distributed_monitor_worker.py trains a tiny GPT-2 for
a few optimizer steps in each mode. The checks here, in this single process: only rank 0 wrote a
log, the weights really were sharded (FSDP), and every logged spectral norm equals (1e-5 relative)
that of a single-process monitor replaying the same weights, rebuilt from the ranks' own
parameters (FSDP2: the dim-0 shards concatenated, without the monitor's gathering).
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from distributed_monitor_worker import STEPS, make_monitor, tiny_gpt2  # noqa: E402

WORKER = Path(__file__).with_name("distributed_monitor_worker.py")
ROOT = WORKER.parent.parent
PARTS = ("ddp", "fsdp2", "fsdp1")


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    """Run the worker once in 2 processes for all parts; its output folder."""
    if not torch.distributed.is_available() or not torch.distributed.is_gloo_available():
        pytest.skip("torch.distributed with gloo is not available")
    out = tmp_path_factory.mktemp("distributed_monitor")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
           str(WORKER), str(out), ",".join(PARTS)]
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, f"worker failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-6000:]}"
    return out


def _records(run_dir: Path, part: str) -> list[dict]:
    """Rank 0's log; asserts that rank 1 wrote none."""
    assert not (run_dir / f"{part}_monitor_rank1.jsonl").exists(), "a non-main rank wrote a log"
    lines = (run_dir / f"{part}_monitor_rank0.jsonl").read_text().splitlines()
    records = [json.loads(line) for line in lines]
    assert [r["step"] for r in records] == list(range(1, STEPS + 1))
    return records


def _replay(states: list[dict]) -> list[dict]:
    """A single-process monitor over the weights of each measured step, in order."""
    model, monitor, records = tiny_gpt2(seed=1), make_monitor(None), []
    names = {n for n, _ in model.named_parameters()}
    for step, state in enumerate(states, start=1):
        missing, unexpected = model.load_state_dict(state, strict=False)
        assert not unexpected and not (set(missing) & names) - {"lm_head.weight"}, (missing, unexpected)
        monitor.step(model, None, step, is_main_process=True)
        records.append(monitor.last_record)
    return records


def _assert_norms_match(logged: list[dict], replayed: list[dict]):
    for got, want in zip(logged, replayed, strict=True):
        for name in ("spectral_norm_q", "spectral_norm_k"):
            assert sorted(got[name]) == ["0", "1"]  # JSON keys
            for layer, values in want[name].items():
                g, w = torch.tensor(got[name][str(layer)]), torch.tensor(values)
                assert g.shape == (4,) and torch.isfinite(g).all()
                torch.testing.assert_close(g, w, rtol=1e-5, atol=0)
    # training moved the weights, so the comparison is not of one fixed model
    assert logged[0]["spectral_norm_q"]["0"] != logged[-1]["spectral_norm_q"]["0"]


def _assert_observed(records: list[dict]):
    """Rank 0 observed the attention (2 layers x 4 heads) and logged its own loss."""
    for r in records:
        assert sorted(r["max_logit"]) == ["0", "1"] and all(len(v) == 4 for v in r["max_logit"].values())
        assert all(torch.isfinite(torch.tensor(v)).all() for v in r["max_logit"].values())
        assert r["loss"] is not None and torch.isfinite(torch.tensor(r["loss"]))


def _load(path: Path) -> dict:
    return torch.load(path, weights_only=True)


def test_ddp_only_rank0_logs_and_norms_match_single_process(run_dir):
    records = _records(run_dir, "ddp")
    _assert_observed(records)
    states = [_load(run_dir / f"ddp_weights_rank0_step{s}.pt") for s in range(1, STEPS + 1)]
    other = _load(run_dir / f"ddp_weights_rank1_step{STEPS}.pt")
    for k, v in states[-1].items():  # DDP kept the replicas equal
        torch.testing.assert_close(other[k], v, rtol=0, atol=0)
    _assert_norms_match(records, _replay(states))
    # and the norms are spectral norms (power iteration converged on these small heads)
    w = states[-1]["transformer.h.1.attn.c_attn.weight"].T[:64].reshape(4, 16, 64).double()
    sigma = torch.linalg.matrix_norm(w, ord=2)
    torch.testing.assert_close(torch.tensor(records[-1]["spectral_norm_q"]["1"], dtype=torch.float64),
                               sigma, rtol=1e-4, atol=0)


def test_fsdp2_sharded_weights_gathered_for_the_norms(run_dir):
    info = [json.loads((run_dir / f"fsdp2_info_rank{r}.json").read_text()) for r in (0, 1)]
    assert all(i["sharded"] and i["local_shape"] == [32, 192] for i in info), info
    records = _records(run_dir, "fsdp2")
    _assert_observed(records)
    states = []
    for s in range(1, STEPS + 1):
        shards = [_load(run_dir / f"fsdp2_weights_rank{r}_step{s}.pt") for r in (0, 1)]
        states.append({k: torch.cat([shards[0][k], shards[1][k]]) for k in shards[0]})  # Shard(0)
    _assert_norms_match(records, _replay(states))


def test_fsdp1_flat_parameters_gathered_for_the_norms(run_dir):
    info = [json.loads((run_dir / f"fsdp1_info_rank{r}.json").read_text()) for r in (0, 1)]
    assert all(i["sharded"] for i in info), info
    records = _records(run_dir, "fsdp1")
    _assert_observed(records)
    states = [_load(run_dir / f"fsdp1_weights_rank0_step{s}.pt") for s in range(1, STEPS + 1)]
    _assert_norms_match(records, _replay(states))

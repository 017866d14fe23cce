"""The stability monitor: power iteration, head slices, Trainer logging and the alert rule."""

import json
import os

import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from model_zoo import llama31_like  # noqa: E402

import hf_stable_attn  # noqa: E402,F401  (registers attn_implementation="stable_flash")
from hf_stable_attn.monitor import StabilityMonitor, head_projections, power_iteration  # noqa: E402


def _gpt2(seed=0):
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(seed)
    cfg = GPT2Config(n_embd=64, n_head=4, n_layer=2, vocab_size=64, n_positions=64,
                     bos_token_id=0, eos_token_id=0, attn_implementation="stable_flash")
    return GPT2LMHeadModel(cfg)


def _sigma(w: torch.Tensor) -> torch.Tensor:
    return torch.linalg.matrix_norm(w.double(), ord=2)


def test_power_iteration_converges_and_warm_starts():
    torch.manual_seed(0)
    w = torch.randn(3, 16, 80)
    sigma, u = power_iteration(w, iters=100)
    assert torch.allclose(sigma.double(), _sigma(w), rtol=1e-4)
    w2 = w * 1.01 + 1e-3 * torch.randn_like(w)  # a training step later
    sigma2, _ = power_iteration(w2, u, iters=2)
    assert torch.allclose(sigma2.double(), _sigma(w2), rtol=2e-3)
    assert (sigma2.double() <= _sigma(w2) * (1 + 1e-5)).all()  # a lower bound


def test_head_slices_of_fused_gpt2_and_gqa_llama():
    model = _gpt2()
    attn = model.transformer.h[1].attn
    p = head_projections(attn, model.config)
    assert p.layer == 1 and p.q.shape == (4, 16, 64) and p.k.shape == (4, 16, 64)
    x = torch.randn(5, 64)
    qkv = attn.c_attn(x)  # (5, 192): [q | k | v], heads of 16
    assert torch.allclose(x @ p.q[2].T, qkv[:, 32:48], atol=1e-5, rtol=1e-5)
    assert torch.allclose(x @ p.k[3].T, qkv[:, 64 + 48:64 + 64], atol=1e-5, rtol=1e-5)
    llama = llama31_like()
    attn = llama.model.layers[0].self_attn
    p = head_projections(attn, llama.config)
    assert p.q.shape == (4, 16, 64) and p.k.shape == (2, 16, 64)
    assert torch.equal(p.k[1], attn.k_proj.weight[16:32])


def test_peft_lora_weights_include_the_adapter():
    peft = pytest.importorskip("peft")
    model = peft.get_peft_model(llama31_like(), peft.LoraConfig(r=4, target_modules=["q_proj", "k_proj"]))
    attn = model.base_model.model.model.layers[0].self_attn
    with torch.no_grad():
        attn.q_proj.lora_B["default"].weight.normal_()
    p = head_projections(attn, model.base_model.model.config)
    merged = attn.q_proj.base_layer.weight + attn.q_proj.get_delta_weight("default")
    assert torch.allclose(p.q.reshape(64, 64), merged, atol=1e-6)
    assert not torch.allclose(p.q.reshape(64, 64), attn.q_proj.base_layer.weight)


def _batches(n, batch=2, seq=16, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [{"input_ids": 1 + torch.randint(63, (batch, seq), generator=g)} for _ in range(n)]


def test_trainer_logs_metrics_and_stops_on_a_spectral_norm_blow_up(tmp_path):
    from transformers import Trainer, TrainerCallback, TrainingArguments

    class BlowUp(TrainerCallback):
        """Multiply layer 0 head 1's W_Q slice by 10 after optimizer step 6."""

        def on_step_end(self, args, state, control, model=None, **kwargs):
            if state.global_step == 6:
                with torch.no_grad():
                    model.transformer.h[0].attn.c_attn.weight[:, 16:32] *= 10.0

    class Logger(TrainerCallback):
        """Stands in for a report_to integration (it sits before the monitor)."""

        logged: list = []

        def on_log(self, args, state, control, logs=None, **kwargs):
            self.logged.append(dict(logs))

    data = [{"input_ids": b["input_ids"][0], "labels": b["input_ids"][0]} for b in _batches(48)]
    args = TrainingArguments(
        output_dir=str(tmp_path / "run"), max_steps=12, per_device_train_batch_size=2,
        gradient_accumulation_steps=2, learning_rate=1e-3, logging_steps=1, report_to=[],
        use_cpu=True, save_strategy="no", disable_tqdm=True,
    )
    logger = Logger()
    trainer = Trainer(model=_gpt2(), args=args, train_dataset=data, callbacks=[BlowUp(), logger])
    monitor = StabilityMonitor(every_n_steps=2, log_file=tmp_path / "monitor.jsonl", min_history=2,
                               on_alert="stop").attach(trainer)
    with pytest.warns(UserWarning, match="spectral_norm_q layer 0 head 1"):
        trainer.train()
    assert trainer.state.global_step == 6  # stopped by the rule, not by max_steps
    records = [json.loads(line) for line in (tmp_path / "monitor.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records] == [2, 4, 6]  # optimizer steps, not micro-batches
    for r in records:
        assert len(r["spectral_norm_q"]["0"]) == 4 and len(r["spectral_norm_k"]["1"]) == 4
        assert set(r["max_logit"]) == {"0", "1"} and set(r["repeated_max_fraction"]) == {"0", "1"}
        assert all(0.0 <= f <= 1.0 for v in r["repeated_max_fraction"].values() for f in v)
    assert records[0]["alerts"] == records[1]["alerts"] == []
    assert records[2]["alerts"] and all("layer 0 head 1" in a for a in records[2]["alerts"])
    assert records[1]["loss"] is not None
    ratio = records[2]["spectral_norm_q"]["0"][1] / records[1]["spectral_norm_q"]["0"][1]
    assert 9.0 < ratio < 11.0
    seen = {k for logs in logger.logged for k in logs}
    for name in ("spectral_norm_q", "spectral_norm_k", "max_logit", "repeated_max"):
        assert any(name in k for k in seen), name
    # the monitor's own log must not swallow the Trainer's loss log of the same step
    loss_steps = [h["step"] for h in trainer.state.log_history if "loss" in h]
    assert loss_steps == [1, 2, 3, 4, 5, 6]
    assert any("stability/spectral_norm_q/layer_0" in h for h in trainer.state.log_history)
    assert monitor.should_stop


def test_plain_loop_fires_on_a_repeated_max_jump_with_peft(tmp_path):
    peft = pytest.importorskip("peft")
    model = peft.get_peft_model(llama31_like(), peft.LoraConfig(r=4, target_modules=["q_proj", "v_proj"]))
    opt = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=1e-4)
    monitor = StabilityMonitor(every_n_steps=1, log_file=tmp_path / "m.jsonl", min_history=3)
    fired = {}
    for step, batch in enumerate(_batches(6, seed=1)):
        k_proj = model.base_model.model.model.layers[0].self_attn.k_proj
        if step == 4:  # keys of KV head 0 collapse: every row of query heads 0 and 1 ties
            saved = k_proj.weight[:16].clone()
            with torch.no_grad():
                k_proj.weight[:16] = 0.0
        if step == 5:
            with torch.no_grad():
                k_proj.weight[:16] = saved
        with monitor.observe(step):
            loss = model(**batch, labels=batch["input_ids"]).loss
        loss.backward()
        opt.step()
        opt.zero_grad()
        with pytest.warns(UserWarning) if step == 4 else _no_warning():
            fired[step] = monitor.step(model, loss, step, is_main_process=True)
    assert [bool(fired[s]) for s in range(6)] == [False, False, False, False, True, False]
    assert any("repeated_max_fraction layer 0" in a for a in fired[4])
    rec = json.loads((tmp_path / "m.jsonl").read_text().splitlines()[4])
    assert rec["repeated_max_fraction"]["0"][:2] == [15 / 16, 15 / 16]  # row 0 sees one key
    assert rec["repeated_max_fraction"]["0"][2] < 0.5
    assert len(rec["spectral_norm_q"]["1"]) == 4 and rec["spectral_norm_k"]["0"][0] == 0.0
    lines = (tmp_path / "m.jsonl").read_text().splitlines()
    assert len(lines) == 6 and json.loads(lines[0])["loss"] > 0


def test_monitor_observes_a_compiled_model(tmp_path):
    model = _gpt2()
    compiled = torch.compile(model, backend="eager")
    monitor = StabilityMonitor(every_n_steps=2, log_file=None)
    for step, batch in enumerate(_batches(3, seed=2)):
        with monitor.observe(step):
            compiled(**batch).logits.sum().backward()
        monitor.step(compiled, None, step, is_main_process=True)
        if step % 2 == 0:
            rec = monitor.last_record
            assert rec["step"] == step and sorted(rec["max_logit"]) == [0, 1]
            assert len(rec["spectral_norm_q"][0]) == 4
    assert monitor.last_record["step"] == 2


def test_fsdp2_sharded_weights_are_gathered(gloo_group):
    """fully_shard turns the weights into DTensors; the norms match the unsharded model's."""
    from torch.distributed.fsdp import fully_shard

    model = _gpt2()
    plain = StabilityMonitor(every_n_steps=1, log_file=None, observe=False, power_iters=50)
    plain.step(model, None, 0)
    for block in model.transformer.h:
        fully_shard(block)
    fully_shard(model)
    assert hasattr(model.transformer.h[0].attn.c_attn.weight, "full_tensor")
    sharded = StabilityMonitor(every_n_steps=1, log_file=None, power_iters=50)
    batch = _batches(1)[0]
    with sharded.observe(0):
        model(**batch, labels=batch["input_ids"]).loss.backward()
    sharded.step(model, None, 0)  # rank 0 of 1: the main process
    for name in ("spectral_norm_q", "spectral_norm_k"):
        a, b = plain.last_record[name], sharded.last_record[name]
        assert a.keys() == b.keys() and all(torch.allclose(torch.tensor(a[l]), torch.tensor(b[l])) for l in a)
    assert sorted(sharded.last_record["max_logit"]) == [0, 1]


class _no_warning:
    def __enter__(self):
        import warnings

        self._ctx = warnings.catch_warnings()
        self._ctx.__enter__()
        warnings.simplefilter("error", UserWarning)

    def __exit__(self, *exc):
        return self._ctx.__exit__(*exc)

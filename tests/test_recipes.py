"""CPU tests of the recipes: configs, data, batch replay, Trainer and `accelerate launch` runs, LoRA."""

import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")

from accelerate.commands.config.config_args import load_config_from_file  # noqa: E402
from transformers import TrainingArguments  # noqa: E402

from recipes import corpus, finetune_lora, pretrain_gpt2  # noqa: E402
from recipes.config import ConfigError, DataArguments, RunArguments, parse_config  # noqa: E402
from recipes.replay import BatchOrder  # noqa: E402
from recipes.tiny_llama import save_tiny_llama  # noqa: E402
from recipes.training import RecipeTrainer, end_distributed  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
CONFIGS = REPO / "recipes" / "configs"
TINY = str(CONFIGS / "gpt2_tiny_cpu.yaml")
PRETRAIN = (pretrain_gpt2.GPT2Arguments, RunArguments, DataArguments, TrainingArguments)
LORA = (finetune_lora.LoraArguments, RunArguments, DataArguments, TrainingArguments)


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    """One data cache for the module: the offline BPE and the tokenized text are built once."""
    return str(tmp_path_factory.mktemp("recipes_cache"))


def tiny_argv(cache, out, *extra):
    return [
        "--config",
        TINY,
        "--data_cache_dir",
        cache,
        "--output_dir",
        str(out),
        "--max_steps",
        "3",
        "--max_documents",
        "2",
        "--logging_steps",
        "1",
        "--save_strategy",
        "no",
        "--disable_tqdm",
        "true",
        *extra,
    ]


def lora_argv(cache, model_dir, out, *extra):
    """finetune_lora's arguments for the tiny Llama on CPU (``extra`` adds or overrides)."""
    return [
        "--config",
        str(CONFIGS / "llama_tiny_lora.yaml"),
        "--model_name_or_path",
        str(model_dir),
        "--output_dir",
        str(out),
        "--data_cache_dir",
        cache,
        "--use_cpu",
        "true",
        "--logging_steps",
        "1",
        "--disable_tqdm",
        "true",
        *extra,
    ]


def losses(trainer_or_dir):
    history = (
        trainer_or_dir.state.log_history
        if isinstance(trainer_or_dir, RecipeTrainer)
        else json.loads((Path(trainer_or_dir) / "trainer_state.json").read_text())["log_history"]
    )
    out = {h["step"]: h["loss"] for h in history if "loss" in h}
    assert out and all(math.isfinite(v) for v in out.values()), history
    return out


def grad_norms(trainer):
    """{step: grad_norm} from the trainer's log history (a resumed run's includes the checkpoint's)."""
    return {h["step"]: h["grad_norm"] for h in trainer.state.log_history if "grad_norm" in h}


def spy_batches(monkeypatch):
    """Record every micro-batch's input_ids that RecipeTrainer trains on."""
    seen = []
    original = RecipeTrainer.training_step

    def spy(self, model, inputs, *args, **kwargs):
        seen.append(inputs["input_ids"].clone())
        return original(self, model, inputs, *args, **kwargs)

    monkeypatch.setattr(RecipeTrainer, "training_step", spy)
    return seen


# -- configs ------------------------------------------------------------------------------------


@pytest.mark.parametrize("path", sorted(CONFIGS.glob("*.yaml")), ids=lambda p: p.name)
def test_configs_parse(path):
    types = LORA if path.name.startswith("llama") else PRETRAIN
    parsed = parse_config(types, ["--config", str(path), "--use_cpu", "true"])
    args = parsed[-1]
    assert args.max_steps > 0 and args.output_dir.startswith("runs/")
    assert parsed[1].attn == "stable_flash"


def test_paper_config_is_section_3_1():
    gpt2, run, data, args = parse_config(
        PRETRAIN, ["--config", str(CONFIGS / "gpt2_124m_paper.yaml"), "--use_cpu", "true"]
    )
    assert (gpt2.n_layer, gpt2.n_head, gpt2.n_embd, data.block_size) == (12, 12, 768, 1024)
    assert gpt2.attn_dropout == 0.0
    assert (args.adam_beta1, args.adam_beta2, args.weight_decay, args.max_grad_norm) == (0.9, 0.95, 0.0, 1.0)
    assert (args.learning_rate, args.warmup_steps, args.lr_scheduler_kwargs) == (1e-3, 2000, {"min_lr": 1e-5})
    assert args.lr_scheduler_type.value == "cosine_with_min_lr" and args.bf16
    gpus = load_config_from_file(str(REPO / "recipes/accelerate/ddp_4gpu.yaml")).num_processes
    assert gpus * args.per_device_train_batch_size * args.gradient_accumulation_steps * data.block_size == 524_288
    _, _, data1, args1 = parse_config(PRETRAIN, ["--config", str(CONFIGS / "gpt2_124m_1gpu.yaml"), "--use_cpu", "true"])
    assert args1.per_device_train_batch_size * args1.gradient_accumulation_steps * data1.block_size == 524_288


def test_accelerate_configs_load():
    kinds = {p.stem: load_config_from_file(str(p)) for p in (REPO / "recipes/accelerate").glob("*.yaml")}
    assert set(kinds) == {"cpu", "single_gpu", "ddp_2gpu", "ddp_4gpu", "ddp_8gpu", "fsdp"}
    assert [kinds[f"ddp_{n}gpu"].num_processes for n in (2, 4, 8)] == [2, 4, 8]
    assert kinds["cpu"].use_cpu and kinds["fsdp"].distributed_type == "FSDP"


def test_overrides_win(tmp_path):
    gpt2, run, data, args = parse_config(
        PRETRAIN,
        ["--config", TINY, "--max_steps", "7", "--attn", "sdpa", "--no_stabilize", "--n_layer", "3", "--beta", "4"],
    )
    assert (args.max_steps, run.attn, run.stabilize, gpt2.n_layer, run.beta) == (7, "sdpa", False, 3, 4.0)


@pytest.mark.parametrize("name", ["gradient_checkpointing", "activation_checkpointing"])
@pytest.mark.parametrize("where", ["yaml", "flag"])
def test_checkpointing_reaches_the_installed_releases_field(tmp_path, recwarn, name, where):
    # Transformers 5.23 renamed the field (the old name a deprecated alias until v6); either name
    # works in a config or on the command line with any supported release, and no deprecation
    # warning is raised where the new name exists.
    path = tmp_path / "c.yaml"
    settings = {name: "true", f"{name}_kwargs": '{"use_reentrant": false}'}
    path.write_text("".join(f"{k}: {v}\n" for k, v in settings.items()) if where == "yaml" else "")
    flags = [f"--{k}={v}" for k, v in settings.items()] if where == "flag" else []
    *_, args = parse_config(PRETRAIN, ["--config", str(path), "--use_cpu", "true", *flags])
    assert args.gradient_checkpointing is True  # releases with both names mirror the new one
    assert args.gradient_checkpointing_kwargs == {"use_reentrant": False}
    assert not [w for w in recwarn if "checkpointing" in str(w.message)]


@pytest.mark.parametrize(
    "yaml_text, argv, message",
    [
        ("n_layers: 2\n", [], r"unknown key 'n_layers' \(did you mean 'n_layer'\?\)"),
        ("learning_rate: fast\n", [], r"key 'learning_rate'.*invalid float value: 'fast'"),
        ("attn: flash\n", [], r"key 'attn'.*invalid choice"),
        ("n_embd: 100\nn_head: 3\n", [], r"n_embd \(100\) must be divisible by n_head \(3\)"),
        ("- a list\n", [], r"expected a mapping"),
        ("beta: 0\n", [], r"beta must be > 0"),
        ("", ["--max_step", "3"], r"unknown arguments.*did you mean '--max_steps'"),
        ("", ["--replay_batches", "/nonexistent/order.json"], r"replay_batches: no such file"),
        ("", ["--record_batches", "a.json", "--replay_batches", __file__], r"exclusive"),
    ],
)
def test_bad_configs_get_clear_errors(tmp_path, yaml_text, argv, message):
    path = tmp_path / "bad.yaml"
    path.write_text(yaml_text)
    with pytest.raises(ConfigError, match=message):
        parse_config(PRETRAIN, ["--config", str(path), "--use_cpu", "true", *argv])


def test_bad_config_exits_with_message(tmp_path):
    with pytest.raises(SystemExit, match=r"pretrain_gpt2.py: error: config file not found"):
        pretrain_gpt2.main(["--config", str(tmp_path / "missing.yaml")])
    with pytest.raises(SystemExit, match=r"finetune_lora.py: error: model_name_or_path is required"):
        finetune_lora.main(["--use_cpu", "true"])


# -- data ---------------------------------------------------------------------------------------


def test_embedded_text_same_without_datasets(monkeypatch):
    args = DataArguments(max_documents=2)
    with_datasets = list(corpus.iter_documents(args))
    monkeypatch.setattr(corpus, "datasets", None)
    assert list(corpus.iter_documents(args)) == with_datasets
    assert len(with_datasets) == 2 and all(len(d) > 50_000 for d in with_datasets)
    with pytest.raises(ImportError, match="needs the `datasets` package"):
        list(corpus.iter_documents(DataArguments(dataset="someone/some_dataset")))


def test_local_files_and_instruction_rows(tmp_path, cache):
    (tmp_path / "a.txt").write_text("alpha beta")
    (tmp_path / "b.txt").write_text("gamma")
    assert list(corpus.iter_documents(DataArguments(dataset=str(tmp_path)))) == ["alpha beta", "gamma"]
    rows = tmp_path / "rows.jsonl"
    rows.write_text(json.dumps({"instruction": "Add.", "input": "1 2", "output": "3"}) + "\n")
    [doc] = corpus.iter_documents(DataArguments(dataset=str(rows)))
    assert doc == "### Instruction:\nAdd.\n\n### Input:\n1 2\n\n### Response:\n3"
    with pytest.raises(FileNotFoundError):
        corpus.resolve_files(str(tmp_path / "none*.txt"))


def test_packing_is_the_token_stream(tmp_path, cache):
    from recipes.tokenizer import train_bpe

    (tmp_path / "d.txt").write_text("to be or not to be " * 40)
    tokenizer = train_bpe(["to be or not to be"], 300)
    args = DataArguments(dataset=str(tmp_path / "d.txt"), block_size=16)
    folder = corpus.tokenize_to_cache(args, tokenizer, tmp_path / "c")
    assert corpus.tokenize_to_cache(args, tokenizer, tmp_path / "c") == folder  # cached
    data = corpus.PackedDataset(folder, 16)
    ids = tokenizer((tmp_path / "d.txt").read_text())["input_ids"] + [tokenizer.eos_token_id]
    assert len(data) == len(ids) // 16
    assert torch.equal(torch.cat([data[i]["input_ids"] for i in range(len(data))]), torch.tensor(ids[: len(data) * 16]))


def test_the_replay_fingerprint_is_the_token_streams_not_the_files_path(tmp_path):
    """A recorded batch order must replay in another checkout: the same text at another path
    (another cache folder) gives the same fingerprint, other text another one, and a cache
    written before the hash was stored in meta.json the same one."""
    from recipes.tokenizer import train_bpe

    tokenizer = train_bpe(["to be or not to be"], 300)
    fingerprints = []
    for name, text in (("a", "to be or not to be " * 40), ("b", "to be or not to be " * 40),
                       ("c", "not to be or to be " * 40)):
        (tmp_path / name).mkdir()
        (tmp_path / name / "d.txt").write_text(text)
        args = DataArguments(dataset=str(tmp_path / name / "d.txt"), block_size=16)
        folder = corpus.tokenize_to_cache(args, tokenizer, tmp_path / "cache")
        fingerprints.append((folder.name, corpus.PackedDataset(folder, 16).fingerprint))
    (folder_a, same_a), (folder_b, same_b), (_, other) = fingerprints
    assert folder_a != folder_b and same_a == same_b != other
    meta_file = tmp_path / "cache" / folder_b / "meta.json"
    meta = json.loads(meta_file.read_text())
    del meta["content_sha256"]
    meta_file.write_text(json.dumps(meta))
    assert corpus.PackedDataset(tmp_path / "cache" / folder_b, 16).fingerprint == same_a


# -- batch order --------------------------------------------------------------------------------


def test_batch_order_record_replay(tmp_path):
    f = str(tmp_path / "order.json")
    rec = BatchOrder(10, 4, seed=1, dataset="d", record=f)
    epochs = []
    for e in range(3):
        rec.set_epoch(e)
        epochs.append(list(rec))
    assert len(rec) == 8 and all(len(ep) == 8 for ep in epochs)  # 2 full global batches per epoch
    assert epochs[0] != epochs[1] and all(0 <= i < 10 for ep in epochs for i in ep)
    rep = BatchOrder(10, 4, seed=999, dataset="d", replay=f)
    for e in range(3):
        rep.set_epoch(e)
        assert list(rep) == epochs[e]
    with pytest.raises(ValueError, match="epoch 3 was not among them"):  # epochs count up without set_epoch too
        list(rep)
    rep.set_epoch(1)
    assert list(rep) == epochs[1]
    with pytest.raises(ValueError, match="global_batch=4.*this run has 8"):
        BatchOrder(10, 8, dataset="d", replay=f)
    small = BatchOrder(3, 4, seed=0)  # fewer samples than a global batch: one batch per epoch, reusing samples
    assert len(list(small)) == 4 and set(small) == {0, 1, 2}


def test_resumed_recording_keeps_earlier_epochs(tmp_path):
    f = str(tmp_path / "order.json")
    first = BatchOrder(10, 4, seed=1, record=f)
    list(first)
    resumed = BatchOrder(10, 4, seed=1, record=f)
    resumed.set_epoch(1)
    list(resumed)
    assert set(json.loads(Path(f).read_text())["epochs"]) == {"0", "1"}


# -- training runs ------------------------------------------------------------------------------


def test_trainer_record_and_replay_same_batches(tmp_path, cache, monkeypatch):
    seen = spy_batches(monkeypatch)
    order = str(tmp_path / "order.json")
    recorded = pretrain_gpt2.main(
        tiny_argv(
            cache,
            tmp_path / "a",
            "--data_seed",
            "1",
            "--record_batches",
            order,
            "--monitor",
            "--monitor_kwargs",
            '{"every_n_steps": 1}',
        )
    )
    first = [b.clone() for b in seen]
    assert len(first) == 3 * 2  # 3 optimizer steps x 2 accumulation steps
    assert (tmp_path / "a" / "model.safetensors").is_file() and (tmp_path / "a" / "metrics.csv").is_file()
    assert (tmp_path / "a" / "stability_monitor.jsonl").read_text().count("\n") == 3

    seen.clear()
    replayed = pretrain_gpt2.main(tiny_argv(cache, tmp_path / "b", "--data_seed", "2", "--replay_batches", order))
    assert all(torch.equal(x, y) for x, y in zip(first, seen, strict=True))
    assert losses(replayed) == losses(recorded)

    seen.clear()
    pretrain_gpt2.main(tiny_argv(cache, tmp_path / "c", "--data_seed", "2"))
    assert not torch.equal(first[0], seen[0])


def test_resume_continues_identically(tmp_path, cache):
    full = pretrain_gpt2.main(
        tiny_argv(
            cache,
            tmp_path / "full",
            "--max_steps",
            "4",
            "--save_strategy",
            "steps",
            "--save_steps",
            "2",
            "--attn",
            "sdpa",
        )
    )
    shutil.copytree(tmp_path / "full" / "checkpoint-2", tmp_path / "resumed" / "checkpoint-2")
    assert (tmp_path / "resumed" / "checkpoint-2" / "model.safetensors").is_file()
    resumed = pretrain_gpt2.main(
        tiny_argv(cache, tmp_path / "resumed", "--max_steps", "4", "--attn", "sdpa", "--resume_from_checkpoint", "last")
    )
    assert resumed.state.global_step == 4
    assert losses(resumed) == pytest.approx(losses(full), rel=1e-5)  # steps 1-2 from the checkpoint, 3-4 rerun


def test_end_distributed_is_a_no_op_without_a_process_group():
    import torch.distributed as dist

    assert not dist.is_initialized()
    end_distributed()


def test_end_distributed_destroys_the_process_group_once(gloo_group):
    import torch.distributed as dist

    assert dist.is_initialized()
    end_distributed()
    assert not dist.is_initialized()
    end_distributed()


def test_accelerate_launch_cpu_with_replay_and_two_process_ddp(tmp_path, cache):
    def launch(launcher, out, *extra):
        cmd = [
            sys.executable,
            "-m",
            *launcher,
            str(REPO / "recipes/pretrain_gpt2.py"),
            *tiny_argv(cache, out, *extra),
            "--dataset",
            str(text),
        ]
        done = subprocess.run(
            cmd,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=300,
            env={**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])},
        )
        assert done.returncode == 0, done.stderr[-3000:]
        return losses(out)

    # ~45 blocks of 128 tokens: 2 optimizer steps of 16 sequences per epoch, so 3 steps cross into epoch 1
    text = tmp_path / "small.txt"
    text.write_text(next(corpus.iter_documents(DataArguments(max_documents=1)))[:20_000])
    accelerate = ["accelerate.commands.launch", "--config_file", str(REPO / "recipes/accelerate/cpu.yaml")]
    order = str(tmp_path / "order.json")
    recorded = launch(accelerate, tmp_path / "a", "--record_batches", order, "--data_seed", "5")
    assert set(json.loads(Path(order).read_text())["epochs"]) == {"0", "1"}
    assert (tmp_path / "a" / "model.safetensors").is_file()
    assert launch(accelerate, tmp_path / "b", "--replay_batches", order, "--data_seed", "6") == recorded
    # DDP over 2 CPU processes (gloo), micro-batch 8 x 2 processes x 1 accumulation step = the recorded
    # run's 8 x 1 x 2: the same samples in every optimizer step, so the same losses up to reduction order.
    ddp = launch(
        ["torch.distributed.run", "--standalone", "--nproc_per_node", "2"],
        tmp_path / "ddp",
        "--replay_batches",
        order,
        "--gradient_accumulation_steps",
        "1",
    )
    assert ddp == pytest.approx(recorded, rel=1e-4)


def test_lora_on_tiny_llama(tmp_path, cache):
    model_dir = save_tiny_llama(tmp_path / "tiny_llama")
    trainer = finetune_lora.main(lora_argv(cache, model_dir, tmp_path / "lora", "--max_steps", "2"))
    losses(trainer)
    assert (tmp_path / "lora" / "adapter_model.safetensors").is_file()
    lora_b = [p for n, p in trainer.model.named_parameters() if "lora_B" in n]
    assert lora_b and all(p.requires_grad for p in lora_b)
    assert any(p.abs().max() > 0 for p in lora_b)  # LoRA B starts at zero: training moved it
    frozen = [p for n, p in trainer.model.named_parameters() if "lora_" not in n]
    assert frozen and not any(p.requires_grad for p in frozen)


def test_lora_resume_continues_identically(tmp_path, cache):
    """A LoRA run resumed from its step-2 checkpoint (the adapter, not the base model, in it)
    trains steps 3-4 as the uninterrupted run did."""
    model_dir = save_tiny_llama(tmp_path / "tiny_llama")

    def run(out, *extra):
        return finetune_lora.main(lora_argv(cache, model_dir, out, "--max_steps", "4", *extra))

    full = run(tmp_path / "full", "--save_strategy", "steps", "--save_steps", "2", "--save_total_limit", "2")
    checkpoint = tmp_path / "full" / "checkpoint-2"
    assert (checkpoint / "adapter_model.safetensors").is_file()
    assert not (checkpoint / "model.safetensors").exists()
    shutil.copytree(checkpoint, tmp_path / "resumed" / "checkpoint-2")
    resumed = run(tmp_path / "resumed", "--save_strategy", "no", "--resume_from_checkpoint", "last")
    assert resumed.state.global_step == 4
    assert losses(resumed) == pytest.approx(losses(full), rel=1e-5)  # steps 1-2 from the checkpoint, 3-4 rerun
    # bf16 losses are coarse; the gradient norms of the rerun steps are not
    assert grad_norms(resumed) == pytest.approx(grad_norms(full), rel=1e-5)


def test_plot_curves_compares_runs(tmp_path):
    from recipes import plot_curves

    header = "step,loss,grad_norm,learning_rate,tokens_per_s,peak_mem_gib,elapsed_s\n"
    (tmp_path / "a.csv").write_text(header + "1,5.0,1,0.1,10,1.5,1\n2,4.0,1,0.1,100,2.0,2\n3,3.0,1,0.1,300,2.0,3\n")
    (tmp_path / "b.csv").write_text(header + "1,5.0,1,0.1,20,1.0,1\n2,4.5,1,0.1,200,1.0,2\n3,3.0,1,0.1,400,1.0,3\n")
    summary = plot_curves.main([f"{tmp_path}/a.csv:a", f"{tmp_path}/b.csv:b", "--png", str(tmp_path / "c.png")])
    assert summary["a"]["median_tokens_per_s"] == 200 and summary["b"]["median_tokens_per_s"] == 300  # first left out
    assert summary["b"]["max_abs_loss_diff_vs_first"] == 0.5 and summary["a"]["peak_mem_gib"] == 2.0
    assert (tmp_path / "c.png").stat().st_size > 1000

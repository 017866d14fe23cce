"""What the recipes share around transformers' Trainer: attention choice, sampler, callbacks, resume."""

from __future__ import annotations

import csv
import json
import logging
import time
from pathlib import Path

import torch
from transformers import Trainer, TrainerCallback, TrainingArguments, default_data_collator
from transformers.trainer_utils import get_last_checkpoint

from recipes.config import DataArguments, RunArguments
from recipes.replay import BatchOrder

logger = logging.getLogger(__name__)


def attention_kwargs(run: RunArguments) -> dict:
    """`from_pretrained`/`from_config` keyword arguments selecting the attention."""
    if run.attn == "stable_flash":
        import hf_stable_attn  # noqa: F401  (registers attn_implementation="stable_flash")
    return {"attn_implementation": run.attn}


def apply_fix_options(model, run: RunArguments):
    """Pass the fix's options to a model built with stable_flash (the others ignore them)."""
    if run.attn == "stable_flash":
        import hf_stable_attn

        hf_stable_attn.configure(
            model, stabilize=run.stabilize, beta=run.beta, tie_tolerance=run.tie_tolerance, backend=run.backend
        )
    elif (run.stabilize, run.beta, run.tie_tolerance) != (True, 2.0, None):
        logger.warning("stabilize/beta/tie_tolerance only apply to --attn stable_flash; ignored for %s", run.attn)


def global_batch(args: TrainingArguments) -> int:
    """Sequences per optimizer step: per-device batch x processes x gradient accumulation."""
    return args.per_device_train_batch_size * args.world_size * args.gradient_accumulation_steps


def batch_order(dataset, data: DataArguments, args: TrainingArguments) -> BatchOrder:
    """The training sampler: seeded by `data_seed` (else `seed`), recorded or replayed as asked."""
    return BatchOrder(
        len(dataset),
        global_batch(args),
        seed=args.data_seed if args.data_seed is not None else args.seed,
        dataset=getattr(dataset, "fingerprint", ""),
        record=data.record_batches,
        replay=data.replay_batches,
        is_main_process=args.process_index == 0,
    )


class RecipeTrainer(Trainer):
    """Trainer whose training sampler is a `BatchOrder` (so batches can be recorded and replayed)."""

    def __init__(self, *args, batch_order: BatchOrder, **kwargs):
        super().__init__(*args, **kwargs)
        self.batch_order = batch_order

    def _get_train_sampler(self, train_dataset=None):
        return self.batch_order


class EarlyStop(TrainerCallback):
    """Stops training after `minutes` or at optimizer step `step`, whichever comes first, without
    touching the LR schedule (that follows max_steps); saves a checkpoint unless save_strategy is "no".
    All processes stop together."""

    def __init__(self, minutes: float | None = None, step: int | None = None):
        self.seconds = None if minutes is None else minutes * 60
        self.step = step
        self.start = None

    def on_train_begin(self, args, state, control, **kwargs):
        self.start = time.monotonic()

    def on_step_end(self, args, state, control, **kwargs):
        late = self.seconds is not None and time.monotonic() - self.start > self.seconds
        stop = torch.tensor(
            float(late or (self.step is not None and state.global_step >= self.step)), device=args.device
        )
        if torch.distributed.is_available() and torch.distributed.is_initialized():
            torch.distributed.all_reduce(stop, op=torch.distributed.ReduceOp.MAX)
        if stop.item():
            control.should_training_stop = True
            control.should_save = args.save_strategy != "no"


class MetricsCSV(TrainerCallback):
    """Appends one CSV row per Trainer log: step, loss, grad_norm, lr, tokens/s since the last row, peak GiB."""

    FIELDS = ("step", "loss", "grad_norm", "learning_rate", "tokens_per_s", "peak_mem_gib", "elapsed_s")

    def __init__(self, path: str | Path, tokens_per_step: int):
        self.path, self.tokens_per_step = Path(path), tokens_per_step
        self.start = self.last_time = self.last_step = None

    def on_train_begin(self, args, state, control, **kwargs):
        self.start = self.last_time = time.monotonic()
        self.last_step = state.global_step
        if state.is_world_process_zero and not self.path.exists():
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with open(self.path, "w", newline="") as f:
                csv.writer(f).writerow(self.FIELDS)

    def on_log(self, args, state, control, logs=None, **kwargs):
        if not state.is_world_process_zero or "loss" not in (logs or {}):
            return
        now = time.monotonic()
        steps, self.last_step = state.global_step - self.last_step, state.global_step
        seconds, self.last_time = now - self.last_time, now
        peak = torch.cuda.max_memory_allocated() / 2**30 if torch.cuda.is_available() else float("nan")
        row = (
            state.global_step,
            logs["loss"],
            logs.get("grad_norm", float("nan")),
            logs.get("learning_rate"),
            steps * self.tokens_per_step / max(seconds, 1e-9),
            peak,
            now - self.start,
        )
        with open(self.path, "a", newline="") as f:
            csv.writer(f).writerow(row)


def callbacks(run: RunArguments, args: TrainingArguments, tokens_per_step: int) -> list[TrainerCallback]:
    """The recipe's callbacks: the metrics CSV, and an early stop when max_minutes or stop_at_step is set."""
    out = [MetricsCSV(run.metrics_csv or Path(args.output_dir) / "metrics.csv", tokens_per_step)]
    if run.max_minutes is not None or run.stop_at_step is not None:
        out.append(EarlyStop(run.max_minutes, run.stop_at_step))
    return out


def attach_monitor(trainer: Trainer, run: RunArguments):
    """With `--monitor`: hf_stable_attn's StabilityMonitor, writing OUTPUT_DIR/stability_monitor.jsonl and
    logging through the Trainer, so every `report_to` logger gets its metrics
    (`--monitor_kwargs '{"every_n_steps": 50}'` for its options).
    """
    if not run.monitor:
        return None
    from hf_stable_attn.monitor import StabilityMonitor  # lazy: only runs that ask for it need it

    kwargs = {
        "log_file": str(Path(trainer.args.output_dir) / "stability_monitor.jsonl"),
        **json.loads(run.monitor_kwargs),
    }
    return StabilityMonitor(**kwargs).attach(trainer)


def resume_checkpoint(args: TrainingArguments) -> str | None:
    """`--resume_from_checkpoint last` -> the newest checkpoint in output_dir (None if there is none)."""
    value = args.resume_from_checkpoint
    if value in ("last", "latest", "true", "True"):
        value = get_last_checkpoint(args.output_dir) if Path(args.output_dir).is_dir() else None
        logger.info("resuming from %s", value or "scratch (no checkpoint yet)")
    return value


def end_distributed() -> None:
    """Destroy the default process group if a launcher made one: the recipes' scripts call it
    last, as Accelerate's own `PartialState.destroy_process_group` does. Left to interpreter exit,
    a gloo rank sometimes aborted at teardown ("terminate called without an active exception"):
    5 of 30 two-process launches of a minimal gloo script here, 0 of 30 with the call."""
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        torch.distributed.destroy_process_group()


def train_and_save(model, tokenizer, dataset, data: DataArguments, args: TrainingArguments,
                   run: RunArguments, tokens_per_step: int) -> Trainer:
    """The recipes' common end: a Trainer with the replayable batch order, the metrics CSV and the
    optional monitor; train (resuming with `--resume_from_checkpoint`), then save the model (safetensors),
    the metrics and the trainer state."""
    trainer = RecipeTrainer(
        model=model,
        args=args,
        train_dataset=dataset,
        data_collator=default_data_collator,
        processing_class=tokenizer,
        callbacks=callbacks(run, args, tokens_per_step),
        batch_order=batch_order(dataset, data, args),
    )
    attach_monitor(trainer, run)
    result = trainer.train(resume_from_checkpoint=resume_checkpoint(args))
    trainer.save_model()
    trainer.save_metrics("train", result.metrics)
    trainer.save_state()
    return trainer

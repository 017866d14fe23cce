"""An early warning for bf16 attention failures: ``StabilityMonitor``.

The paper tracks the spectral norm of ``W_Q`` per head (Section 3.2, Fig. 3) and shows the count
of repeated row maxima rising before the loss explodes (Appendix E.1). Every ``every_n_steps``
optimizer steps the monitor measures, per layer and head:

- ``spectral_norm_q`` / ``spectral_norm_k``: the largest singular value of the head's slice of the
  query / key projection, by warm-started power iteration (no SVD). GPT-2's fused ``c_attn``
  (Conv1D), ``q_proj``/``k_proj`` linears, fused ``qkv_proj``, and PEFT LoRA wrappers (base weight
  plus the active adapters' delta) are understood;
- ``max_logit`` and ``repeated_max_fraction`` on the current batch: the largest score and the
  fraction of rows whose maximum repeats inside ``tie_window(dtype)``, from a sample of query rows
  of the first micro-batch, observed inside the registered ``stable_flash`` attention;
- the loss.

Everything goes to a JSONL file; per-layer maxima (and optionally every head) go to the Trainer's
loggers (``report_to``) through ``Trainer.log`` with names ``stability/<metric>/layer_<i>``. A rule
fires when a head's spectral norm exceeds ``k`` times its running median, or a layer's repeated-max
fraction jumps above its running median by ``repeated_max_jump``: it warns, and optionally stops
training or asks for a checkpoint.

Distributed: only the main process observes and logs. Sharded weights (FSDP2 ``DTensor`` or FSDP1
flat parameters) are gathered for the measurement on every rank (a collective, so the measurement
runs on all ranks at the same steps; it is skipped with a logged note when gathering fails).
"""

from __future__ import annotations

import json
import math
import statistics
import warnings
from collections import deque
from contextlib import ExitStack, contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import torch
from transformers import TrainerCallback

from hf_stable_attn.probe import (
    attention_modules,
    attention_scores,
    row_ties,
    segment_starts,
    visible_keys,
)


# ----------------------------------------------------------------------------- power iteration


def power_iteration(
    w: torch.Tensor, u: torch.Tensor | None = None, iters: int = 8
) -> tuple[torch.Tensor, torch.Tensor]:
    """Largest singular value of each matrix in ``w`` (H, D, F); returns (sigma (H,), u (H, D)).

    Iterates on the small side: ``u <- W W^T u``. ``u`` warm-starts from the previous call (a
    few iterations then suffice as the weights move slowly). The estimate ``|W^T u|`` is a lower
    bound that converges to sigma.
    """
    w = w.float()
    if u is None:
        u = torch.randn(w.shape[:2], generator=torch.Generator().manual_seed(0)).to(w.device)
    u = u / u.norm(dim=-1, keepdim=True).clamp_min(1e-30)
    for _ in range(iters):
        v = torch.einsum("hdf,hd->hf", w, u)
        u = torch.einsum("hdf,hf->hd", w, v)
        u = u / u.norm(dim=-1, keepdim=True).clamp_min(1e-30)
    sigma = torch.einsum("hdf,hd->hf", w, u).norm(dim=-1)
    return sigma, u


# ----------------------------------------------------------------------------- the weights


def _dense_weight(layer: torch.nn.Module) -> torch.Tensor:
    """The (out, in) weight of a Linear/Conv1D, with PEFT LoRA deltas and FSDP2 shards gathered."""
    if hasattr(layer, "base_layer") and hasattr(layer, "get_delta_weight"):  # peft LoraLayer
        w = _dense_weight(layer.base_layer).clone()
        if not getattr(layer, "merged", False) and not getattr(layer, "disable_adapters", False):
            for name in layer.active_adapters:
                if name in getattr(layer, "lora_A", {}):
                    w += layer.get_delta_weight(name).detach().float().to(w.device)
        return w
    w = layer.weight.detach()
    if hasattr(w, "full_tensor"):  # DTensor (FSDP2): all-gather, a collective on every rank
        w = w.full_tensor()
    w = w.float()
    return w.T if type(layer).__name__ == "Conv1D" else w  # Conv1D stores (in, out)


@dataclass
class _Projections:
    """Head-sliced query/key weights of one attention module."""

    layer: int
    q: torch.Tensor  # (Hq, D, F)
    k: torch.Tensor  # (Hk, D, F)


def head_projections(module: torch.nn.Module, config) -> _Projections | None:
    """Split an attention module's query/key projections into heads, or None if unknown."""
    hq = config.num_attention_heads
    hk = getattr(config, "num_key_value_heads", None) or hq
    d = getattr(module, "head_dim", None) or getattr(config, "head_dim", None) or config.hidden_size // hq
    if hasattr(module, "q_proj") and hasattr(module, "k_proj"):
        wq, wk = _dense_weight(module.q_proj), _dense_weight(module.k_proj)
    elif hasattr(module, "c_attn"):  # GPT-2: fused Conv1D, output [q | k | v]
        w = _dense_weight(module.c_attn)
        wq, wk = w[: hq * d], w[hq * d: 2 * hq * d]
    elif hasattr(module, "qkv_proj"):  # Phi-3 style fused linear [q | k | v]
        w = _dense_weight(module.qkv_proj)
        wq, wk = w[: hq * d], w[hq * d: (hq + hk) * d]
    else:
        return None
    # copies: FSDP1 frees the gathered storage these slices view when summon_full_params exits
    return _Projections(int(module.layer_idx), wq.reshape(hq, d, -1).clone(), wk.reshape(hk, d, -1).clone())


@contextmanager
def _full_params(model: torch.nn.Module) -> Iterator[None]:
    """Gather FSDP1 flat parameters for reading (a collective); no-op otherwise."""
    try:
        from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
    except ImportError:  # pragma: no cover
        FSDP = None
    roots = [m for m in model.modules() if FSDP is not None and isinstance(m, FSDP)]
    ctx = FSDP.summon_full_params(roots[0], writeback=False, recurse=True) if roots else nullcontext()
    with ctx:
        yield


def _unwrap(model: torch.nn.Module) -> torch.nn.Module:
    """Strip torch.compile / DDP wrappers (FSDP1 stays: its params are gathered by _full_params)."""
    while True:
        if hasattr(model, "_orig_mod"):
            model = model._orig_mod
        elif type(model).__name__ == "DistributedDataParallel":
            model = model.module
        else:
            return model


def _is_main_process() -> bool:
    return not (torch.distributed.is_available() and torch.distributed.is_initialized()) or (
        torch.distributed.get_rank() == 0
    )


# ----------------------------------------------------------------------------- the batch observer


class _BatchObserver:
    """Observer: per layer and query head, max logit and repeated-max fraction on sampled rows.

    Only the first call per layer counts (later micro-batches and gradient-checkpointing
    recomputes are ignored). Runs eagerly under torch.compile; the monitor keeps one instance so
    that compiled graphs guarding on the observer list recompile once, not at every measurement.
    """

    def __init__(self, sample_rows: int, sample_sequences: int):
        self.sample_rows = sample_rows
        self.sample_sequences = sample_sequences
        self.max_logit: dict[int, torch.Tensor] = {}  # layer -> (Hq,)
        self.repeated: dict[int, torch.Tensor] = {}  # layer -> (Hq,) fraction of sampled rows
        self._fallback: dict[int, int] = {}

    def reset(self):
        self.max_logit, self.repeated = {}, {}

    @torch.compiler.disable
    @torch.no_grad()
    def __call__(self, module, query, key, value, attention_mask, **kwargs):
        layer = getattr(module, "layer_idx", None)
        layer = self._fallback.setdefault(id(module), len(self._fallback)) if layer is None else layer
        if layer in self.max_logit:
            return
        b, hq, sq, d = query.shape
        hk, sk = key.shape[1], key.shape[2]
        b = min(b, self.sample_sequences)
        # evenly spaced query rows, always including the last one
        rows = torch.linspace(0, sq - 1, min(sq, self.sample_rows), device=query.device).round().long()
        keep = visible_keys(sq, sk, causal=kwargs.get("is_causal", getattr(module, "is_causal", True)),
                            sliding_window=kwargs.get("sliding_window"), rows=rows,
                            device=query.device)[None, None]
        valid = torch.ones(b, len(rows), dtype=torch.bool, device=query.device)
        starts = segment_starts(kwargs, sq, sk)
        if starts is not None:  # packed sequences
            starts = starts[:b]
            keep = keep & (starts[:, None, rows, None] == starts[:, None, None, :])
        if attention_mask is not None:  # (B, Sk) padding mask
            pad = attention_mask[:b].bool()
            keep = keep & pad[:, None, None, :]
            valid = pad[:, sk - sq:][:, rows]
        k = key[:b].repeat_interleave(hq // hk, dim=1)  # (b, Hq, Sk, D)
        s = attention_scores(query[:b, :, rows], k, scaling=kwargs.get("scaling") or d ** -0.5,
                             softcap=kwargs.get("softcap"), keep=keep)  # (b, Hq, R, Sk)
        ties = row_ties(s, query.dtype)
        valid = valid[:, None, :] & (ties.m1 > float("-inf"))
        self.max_logit[layer] = torch.where(valid, ties.m1, float("-inf")).amax(dim=(0, 2)).float().cpu()
        n = valid.sum(dim=(0, 2)).clamp_min(1)
        self.repeated[layer] = ((ties.tied & valid).sum(dim=(0, 2)) / n).float().cpu()


# ----------------------------------------------------------------------------- the monitor


class StabilityMonitor(TrainerCallback):
    """Spectral norms, max logits and repeated maxima every N optimizer steps, with an alert rule.

    With a ``transformers.Trainer``: ``StabilityMonitor(...).attach(trainer)`` (adds the callback
    and logs through ``trainer.log`` so every ``report_to`` logger receives the metrics; a
    monitor passed as ``callbacks=[monitor]`` without ``attach`` writes its JSONL file and
    ``state.log_history`` only). In an Accelerate or plain loop::

        for step, batch in enumerate(loader):
            with monitor.observe(step):           # observes attention on the sampled steps
                loss = model(**batch).loss
            accelerator.backward(loss); optimizer.step(); optimizer.zero_grad()
            alerts = monitor.step(model, loss, step)   # once per optimizer step
            if monitor.should_stop: break

    Args:
        every_n_steps: measure every N optimizer steps.
        log_file: JSONL path (one record per measurement, every head); None = no file.
        spectral_k: rule: a head's spectral norm above ``spectral_k`` x its running median.
        repeated_max_jump: rule: a layer's repeated-max fraction above its running median + this.
        median_window: measurements in the running medians.
        min_history: measurements before the rule may fire.
        on_alert: "warn", "stop" (end training) or "save" (ask the Trainer for a checkpoint).
        observe: measure max logits / repeated maxima (needs attn_implementation="stable_flash").
        sample_rows: query rows per sequence scored for the batch metrics.
        sample_sequences: sequences of the micro-batch scored.
        per_head: also send every head's value to the loggers (the JSONL file always has them).
        power_iters: power iterations per measurement (the first one uses 4x as many).
    """

    def __init__(
        self,
        every_n_steps: int = 100,
        log_file: str | Path | None = "stability_monitor.jsonl",
        *,
        spectral_k: float = 2.0,
        repeated_max_jump: float = 0.1,
        median_window: int = 20,
        min_history: int = 3,
        on_alert: str = "warn",
        observe: bool = True,
        sample_rows: int = 64,
        sample_sequences: int = 1,
        per_head: bool = False,
        power_iters: int = 4,
    ):
        if on_alert not in ("warn", "stop", "save"):
            raise ValueError(f"on_alert must be 'warn', 'stop' or 'save', got {on_alert!r}")
        self.every_n_steps = every_n_steps
        self.log_file = None if log_file is None else Path(log_file)
        self.spectral_k = spectral_k
        self.repeated_max_jump = repeated_max_jump
        self.median_window = median_window
        self.min_history = min_history
        self.on_alert = on_alert
        self.observe_attention = observe
        self.per_head = per_head
        self.power_iters = power_iters
        self.should_stop = False
        self.trainer = None
        self.last_record: dict | None = None
        self._u: dict[tuple[int, str], torch.Tensor] = {}
        self._history: dict[tuple, deque] = {}
        self._observer = _BatchObserver(sample_rows, sample_sequences)
        self._observe_ctx: ExitStack | None = None
        self._last_loss: float | None = None
        self._warned_sharding = False

    # -- the plain-loop API
    def due(self, step: int) -> bool:
        """Whether optimizer step ``step`` is measured."""
        return self.every_n_steps > 0 and step % self.every_n_steps == 0

    @contextmanager
    def observe(self, step: int, is_main_process: bool | None = None) -> Iterator[None]:
        """Observe the attention of forwards inside the block when ``step`` is measured."""
        self._start_observing(step, is_main_process)
        try:
            yield
        finally:
            self._stop_observing()

    def step(self, model: torch.nn.Module, loss=None, step: int = 0,
             is_main_process: bool | None = None) -> list[str]:
        """Measure at optimizer step ``step`` if due; returns the alerts that fired.

        Call it on every rank (sharded weights are gathered collectively); only the main process
        writes and logs.
        """
        if not self.due(step):
            return []
        main = _is_main_process() if is_main_process is None else is_main_process
        loss = loss.detach().float().item() if torch.is_tensor(loss) else loss
        record = self._measure(model, step, loss, main)
        if record is None or not main:
            return []
        self._write(record)
        return record["alerts"]

    # -- the TrainerCallback API
    def attach(self, trainer) -> "StabilityMonitor":
        """Add to ``trainer`` and log through ``trainer.log`` (reaches every report_to logger)."""
        self.trainer = trainer
        trainer.add_callback(self)
        return self

    def on_step_begin(self, args, state, control, **kwargs):
        self._start_observing(state.global_step + 1, state.is_world_process_zero)

    def on_step_end(self, args, state, control, model=None, **kwargs):
        self._stop_observing()
        step = state.global_step  # the optimizer step that just finished
        if not self.due(step) or model is None:
            return
        record = self._measure(model, step, self._last_loss, state.is_world_process_zero)
        if record is None or not state.is_world_process_zero:
            return
        self._write(record)
        metrics = self._logger_metrics(record)
        if self.trainer is not None:
            # Trainer.log clears control.should_log; keep the Trainer's own log of this step.
            should_log = control.should_log
            self.trainer.log(metrics)
            control.should_log = should_log
        else:
            state.log_history.append({**metrics, "step": step})
        if record["alerts"]:
            if self.on_alert == "stop":
                control.should_training_stop = True
            elif self.on_alert == "save":
                control.should_save = True

    def on_log(self, args, state, control, logs=None, **kwargs):
        if logs and "loss" in logs:
            self._last_loss = float(logs["loss"])

    def on_train_end(self, args, state, control, **kwargs):
        self._stop_observing()

    # -- internals
    def _start_observing(self, step: int, is_main_process: bool | None):
        main = _is_main_process() if is_main_process is None else is_main_process
        if not (self.observe_attention and main and self.due(step)) or self._observe_ctx:
            return
        from hf_stable_attn.hooks import observe_attention

        self._observer.reset()
        self._observe_ctx = ExitStack()
        self._observe_ctx.enter_context(observe_attention(self._observer))

    def _stop_observing(self):
        if self._observe_ctx is not None:
            self._observe_ctx.close()
            self._observe_ctx = None

    @torch.no_grad()
    def _measure(self, model, step: int, loss: float | None, main: bool) -> dict | None:
        model = _unwrap(model)
        config = model.config  # PEFT wrappers forward it from the transformers model
        config = config.get_text_config() if hasattr(config, "get_text_config") else config
        try:
            with _full_params(model):
                projections = [p for m in attention_modules(model)
                               if (p := head_projections(m, config)) is not None]
        except (RuntimeError, ValueError) as err:  # e.g. a shard that cannot be gathered
            if main and not self._warned_sharding:
                warnings.warn(f"StabilityMonitor: spectral norms skipped ({err})")
                self._warned_sharding = True
            projections = []
        if not main:
            return None
        record = {"step": step, "loss": loss, "spectral_norm_q": {}, "spectral_norm_k": {},
                  "max_logit": {}, "repeated_max_fraction": {}, "alerts": []}
        for p in projections:
            for which, w in (("q", p.q), ("k", p.k)):
                u = self._u.get((p.layer, which))
                iters = self.power_iters if u is not None else 4 * self.power_iters
                sigma, self._u[(p.layer, which)] = power_iteration(w, u, iters)
                record[f"spectral_norm_{which}"][p.layer] = sigma.cpu().tolist()
        record["max_logit"] = {l: v.tolist() for l, v in sorted(self._observer.max_logit.items())}
        record["repeated_max_fraction"] = {l: v.tolist() for l, v in sorted(self._observer.repeated.items())}
        self._observer.reset()
        record["alerts"] = self._apply_rule(record)
        self.last_record = record
        return record

    def _apply_rule(self, record: dict) -> list[str]:
        """Compare to the running medians (before adding this measurement)."""
        alerts = []
        checks = [(("q", l, h), v, "spectral_norm_q") for l, vs in record["spectral_norm_q"].items()
                  for h, v in enumerate(vs)]
        checks += [(("k", l, h), v, "spectral_norm_k") for l, vs in record["spectral_norm_k"].items()
                   for h, v in enumerate(vs)]
        layer_rep = {l: sum(v) / len(v) for l, v in record["repeated_max_fraction"].items() if v}
        checks += [(("rep", l), v, "repeated_max_fraction") for l, v in layer_rep.items()]
        for key, value, name in checks:
            hist = self._history.setdefault(key, deque(maxlen=self.median_window))
            if len(hist) >= self.min_history and math.isfinite(value):
                med = statistics.median(hist)
                where = f"layer {key[1]}" + (f" head {key[2]}" if len(key) == 3 else "")
                if name.startswith("spectral") and value > self.spectral_k * med:
                    alerts.append(f"{name} {where}: {value:.4g} > {self.spectral_k} x running median {med:.4g}")
                elif name == "repeated_max_fraction" and value > med + self.repeated_max_jump:
                    alerts.append(f"{name} {where}: {value:.3f} jumped from running median {med:.3f}")
            if not math.isfinite(value):
                alerts.append(f"{name} layer {key[1]}: non-finite value {value}")
            hist.append(value)
        for a in alerts:
            warnings.warn(f"StabilityMonitor step {record['step']}: {a}")
        if alerts and self.on_alert == "stop":
            self.should_stop = True
        return alerts

    def _logger_metrics(self, record: dict) -> dict[str, float]:
        """Per-layer maxima over heads (plus every head with ``per_head``) and global maxima."""
        out: dict[str, float] = {}
        for name in ("spectral_norm_q", "spectral_norm_k", "max_logit", "repeated_max_fraction"):
            per_layer = record[name]
            if not per_layer:
                continue
            for layer, values in per_layer.items():
                out[f"stability/{name}/layer_{layer}"] = max(values)
                if self.per_head:
                    for h, v in enumerate(values):
                        out[f"stability/{name}/layer_{layer}/head_{h}"] = v
            out[f"stability/{name}/max"] = max(max(v) for v in per_layer.values())
        out["stability/alerts"] = float(len(record["alerts"]))
        return out

    def _write(self, record: dict):
        if self.log_file is None:
            return
        self.log_file.parent.mkdir(parents=True, exist_ok=True)
        with self.log_file.open("a") as f:
            f.write(json.dumps(record) + "\n")

"""Short bf16 training of a small GPT-2: tied row maxima and delta drift, fix off vs on.

Two runs from the same initial weights on the same batches (byte-level text: the Python
standard library's own sources, present on every machine), trained with bf16 autocast and
``attn_implementation="stable_flash"``; one with ``stabilize=False`` (FlashAttention-2
numerics), one with the fix. Every ``log_every`` steps the measured step records, per layer and
head, from the tensors the model really used (``hooks.observe_attention`` for q/k/v, a backward
hook on the attention's output projection for ``dO``):

- the fraction of query rows whose top-2 fp32 scores are tied within the bf16 window (this one
  at every step, in ``history``);
- ``sum_T (delta_lp - delta_hp)[T]`` over the batch's tokens (the coefficient of the rank-1 error
  of Eq. 3), its cumulative sum over measured steps (the paper's Fig. 5a), and its drift score.
``delta_lp`` comes from the same attention call as the model's (same options), ``delta_hp`` from
float64 attention on the same bf16 q, k, v.
"""

from __future__ import annotations

import math
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from ..shift_rule import tie_window
from .drift import delta_rowsum, drift_score
from .exact import causal_mask


@dataclass(frozen=True)
class TrainConfig:
    n_layer: int = 6
    n_head: int = 6
    n_embd: int = 384
    seqlen: int = 512
    batch: int = 16
    steps: int = 1000
    lr: float = 1e-3
    warmup: int = 100
    log_every: int = 50
    beta: float = 2.0
    seed: int = 0
    device: str = "cuda"
    corpus_bytes: int = 8_000_000
    time_budget_s: float = 0.0  # per run: stop early after this long (0: no limit)


TINY = TrainConfig(n_layer=2, n_head=2, n_embd=32, seqlen=32, batch=2, steps=3, warmup=1,
                   log_every=1, device="cpu", corpus_bytes=200_000)


def corpus(limit: int) -> torch.Tensor:
    """Up to ``limit`` bytes of the standard library's ``.py`` files (sorted, deterministic)."""
    root = Path(sys.modules["os"].__file__).parent
    chunks, total = [], 0
    for path in sorted(root.glob("*.py")):
        data = path.read_bytes()
        chunks.append(data)
        total += len(data)
        if total >= limit:
            break
    return torch.frombuffer(bytearray(b"".join(chunks)[:limit]), dtype=torch.uint8).long()


def batches(data: torch.Tensor, config: TrainConfig):
    """Yield (inputs, labels) ``(batch, seqlen)`` windows, the same sequence for every run."""
    gen = torch.Generator().manual_seed(config.seed)
    for _ in range(config.steps):
        starts = torch.randint(0, data.numel() - config.seqlen - 1, (config.batch,), generator=gen)
        window = torch.stack([data[s : s + config.seqlen + 1] for s in starts.tolist()])
        yield window[:, :-1], window[:, 1:]


def build_model(config: TrainConfig, stabilize: bool):
    import hf_stable_attn
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(config.seed)
    gpt = GPT2Config(
        vocab_size=256, n_positions=config.seqlen, n_embd=config.n_embd, n_layer=config.n_layer,
        n_head=config.n_head, bos_token_id=None, eos_token_id=None, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
    )
    model = GPT2LMHeadModel(gpt)
    model.set_attn_implementation(hf_stable_attn.ATTN_IMPLEMENTATION)
    hf_stable_attn.configure(model, stabilize=stabilize, beta=config.beta)
    return model.to(config.device)


class _Capture:
    """q/k/v (observer) and dO (backward hook on ``c_proj``) of every attention layer."""

    def __init__(self, model):
        self.inputs: dict[int, tuple] = {}
        self.grads: dict[int, torch.Tensor] = {}
        self.layer_of = {}
        for i, block in enumerate(model.transformer.h):
            self.layer_of[id(block.attn)] = i
            block.attn.c_proj.register_full_backward_hook(self._grad_hook(i))

    def _grad_hook(self, layer: int):
        def hook(module, grad_input, grad_output):
            self.grads[layer] = grad_input[0].detach()

        return hook

    def observe(self, module, query, key, value, attention_mask, **kwargs):
        self.inputs[self.layer_of[id(module)]] = (
            query.detach(), key.detach(), value.detach(), kwargs["scaling"]
        )


def tied_fraction(q: torch.Tensor, k: torch.Tensor, scale: float) -> torch.Tensor:
    """Per head, the fraction of causal query rows (past the first, which sees one key) whose
    top-2 fp32 scores are within the bf16 tie window. q, k ``(B, H, S, D)``; returns ``(H,)``."""
    mask = causal_mask(q.shape[2], q.device)
    scores = (torch.matmul(q.float(), k.float().transpose(-1, -2)) * scale).masked_fill(~mask, float("-inf"))
    top = scores.topk(2, dim=-1).values
    tied = (top[..., 0] - top[..., 1] <= tie_window(q.dtype))[:, :, 1:]
    return tied.double().mean((0, 2))


def measure_layer(q, k, v, dout_merged, scale: float, stabilize: bool, beta: float) -> dict:
    """Per-head delta error of one layer. q, k, v ``(B, H, S, D)`` as the model produced them;
    ``dout_merged (B, S, H * D)`` the gradient of the attention output."""
    from .. import flash_attn_func

    b, h, s, d = q.shape
    qf, kf, vf = (x.transpose(1, 2) for x in (q, k, v))  # (B, S, H, D)
    dout = dout_merged.reshape(b, s, h, d)
    with torch.no_grad():
        out_lp = flash_attn_func(qf, kf, vf, softmax_scale=scale, causal=True, stabilize=stabilize, beta=beta)
        mask = causal_mask(s, q.device)
        p = torch.softmax((q.double() @ k.double().transpose(-1, -2) * scale).masked_fill(~mask, float("-inf")), -1)
        out_hp = (p @ v.double()).transpose(1, 2)
        err = delta_rowsum(dout, out_lp).double() - delta_rowsum(dout, out_hp, torch.float64)
    per_head = err.transpose(0, 1).reshape(h, -1)  # (H, B * S)
    return {
        "tied_frac": tied_fraction(q, k, scale).tolist(),
        "delta_err_sum": per_head.sum(-1).tolist(),
        "delta_drift": drift_score(per_head).tolist(),
    }


def train(config: TrainConfig, stabilize: bool, log=print) -> dict:
    """Train one run; returns its per-step history and measured points (JSON-ready)."""
    import hf_stable_attn.hooks as hooks

    device = torch.device(config.device)
    model = build_model(config, stabilize)
    opt = torch.optim.AdamW(model.parameters(), lr=config.lr, betas=(0.9, 0.95), weight_decay=0.0)

    def lr_at(step: int) -> float:
        if step < config.warmup:
            return config.lr * (step + 1) / config.warmup
        frac = (step - config.warmup) / max(1, config.steps - config.warmup)
        return 1e-5 + 0.5 * (config.lr - 1e-5) * (1 + math.cos(math.pi * frac))

    capture = _Capture(model)
    cumulative = squares = None
    history, points = [], []
    t0 = time.perf_counter()
    with hooks.observe_attention(capture.observe):
        for step, (x, y) in enumerate(batches(corpus(config.corpus_bytes), config)):
            for group in opt.param_groups:
                group["lr"] = lr_at(step)
            elapsed = time.perf_counter() - t0
            last = step == config.steps - 1 or bool(config.time_budget_s and elapsed > config.time_budget_s)
            measured = step % config.log_every == 0 or last
            with torch.autocast(device.type, dtype=torch.bfloat16):
                loss = model(input_ids=x.to(device), labels=y.to(device)).loss
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            opt.zero_grad(set_to_none=True)
            with torch.no_grad():
                tied_now = torch.stack([tied_fraction(i[0], i[1], i[3]) for i in capture.inputs.values()])
            history.append({"step": step, "loss": loss.item(), "tied_frac": tied_now.mean().item()})
            if not measured:
                continue
            layers = [
                measure_layer(*capture.inputs[i][:3], capture.grads[i], capture.inputs[i][3], stabilize, config.beta)
                for i in sorted(capture.inputs)
            ]
            sums = torch.tensor([l["delta_err_sum"] for l in layers], dtype=torch.float64)  # (L, H)
            cumulative = sums if cumulative is None else cumulative + sums
            squares = sums.square() if squares is None else squares + sums.square()
            # drift of the per-step sums across the measured steps so far, per (layer, head)
            across_steps = torch.where(squares == 0, 0.0, cumulative / squares.sqrt())
            tied = torch.tensor([l["tied_frac"] for l in layers])
            drift = torch.tensor([l["delta_drift"] for l in layers])
            points.append(
                {
                    "step": step,
                    "loss": loss.item(),
                    "tied_frac": tied.mean().item(),
                    "tied_frac_max_head": tied.max().item(),
                    "delta_drift_abs_mean": drift.abs().mean().item(),
                    "delta_drift_abs_max": drift.abs().max().item(),
                    "cum_delta_err_max_head": cumulative.abs().max().item(),
                    "step_drift_abs_mean": across_steps.abs().mean().item(),
                    "layers": layers,
                }
            )
            capture.inputs.clear()
            capture.grads.clear()
            log(f"[{'stable' if stabilize else 'fa2'}] step {step} loss {loss.item():.3f} "
                f"tied {points[-1]['tied_frac']:.4f} drift {points[-1]['delta_drift_abs_mean']:.2f} "
                f"({time.perf_counter() - t0:.0f}s)")
            if last:
                break
    return {"history": history, "points": points, "seconds": time.perf_counter() - t0}


def run_experiment(config: TrainConfig, log=print) -> dict:
    """Both runs (fix off, then on) with the same initial weights and batches."""
    runs = {"fa2": train(config, False, log), f"stable_b{config.beta:g}": train(config, True, log)}
    return {"config": asdict(config), "runs": runs}

"""End to end through Transformers: training-step throughput, peak memory, generation latency.

Models are built from configs (random weights, no downloads), one fresh model per attention
implementation with the same seed, dropout off everywhere:

- ``gpt2-124m``: GPT-2 small (12 layers, 12 heads of 64, vocab 50257), seq 1024, batch 8;
- ``llama-1b``: Llama-3.2-1B-like (16 layers, 2048 wide, 32 query / 8 KV heads of 64, MLP 8192,
  vocab 32000, tied embeddings: 1.04B parameters), seq 4096, batch 2.

Training (``mode="train"``): AdamW (fused on CUDA), loss on the inputs as labels, no padding mask
unless ``--train-left-pad N`` (every second row's first N tokens are padding: mask 0, label -100).
``--compile BACKEND`` trains ``torch.compile(model, backend=BACKEND)`` (e.g. ``inductor``; records
carry ``compile_backend``).
``--precision autocast`` (default, what ``Trainer(bf16=True)`` does): fp32 master weights and
optimizer state, bf16 autocast; ``--precision bf16``: bf16 weights and optimizer state.
``compile_s`` is the first step (autotuning, FlexAttention's compile, optimizer state); the next
``--warmup-steps`` are untimed; ``ms_per_step`` is the median of ``--steps`` synchronized steps;
``peak_mem_mb`` is the absolute peak over the timed steps (weights, optimizer, activations).
With ``--processes N`` each entry (training and generation) runs in N fresh processes, in N rounds
that each run every entry once (so a slow stretch of the machine falls on all entries alike): its
``ms_per_step`` is their median and ``ms_per_step_processes`` lists them, because host time, which
a small model's step waits on, varies between processes (docs/results/e2e_gpt2_spread). A budget
that ends mid-round leaves the later entries with one process fewer.
``stable_flash_nofix`` (not in the defaults; ``--impls stable_flash stable_flash_nofix sdpa``) is
``stable_flash`` with the fix off (``hf_stable_attn.configure(model, stabilize=False)``): their
ratio is the fix's cost in a whole training step.
``eager`` is skipped (``error`` says so) where its materialized score matrices would need over
60% of the device's memory, and any OOM is recorded, not fatal.

Generation (``mode="generate"``, ``stable_flash`` and ``sdpa``): bf16 weights, a batch of
``--gen-prompts`` random prompts of ``--gen-prompt-len`` tokens, exactly ``--gen-new-tokens``
greedy tokens with the default dynamic cache; ``latency_ms`` is the median whole ``generate``
call after one warm-up call, ``ms_per_step`` that over the new tokens. ``--gen-cache static``
generates with ``cache_implementation="static"`` instead (``mode="generate_static"``), with which
Transformers compiles the decoding step on a GPU (the first call holds the compile).
``--gen-left-pad N`` left-pads every second prompt by N tokens (mask 0), as a batch of prompts
of different lengths is; the records carry ``left_pad``.

Run (GPU): ``PYTHONPATH=$PWD python -m benchmarks.bench_e2e --time-budget-s 170``.
CPU smoke run: ``--device cpu --tiny`` (two-layer models, a few steps).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import subprocess
import sys
import tempfile
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import torch

from benchmarks import runinfo, timing

TRAIN_IMPLS = ("stable_flash", "sdpa", "flex_attention", "eager")
NOFIX = "stable_flash_nofix"  # stable_flash with the fix off
GENERATE_IMPLS = ("stable_flash", "sdpa")
EAGER_MEMORY_FRACTION = 0.6


@dataclass(frozen=True)
class ModelSpec:
    """A model to build from its config and the training shape it is measured at."""

    name: str
    config: Callable[[], object]
    seqlen: int
    batch: int


def _gpt2(layers: int, width: int, heads: int, vocab: int, positions: int):
    from transformers import GPT2Config

    return GPT2Config(
        n_layer=layers, n_embd=width, n_head=heads, vocab_size=vocab, n_positions=positions,
        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
    )


def _llama(layers: int, width: int, heads: int, kv_heads: int, mlp: int, vocab: int, positions: int):
    from transformers import LlamaConfig

    return LlamaConfig(
        num_hidden_layers=layers, hidden_size=width, num_attention_heads=heads,
        num_key_value_heads=kv_heads, intermediate_size=mlp, vocab_size=vocab,
        max_position_embeddings=positions, tie_word_embeddings=True, attention_dropout=0.0,
    )


MODELS = {
    "gpt2-124m": ModelSpec("gpt2-124m", lambda: _gpt2(12, 768, 12, 50257, 1024), 1024, 8),
    "llama-1b": ModelSpec("llama-1b", lambda: _llama(16, 2048, 32, 8, 8192, 32000, 4096), 4096, 2),
}
TINY_MODELS = {
    "gpt2-tiny": ModelSpec("gpt2-tiny", lambda: _gpt2(2, 64, 2, 256, 128), 64, 2),
    "llama-tiny": ModelSpec("llama-tiny", lambda: _llama(2, 64, 4, 2, 128, 256, 128), 64, 2),
}


def build_model(spec: ModelSpec, impl: str, device: torch.device, dtype: torch.dtype):
    """A freshly initialized model (seed 0) on ``device`` with attention ``impl`` (``NOFIX``:
    ``stable_flash`` configured with the fix off)."""
    from transformers import AutoModelForCausalLM

    import hf_stable_attn

    torch.manual_seed(0)
    attn = "stable_flash" if impl == NOFIX else impl
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(spec.config(), attn_implementation=attn, dtype=dtype)
    if impl == NOFIX:
        hf_stable_attn.configure(model, stabilize=False)
    return model


def eager_scores_gib(spec: ModelSpec, batch: int) -> float:
    """GiB that eager attention's score matrices take in training: per layer the bf16 scores,
    the fp32 softmax and its bf16 copy (8 bytes per query-key pair and head)."""
    config = spec.config()
    heads = getattr(config, "num_attention_heads", None) or config.n_head
    layers = getattr(config, "num_hidden_layers", None) or config.n_layer
    return layers * batch * heads * spec.seqlen**2 * 8 / 2**30


def _peak_mb(device: torch.device) -> float | None:
    return torch.cuda.max_memory_allocated(device) / 2**20 if device.type == "cuda" else None


def _reset_peak(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)


def left_padding_mask(batch: int, seqlen: int, pad: int, device: torch.device) -> torch.Tensor:
    """Attention mask (batch, seqlen) of ones, with every second row's first ``pad`` positions
    0 (left padding, as a batch of sequences of different lengths has)."""
    mask = torch.ones(batch, seqlen, dtype=torch.long, device=device)
    mask[1::2, :pad] = 0
    return mask


def train_record(spec: ModelSpec, impl: str, device: torch.device, args) -> dict:
    """Time ``args.steps`` AdamW steps of ``spec`` with attention ``impl`` (compiled with
    ``args.compile`` unless "none"; every second row left-padded by ``args.train_left_pad``)."""
    autocast = args.precision == "autocast"
    model = build_model(spec, impl, device, torch.float32 if autocast else torch.bfloat16).train()
    forward = model if args.compile == "none" else torch.compile(model, backend=args.compile)
    mask = None
    if args.train_left_pad:
        mask = left_padding_mask(spec.batch, spec.seqlen, args.train_left_pad, device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=device.type == "cuda")
    vocab = model.config.vocab_size
    gen = torch.Generator(device=device).manual_seed(1)
    batches = [
        torch.randint(vocab, (spec.batch, spec.seqlen), generator=gen, device=device)
        for _ in range(1 + args.warmup_steps + args.steps)
    ]

    def step(ids: torch.Tensor) -> float:
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=autocast):
            labels = ids if mask is None else ids.masked_fill(mask == 0, -100)
            loss = forward(input_ids=ids, attention_mask=mask, labels=labels).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return loss.detach()

    compile_s, _ = timing.first_call(lambda: step(batches[0]), device)
    for ids in batches[1 : 1 + args.warmup_steps]:
        step(ids)
    _reset_peak(device)
    laps, losses = [], []
    for ids in batches[1 + args.warmup_steps :]:
        seconds, loss = timing.first_call(lambda: step(ids), device)
        laps.append(seconds)
        losses.append(loss)
    ms = 1e3 * statistics.median(laps)
    return {
        "ms_per_step": ms,
        "tokens_per_s": spec.batch * spec.seqlen / (ms * 1e-3),
        "peak_mem_mb": _peak_mb(device),
        "compile_s": compile_s,
        "loss": float(torch.stack(losses).float().mean()),
        "params_m": sum(p.numel() for p in model.parameters()) / 1e6,
    }


def in_fresh_process(spec: ModelSpec, impl: str, mode: str, device: torch.device, args,
                     runs: list[dict]) -> dict:
    """``train_record`` or ``generate_record`` (``mode``) in one more fresh process, appended to
    ``runs`` (the entry's earlier processes), merged with them: the median of their
    ``ms_per_step`` (with the throughput and, for generation, the latency from it), the largest
    peak memory, the first process's other fields (its ``compile_s`` too: later processes may
    find its autotuning timings in Triton's cache), and every process's ``ms_per_step`` and
    ``compile_s`` under ``ms_per_step_processes`` and ``compile_s_processes``."""
    repo = str(Path(__file__).resolve().parents[1])
    paths = [repo, os.environ.get("PYTHONPATH")]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in paths if p)}
    train = mode == "train"
    index = len(runs)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "record.json"
        cmd = [sys.executable, "-m", "benchmarks.bench_e2e", "--device", str(device),
               "--models", spec.name, "--impls", impl if train else "none",
               "--gen-impls", "none" if train else impl, "--precision", args.precision,
               "--steps", str(args.steps), "--warmup-steps", str(args.warmup_steps),
               "--gen-prompts", str(args.gen_prompts), "--gen-prompt-len",
               str(args.gen_prompt_len), "--gen-new-tokens", str(args.gen_new_tokens),
               "--gen-reps", str(args.gen_reps), "--gen-cache", args.gen_cache,
               "--gen-left-pad", str(args.gen_left_pad), "--train-left-pad",
               str(args.train_left_pad), "--compile", args.compile, "--out", str(out)]
        done = subprocess.run(cmd + (["--tiny"] if args.tiny else []), env=env,
                              capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(
                f"process {index} exited with {done.returncode}: {done.stderr[-400:]}")
        record = json.loads(out.read_text())["records"][0]
    if record.get("error"):
        raise RuntimeError(f"process {index}: {record['error']}")
    runs.append(record)
    times = [r["ms_per_step"] for r in runs]
    median = statistics.median(times)
    peaks = [r["peak_mem_mb"] for r in runs if r["peak_mem_mb"] is not None]
    tokens_per_step = spec.batch * spec.seqlen if train else args.gen_prompts
    merged = {
        **runs[0],
        "ms_per_step": median,
        "tokens_per_s": tokens_per_step / (median * 1e-3),
        "peak_mem_mb": max(peaks) if peaks else None,
        "ms_per_step_processes": times,
        "compile_s_processes": [r["compile_s"] for r in runs],
    }
    if not train:
        merged["latency_ms"] = median * args.gen_new_tokens
    return merged


def generate_record(spec: ModelSpec, impl: str, device: torch.device, args) -> dict:
    """Median latency of one greedy ``generate`` of ``args.gen_new_tokens`` tokens per prompt."""
    model = build_model(spec, impl, device, torch.bfloat16).eval()
    gen = torch.Generator(device=device).manual_seed(2)
    prompts = torch.randint(
        model.config.vocab_size, (args.gen_prompts, args.gen_prompt_len), generator=gen, device=device
    )
    mask = left_padding_mask(args.gen_prompts, args.gen_prompt_len, args.gen_left_pad, device)
    prompts = prompts.masked_fill(mask == 0, 0)
    new = args.gen_new_tokens

    cache = {"cache_implementation": "static"} if args.gen_cache == "static" else {}

    def generate() -> torch.Tensor:
        return model.generate(
            input_ids=prompts, attention_mask=mask, do_sample=False,
            max_new_tokens=new, min_new_tokens=new, pad_token_id=0, **cache,
        )

    with torch.no_grad():
        compile_s, out = timing.first_call(generate, device)
        if out.shape != (args.gen_prompts, args.gen_prompt_len + new):
            raise RuntimeError(f"generate returned {tuple(out.shape)}, expected {new} new tokens per prompt")
        _reset_peak(device)
        laps = [timing.first_call(generate, device)[0] for _ in range(args.gen_reps)]
    latency_ms = 1e3 * statistics.median(laps)
    return {
        "latency_ms": latency_ms,
        "ms_per_step": latency_ms / new,
        "tokens_per_s": args.gen_prompts * new / (latency_ms * 1e-3),
        "peak_mem_mb": _peak_mb(device),
        "compile_s": compile_s,
        "new_tokens": new,
    }


def _skip_reason(spec: ModelSpec, impl: str, device: torch.device) -> str | None:
    if impl != "eager" or device.type != "cuda":
        return None
    need = eager_scores_gib(spec, spec.batch)
    total = torch.cuda.get_device_properties(device).total_memory / 2**30
    if need > EAGER_MEMORY_FRACTION * total:
        return f"skipped: eager score matrices need ~{need:.0f} GiB of the device's {total:.0f} GiB (would OOM)"
    return None


def run_unit(spec: ModelSpec, impl: str, mode: str, device: torch.device, args,
             runs: list[dict]) -> dict:
    """One record, measured in this process, or with ``--processes`` in one more fresh process
    merged with the entry's earlier ones (``runs``, see ``in_fresh_process``); errors (a refused
    implementation, an OOM) become an ``error`` field."""
    base = {"impl": impl, "model": spec.name, "mode": mode, "precision": args.precision if mode == "train" else "bf16"}
    if mode == "train":
        base.update(batch=spec.batch, seqlen=spec.seqlen, left_pad=args.train_left_pad,
                    compile_backend=args.compile)
    else:
        base.update(batch=args.gen_prompts, seqlen=args.gen_prompt_len, left_pad=args.gen_left_pad)
    reason = _skip_reason(spec, impl, device) if mode == "train" else None
    if reason:
        return {**base, "tokens_per_s": None, "ms_per_step": None, "peak_mem_mb": None, "error": reason}
    try:
        if args.processes > 1:
            return {**base, **in_fresh_process(spec, impl, mode, device, args, runs)}
        measure = train_record if mode == "train" else generate_record
        return {**base, **measure(spec, impl, device, args)}
    except Exception as exc:  # refused shape, missing backend, OOM: recorded, the run goes on
        oom = isinstance(exc, torch.cuda.OutOfMemoryError)
        message = ("OOM: " if oom else f"{type(exc).__name__}: ") + str(exc).strip()[:600]
        print(f"--- {spec.name} {impl} {mode}:", file=sys.stderr)
        traceback.print_exc(limit=-6, file=sys.stderr)
        return {**base, "tokens_per_s": None, "ms_per_step": None, "peak_mem_mb": None, "error": message}
    finally:
        gc.collect()
        if device.type == "cuda":
            torch.cuda.empty_cache()


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--tiny", action="store_true", help="two-layer models (CPU smoke test)")
    p.add_argument("--models", nargs="+", help="default: gpt2-124m llama-1b (with --tiny: the tiny pair)")
    p.add_argument("--impls", nargs="+", default=list(TRAIN_IMPLS), help="training attention implementations ('none' to skip; also "
                   f"{NOFIX}: stable_flash with the fix off)")
    p.add_argument("--gen-impls", nargs="+", default=list(GENERATE_IMPLS), help="generation implementations ('none' to skip)")
    p.add_argument("--precision", choices=["autocast", "bf16"], default="autocast")
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--warmup-steps", type=int, default=2)
    p.add_argument("--processes", type=int, default=1,
                   help="fresh processes per entry (their median is reported)")
    p.add_argument("--gen-prompts", type=int, default=8)
    p.add_argument("--gen-prompt-len", type=int, default=128)
    p.add_argument("--gen-new-tokens", type=int, default=128)
    p.add_argument("--gen-reps", type=int, default=3)
    p.add_argument("--gen-cache", choices=["dynamic", "static"], default="dynamic",
                   help="generation's KV cache (static: Transformers compiles the decoding step)")
    p.add_argument("--train-left-pad", type=int, default=0,
                   help="padding tokens at the start of every second training row")
    p.add_argument("--compile", default="none",
                   help="torch.compile backend for the training model (none: eager)")
    p.add_argument("--gen-left-pad", type=int, default=0,
                   help="padding tokens at the start of every second prompt")
    p.add_argument("--time-budget-s", type=float, help="start no measurement that would end past this")
    p.add_argument("--out-dir", default="benchmarks/results")
    p.add_argument("--out", help="explicit output path (default <out-dir>/<gpu>-<date>-e2e.json)")
    args = p.parse_args(argv)
    catalog = TINY_MODELS if args.tiny else MODELS
    args.models = args.models or list(catalog)
    unknown = [m for m in args.models if m not in catalog]
    if unknown:
        p.error(f"unknown models {unknown}; known: {list(catalog)}")
    if args.processes < 1:
        p.error(f"--processes must be at least 1, got {args.processes}")
    if not 0 <= args.train_left_pad < min(catalog[m].seqlen for m in args.models):
        p.error(f"--train-left-pad must leave every row a token, got {args.train_left_pad}")
    if not 0 <= args.gen_left_pad < args.gen_prompt_len:
        p.error(f"--gen-left-pad must be in [0, --gen-prompt-len), got {args.gen_left_pad}")
    args.impls = [] if args.impls == ["none"] else args.impls
    args.gen_impls = [] if args.gen_impls == ["none"] else args.gen_impls
    return args


def main(argv=None) -> dict:
    """Measure every (model, implementation, mode) in order (with ``--processes``, once per
    round), writing the JSON after each measurement."""
    args = parse_args(argv)
    import hf_stable_attn  # noqa: F401  (registers attn_implementation="stable_flash")

    device = torch.device(args.device)
    catalog = TINY_MODELS if args.tiny else MODELS
    units = [(catalog[m], impl, "train") for m in args.models for impl in args.impls]
    generate = "generate_static" if args.gen_cache == "static" else "generate"
    units += [(catalog[m], impl, generate) for m in args.models for impl in args.gen_impls]
    head = runinfo.header("e2e", device, {k: v for k, v in vars(args).items() if k != "out"})
    path = runinfo.results_path(args.out_dir, head) if args.out is None else Path(args.out)
    budget = timing.Budget(args.time_budget_s)
    # With --processes N, N rounds that each run every entry once in a fresh process: a slow
    # stretch of the machine then falls on every entry, not on whichever ran during it.
    jobs = [(round_, index) for round_ in range(args.processes) for index in range(len(units))]
    runs: list[list[dict]] = [[] for _ in units]
    by_unit: dict[int, dict] = {}
    last_s = 0.0

    def save() -> tuple[list[dict], list[str]]:
        records = [by_unit[i] for i in sorted(by_unit)]
        not_run = [f"{s.name}/{impl}/{m}" for i, (s, impl, m) in enumerate(units) if i not in by_unit]
        runinfo.write_results(path, head, records, elapsed_s=round(budget.elapsed(), 1), not_run=not_run)
        return records, not_run

    for round_, index in jobs:
        if by_unit.get(index, {}).get("error"):
            continue  # an entry that failed once is not run again
        if not budget.fits(last_s):
            break
        spec, impl, mode = units[index]
        start = budget.elapsed()
        by_unit[index] = run_unit(spec, impl, mode, device, args, runs[index])
        last_s = budget.elapsed() - start
        save()
        tag = f" (process {round_ + 1}/{args.processes})" if args.processes > 1 else ""
        print(f"[{budget.elapsed():6.0f}s] {spec.name} {impl} {mode}{tag}: "
              f"{by_unit[index].get('tokens_per_s') or by_unit[index].get('error')}",
              file=sys.stderr, flush=True)
    records, not_run = save()
    failed = sum(1 for r in records if r.get("error"))
    print(f"e2e: {len(records)} records ({failed} errors), {len(not_run)} not run for time "
          f"in {budget.elapsed():.0f}s -> {path}")
    return {**head, "elapsed_s": budget.elapsed(), "not_run": not_run, "records": records, "path": str(path)}


if __name__ == "__main__":
    main()

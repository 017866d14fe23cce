"""Where the end-to-end time of a training step and of greedy decoding goes, per attention
implementation (torch.profiler; GPU only), for one of ``bench_e2e``'s models (``--model``,
default GPT-2 124M).

Modes: ``train`` (3 steps), ``decode`` (16 new tokens, dynamic cache) and ``decode_static``
(16 new tokens with a static cache, which Transformers compiles; profiled after two warm-up
generations). Writes ``profile_<model>_<impl>_<mode>.txt`` (the wall time of three unprofiled
runs, the count of host-device synchronisations, top ops by CUDA time and by CPU time, and the
top Python functions of a cProfiled run) into ``--out``. Run:
``PYTHONPATH=$PWD python gpu/profile_e2e.py --out DIR [--model llama-1b]
[--modes train decode decode_static]``.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import time
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

import hf_stable_attn  # noqa: F401  (registers stable_flash)
from benchmarks.bench_e2e import MODELS, build_model

SYNC_OPS = ("aten::item", "aten::_local_scalar_dense", "aten::nonzero", "cudaStreamSynchronize",
            "cudaDeviceSynchronize", "aten::is_nonzero")


def cuda_ms_by_name(events, steps: int) -> dict[str, float]:
    """Mean GPU milliseconds per step of each CUDA kernel (and copy) among a ``torch.profiler``
    capture's ``events`` that spanned ``steps`` steps, largest first."""
    total: dict[str, float] = {}
    for event in events:
        if event.device_type == torch.autograd.DeviceType.CUDA:
            total[event.name] = total.get(event.name, 0.0) + event.time_range.elapsed_us() / 1e3
    return {name: ms / steps for name, ms in sorted(total.items(), key=lambda kv: -kv[1])}


def train_steps(impl: str, steps: int, model_name: str = "gpt2-124m"):
    spec = MODELS[model_name]
    model = build_model(spec, impl, torch.device("cuda"), torch.float32).train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    ids = torch.randint(model.config.vocab_size, (spec.batch, spec.seqlen), device="cuda")

    def step():
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    for _ in range(3):
        step()
    torch.cuda.synchronize()
    return lambda: [step() for _ in range(steps)]


def decode(impl: str, new_tokens: int, cache: str | None = None, model_name: str = "gpt2-124m"):
    spec = MODELS[model_name]
    model = build_model(spec, impl, torch.device("cuda"), torch.bfloat16).eval()
    prompts = torch.randint(model.config.vocab_size, (8, 128), device="cuda")

    def run():
        with torch.no_grad():
            model.generate(input_ids=prompts, attention_mask=torch.ones_like(prompts),
                           do_sample=False, max_new_tokens=new_tokens, min_new_tokens=new_tokens,
                           pad_token_id=0, cache_implementation=cache)

    for _ in range(1 if cache is None else 2):
        run()
    torch.cuda.synchronize()
    return run


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--modes", nargs="+", default=["train", "decode"],
                    choices=["train", "decode", "decode_static"])
    ap.add_argument("--model", default="gpt2-124m", choices=list(MODELS))
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    name = args.model
    makers = {"train": lambda i: train_steps(i, 3, name),
              "decode": lambda i: decode(i, 16, model_name=name),
              "decode_static": lambda i: decode(i, 16, "static", name)}
    for mode in args.modes:
        make = makers[mode]
        for impl in ("stable_flash", "sdpa"):
            fn = make(impl)
            walls = []
            for _ in range(3):
                start = time.perf_counter()
                fn()
                torch.cuda.synchronize()
                walls.append((time.perf_counter() - start) * 1e3)
            python = cProfile.Profile()
            python.runcall(fn)
            torch.cuda.synchronize()
            functions = io.StringIO()
            pstats.Stats(python, stream=functions).sort_stats("tottime").print_stats(30)
            with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
                fn()
                torch.cuda.synchronize()
            avg = prof.key_averages()
            syncs = {e.key: e.count for e in avg if e.key in SYNC_OPS}
            text = (f"{impl} {mode}: syncs {syncs}; wall ms without the profilers "
                    + ", ".join(f"{w:.1f}" for w in walls) + "\n\n== by CUDA time\n"
                    + avg.table(sort_by="cuda_time_total", row_limit=25, max_name_column_width=60)
                    + "\n== by self CPU time\n"
                    + avg.table(sort_by="self_cpu_time_total", row_limit=30, max_name_column_width=60)
                    + "\n== Python functions by own time (cProfile, another run)\n"
                    + functions.getvalue())
            (out / f"profile_{name}_{impl}_{mode}.txt").write_text(text)
            print(text[:200])


if __name__ == "__main__":
    main()

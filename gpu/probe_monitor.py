"""GPU checks of the probe and the monitor (issue 6); run by gpu/probe_monitor.sh.

Parts (``--part``):
  probe8b   a randomly initialised Llama-3.1-8B-shaped model (bf16, GQA, llama3 RoPE) on one GPU:
            the probe over all 32 layers x 32 heads on a long input, chosen head 1:13; time and
            peak memory (bounded memory for 8B models), the monitor's spectral norms on it.
  overhead  a GPT-2 small shaped model trained in bf16 through stable_flash (Triton): step time
            without the monitor, with a measurement at every step, and the overhead at the
            default interval (every 100 steps).
  compile   the monitor on a torch.compile'd (inductor) 4-layer GPT-2: the metrics still arrive.
  fsdp2     (under torchrun, one process) FSDP2 fully_shard: DTensor weights are gathered.
Each part prints one JSON line ``RESULT {...}`` and appends it to ``$OUT/results.jsonl``; a part
that fails reports its error and the next one runs.
"""

from __future__ import annotations

import argparse
import json
import os
import time

import torch

import hf_stable_attn  # noqa: F401  (registers attn_implementation="stable_flash")
from hf_stable_attn.monitor import StabilityMonitor
from hf_stable_attn.probe import run_probe, text_summary, write_outputs

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"  # cpu: a smoke run of the script only


def _sync():
    if DEVICE == "cuda":
        torch.cuda.synchronize()


def _peak_gib() -> float:
    return torch.cuda.max_memory_allocated() / 2**30 if DEVICE == "cuda" else float("nan")


def _llama8b(layers: int):
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(
        hidden_size=4096, intermediate_size=14336, num_attention_heads=32, num_key_value_heads=8,
        num_hidden_layers=layers, vocab_size=128256, max_position_embeddings=131072,
        rope_parameters={"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0,
                         "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                         "original_max_position_embeddings": 8192},
        attn_implementation="stable_flash",
    )
    torch.manual_seed(0)
    torch.set_default_dtype(torch.bfloat16)
    with torch.device(DEVICE):
        model = LlamaForCausalLM(cfg).eval()
    torch.set_default_dtype(torch.float32)
    return model


def probe8b(args) -> dict:
    t0 = time.perf_counter()
    model = _llama8b(args.layers)
    build_s = time.perf_counter() - t0
    ids = torch.randint(1, 128000, (1, args.tokens), generator=torch.Generator().manual_seed(0))
    if DEVICE == "cuda":
        torch.cuda.reset_peak_memory_stats()
    weights_gib = _peak_gib()
    t0 = time.perf_counter()
    result = run_probe(model, [ids], chosen=[(1, 13)], similarity_tokens=256)
    _sync()
    probe_s = time.perf_counter() - t0
    peak_gib = _peak_gib()
    write_outputs(result, args.probe_out, figures=True)
    t0 = time.perf_counter()
    with torch.no_grad():
        model(input_ids=ids.to(DEVICE), use_cache=False)
    _sync()
    forward_s = time.perf_counter() - t0
    monitor = StabilityMonitor(every_n_steps=1, log_file=None, observe=False)
    times = []
    for step in range(3):
        _sync()
        t0 = time.perf_counter()
        monitor.step(model, None, step, is_main_process=True)
        _sync()
        times.append(time.perf_counter() - t0)
    print(text_summary(result.summary))
    del model
    return {"part": "probe8b", "layers": args.layers, "tokens": args.tokens, "build_s": round(build_s, 1),
            "probe_s": round(probe_s, 2), "plain_forward_s": round(forward_s, 3),
            "weights_gib": round(weights_gib, 2), "peak_gib": round(peak_gib, 2),
            "spectral_norm_s_cold_then_warm": [round(t, 3) for t in times],
            "max_sigma_q": max(max(v) for v in monitor.last_record["spectral_norm_q"].values())}


def _gpt2_small(n_layer: int = 12):
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    cfg = GPT2Config(n_embd=768, n_head=12, n_layer=n_layer, n_positions=1024, vocab_size=50304,
                     attn_implementation="stable_flash")
    return GPT2LMHeadModel(cfg).to(DEVICE, torch.bfloat16).train()


def _train(model, monitor, steps, batch, seq, fwd=None) -> list[float]:
    fwd = model if fwd is None else fwd
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=DEVICE == "cuda")
    g = torch.Generator(device=DEVICE).manual_seed(0)
    times = []
    for step in range(steps):
        ids = torch.randint(0, 50304, (batch, seq), device=DEVICE, generator=g)
        _sync()
        t0 = time.perf_counter()
        ctx = monitor.observe(step, is_main_process=True) if monitor else _null()
        with ctx:
            loss = fwd(input_ids=ids, labels=ids).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        if monitor:
            monitor.step(model, loss, step, is_main_process=True)
        _sync()
        times.append(time.perf_counter() - t0)
    return times


class _null:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False


def overhead(args) -> dict:
    """Step time without the monitor, with the default monitor (unmeasured steps) and with a
    measurement at every step. The three settings run in short blocks whose order rotates every
    round, so that drift and the after-effects of one block do not land on one setting."""
    model = _gpt2_small()
    _train(model, None, args.warmup, args.batch, args.seq)
    every = StabilityMonitor(every_n_steps=1, log_file="/tmp/monitor_overhead.jsonl")
    default = StabilityMonitor(log_file=None)  # every 100 steps: step 0 measured, the rest not
    block = 5
    times = {"base": [], "measured": [], "idle": []}
    runs = {
        "base": lambda: _train(model, None, block, args.batch, args.seq),
        "measured": lambda: _train(model, every, block, args.batch, args.seq),
        "idle": lambda: _train(model, default, block + 1, args.batch, args.seq)[1:],  # skip step 0
    }
    order = ["base", "measured", "idle"]
    for r in range(max(3, args.steps // block)):
        for name in order[r % 3:] + order[: r % 3]:
            times[name] += runs[name]()
    base, measured, idle = times["base"], times["measured"], times["idle"]
    step_s = sorted(base)[len(base) // 2]
    extra_s = sorted(measured)[len(measured) // 2] - step_s
    idle_s = sorted(idle)[len(idle) // 2] - step_s
    n = default.every_n_steps
    return {"part": "overhead", "batch": args.batch, "seq": args.seq, "step_ms": round(1e3 * step_s, 2),
            "measurement_ms": round(1e3 * extra_s, 2), "unmeasured_step_extra_ms": round(1e3 * idle_s, 3),
            f"overhead_pct_every_{n}_steps": round(100 * (extra_s / n + idle_s) / step_s, 3),
            "overhead_pct_every_step": round(100 * extra_s / step_s, 2),
            "last_record_layers": len(every.last_record["spectral_norm_q"]),
            "last_max_logit": max(max(v) for v in every.last_record["max_logit"].values())}


def compiled(args) -> dict:
    model = _gpt2_small(n_layer=4)
    fwd = torch.compile(model)
    monitor = StabilityMonitor(every_n_steps=2, log_file=None)
    t0 = time.perf_counter()
    _train(model, monitor, 5, 2, 256, fwd=fwd)
    rec = monitor.last_record
    return {"part": "compile", "seconds": round(time.perf_counter() - t0, 1), "last_step": rec["step"],
            "layers_observed": len(rec["max_logit"]), "layers_measured": len(rec["spectral_norm_q"])}


def fsdp2(args) -> dict:
    from torch.distributed.fsdp import fully_shard

    torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", 0)))
    torch.distributed.init_process_group("nccl")
    model = _gpt2_small()
    reference = StabilityMonitor(every_n_steps=1, log_file=None, observe=False, power_iters=50)
    reference.step(model, None, 0, is_main_process=True)
    for block in model.transformer.h:
        fully_shard(block)
    fully_shard(model)
    sharded = StabilityMonitor(every_n_steps=1, log_file=None, observe=True, power_iters=50)
    ids = torch.randint(0, 50304, (2, 256), device="cuda")
    with sharded.observe(0):
        model(input_ids=ids, labels=ids).loss.backward()
    sharded.step(model, None, 0)
    a, b = reference.last_record["spectral_norm_q"], sharded.last_record["spectral_norm_q"]
    diff = max(abs(x - y) / x for l in a for x, y in zip(a[l], b[l]))
    torch.distributed.destroy_process_group()
    return {"part": "fsdp2", "layers": len(b), "max_rel_diff_vs_unsharded": diff,
            "layers_observed": len(sharded.last_record["max_logit"])}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--parts", default="overhead,probe8b,compile",
                   help="comma-separated: probe8b, overhead, compile, fsdp2 (fsdp2 under torchrun)")
    p.add_argument("--out", default=os.environ.get("OUT", "out"), help="results.jsonl goes here")
    p.add_argument("--probe-out", default="/tmp/probe8b", help="the probe's output folder")
    p.add_argument("--layers", type=int, default=32)
    p.add_argument("--tokens", type=int, default=2048)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--seq", type=int, default=1024)
    args = p.parse_args()
    os.makedirs(args.out, exist_ok=True)
    parts = {"probe8b": probe8b, "overhead": overhead, "compile": compiled, "fsdp2": fsdp2}
    for name in args.parts.split(","):
        try:
            result = parts[name](args)
        except Exception as err:  # report and go on with the next part
            result = {"part": name, "error": f"{type(err).__name__}: {err}"[:2000]}
        torch.cuda.empty_cache()
        print("RESULT " + json.dumps(result), flush=True)
        with open(os.path.join(args.out, "results.jsonl"), "a") as f:
            f.write(json.dumps(result) + "\n")


if __name__ == "__main__":
    main()

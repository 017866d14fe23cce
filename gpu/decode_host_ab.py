"""Greedy dynamic-cache decoding of one of ``bench_e2e``'s models with ``stable_flash`` (plans on
and off) and ``sdpa`` in one process, alternating, and the host time spent inside the registered
attention function (GPU only).

Each of 4 rounds generates 64 new tokens for 8 prompts of 128 with every entry, in the order
ABC, CBA, ABC, CBA, after two untimed generations each. Prints per entry the milliseconds per new
token of each round and the mean wall time of one attention call (the registered function,
wrapped), so a round's gap between the entries can be set against the attention's share of it.

Run: ``PYTHONPATH=$PWD python gpu/decode_host_ab.py [llama-1b|gpt2-124m]``.
"""

from __future__ import annotations

import statistics
import sys
import time

import torch
from transformers import AttentionInterface

from benchmarks.bench_e2e import MODELS, build_model
from hf_stable_attn.kernels import _prepared  # importing the package registers stable_flash

NEW_TOKENS = 64
ROUNDS = 4
ENTRIES = [("stable_flash", True), ("sdpa", True), ("stable_flash", False)]  # (impl, plans on)


def timed(fn, total: dict):
    """``fn`` adding its wall microseconds and calls to ``total``."""
    def wrapper(*args, **kwargs):
        start = time.perf_counter()
        result = fn(*args, **kwargs)
        total["us"] += (time.perf_counter() - start) * 1e6
        total["calls"] += 1
        return result
    return wrapper


def main() -> None:
    name = sys.argv[1] if len(sys.argv) > 1 else "llama-1b"
    spec = MODELS[name]
    total = {"us": 0.0, "calls": 0}
    for impl in ("stable_flash", "sdpa"):
        AttentionInterface._global_mapping[impl] = timed(AttentionInterface._global_mapping[impl],
                                                         total)
    models = {impl: build_model(spec, impl, torch.device("cuda"), torch.bfloat16).eval()
              for impl in ("stable_flash", "sdpa")}
    prompts = torch.randint(models["sdpa"].config.vocab_size, (8, 128), device="cuda")

    def generate(model):
        with torch.no_grad():
            return model.generate(input_ids=prompts, attention_mask=torch.ones_like(prompts),
                                  do_sample=False, max_new_tokens=NEW_TOKENS,
                                  min_new_tokens=NEW_TOKENS, pad_token_id=0)

    for impl, plans in ENTRIES:
        _prepared.ENABLED = plans
        generate(models[impl])
        generate(models[impl])
    ms = {entry: [] for entry in ENTRIES}
    call_us = {entry: [] for entry in ENTRIES}
    for r in range(ROUNDS):
        for entry in (ENTRIES if r % 2 == 0 else ENTRIES[::-1]):
            impl, plans = entry
            _prepared.ENABLED = plans
            total.update(us=0.0, calls=0)
            torch.cuda.synchronize()
            start = time.perf_counter()
            generate(models[impl])
            torch.cuda.synchronize()
            ms[entry].append((time.perf_counter() - start) * 1e3 / NEW_TOKENS)
            call_us[entry].append(total["us"] / max(total["calls"], 1))
    for entry in ENTRIES:
        print(name, entry, "ms/token", [f"{x:.2f}" for x in ms[entry]],
              f"median {statistics.median(ms[entry]):.2f}",
              "| host us per attention call", [f"{x:.1f}" for x in call_us[entry]], flush=True)


if __name__ == "__main__":
    main()

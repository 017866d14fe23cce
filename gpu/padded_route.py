"""Eager GPT-2 training on padded batches: Transformers' unpadding against our key padding mask.

Until v15b (docs/kernel_notes.md) an eager padding mask on several queries per row took
Transformers' flash path, which unpads every layer's query/key/value (``nonzero``, an ``.item()``
sync, gathers and a scatter); since then ``integration._attend`` hands the mask to the kernel as
its key padding mask. This times AdamW steps of GPT-2 124M (seq 1024, batch 8, bf16, as
``benchmarks/bench_e2e``) with ``sdpa``, ``stable_flash`` through the key padding mask
(``route`` = kpm, the shipped choice) and ``stable_flash`` with padded calls forced through the
unpadding path (``route`` = unpad), for left and right padding of every second row, in
interleaved rounds in one process. One JSON line per (padding, impl, route). Its one run
(``docs/results/session12/padded_route_h100.jsonl``) predates v15b: there "shipped" is the
unpadding route.

Run: ``PYTHONPATH=$PWD python gpu/padded_route.py > padded_route.jsonl`` (GPU only).
"""

from __future__ import annotations

import json
import statistics
import sys
import time

import torch

from benchmarks.bench_e2e import MODELS, build_model, left_padding_mask
from hf_stable_attn import integration

PADDINGS = [("left", 128), ("left", 512), ("right", 128), ("right", 512)]
ROUNDS, STEPS, WARMUP = 3, 6, 3
SHIPPED_ROUTE = integration._flash_path_needed


def unpad_route(query, attention_mask, kwargs):
    """The choice before v15b: a padding mask on several queries per row takes the flash path."""
    if attention_mask is not None and query.shape[2] > 1:
        return True
    return SHIPPED_ROUTE(query, attention_mask, kwargs)


def padding_mask(batch: int, seqlen: int, side: str, pad: int) -> torch.Tensor:
    """(batch, seqlen) ones; every second row has ``pad`` zeros on ``side``."""
    mask = left_padding_mask(batch, seqlen, pad, torch.device("cuda"))
    return mask if side == "left" else mask.flip(1)


def main() -> None:
    spec = MODELS["gpt2-124m"]
    entries = [("sdpa", "-"), ("stable_flash", "unpad"), ("stable_flash", "kpm")]
    models = {impl: build_model(spec, impl, torch.device("cuda"), torch.bfloat16).train()
              for impl in ("sdpa", "stable_flash")}
    optimizers = {impl: torch.optim.AdamW(m.parameters(), lr=1e-4, fused=True)
                  for impl, m in models.items()}
    gen = torch.Generator(device="cuda").manual_seed(1)
    ids = torch.randint(models["sdpa"].config.vocab_size, (spec.batch, spec.seqlen),
                        generator=gen, device="cuda")

    def steps(impl: str, route: str, mask: torch.Tensor, count: int) -> float:
        integration._flash_path_needed = unpad_route if route == "unpad" else SHIPPED_ROUTE
        labels = ids.masked_fill(mask == 0, -100)
        torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(count):
            loss = models[impl](input_ids=ids, attention_mask=mask, labels=labels).loss
            loss.backward()
            optimizers[impl].step()
            optimizers[impl].zero_grad(set_to_none=True)
        torch.cuda.synchronize()
        integration._flash_path_needed = SHIPPED_ROUTE
        return 1e3 * (time.perf_counter() - start) / count

    for side, pad in PADDINGS:
        mask = padding_mask(spec.batch, spec.seqlen, side, pad)
        for impl, route in entries:
            steps(impl, route, mask, WARMUP)
        laps = {entry: [] for entry in entries}
        for _ in range(ROUNDS):
            for entry in entries:
                laps[entry].append(steps(*entry, mask, STEPS))
        for (impl, route), ms in laps.items():
            print(json.dumps(dict(gpu=torch.cuda.get_device_name(), model=spec.name, side=side,
                                  pad=pad, impl=impl, route=route, ms_rounds=ms,
                                  ms_per_step=statistics.median(ms))), flush=True)
    print("done", file=sys.stderr)


if __name__ == "__main__":
    main()

"""Where a training step's attention time goes: GPU time per kernel of our forward + backward
(forward, dQ with delta, dK/dV), with the fix on and off, next to cuDNN SDPA's kernels on the same
inputs (each run as the sweeps run it, ``gpu.ncu_profile.step_fn``), from the CUDA profiler (no
host time). Shapes as ``benchmarks/tune_kernel.py``'s defaults
(bf16, seqlen 4096, 16k tokens, hidden 2048). Our kernels run the tuner's picks, which each
record names (``tiles``), or with ``HF_STABLE_ATTN_AUTOTUNE=0`` their tables' first entries
(no tuning; at D64 causal S 2048 the forward's first entry took 0.495 ms against the pick's
0.445, session 70).

Run: ``PYTHONPATH=$PWD python gpu/kernel_split.py OUT.json [--seqlen S --cases D:causal:group
...]`` (GPU only; ``--cases 64:0:1 64:0:8``: head dim 64, no causal mask, MHA and GQA 8:1).
"""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict

import torch

# Before benchmarks.tune_kernel, which sets HF_STABLE_ATTN_AUTOTUNE=0 for a package imported later.
from hf_stable_attn.kernels._common import AUTOTUNE
from benchmarks.bench_attention import Shape
from benchmarks.tune_kernel import default_shapes, make_inputs
from gpu.ncu_profile import step_fn, tiles_run
from gpu.profile_e2e import cuda_ms_by_name

STEPS = 10


def kernel_ms(step, leaves) -> dict[str, float]:
    """Mean GPU milliseconds per ``step()`` of each CUDA kernel it launches (after a warm-up);
    the ``leaves``' gradients are reset before every step, so no accumulation kernel runs."""

    def fresh_step():
        for t in leaves:
            t.grad = None
        step()

    for _ in range(3):
        fresh_step()
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(STEPS):
            fresh_step()
        torch.cuda.synchronize()
    return cuda_ms_by_name(prof.events(), STEPS)


def shapes(seqlen: int, cases: list[str] | None) -> list[Shape]:
    """``tune_kernel``'s default shapes, or ``cases`` ("D:causal:group") at ``seqlen`` with 16k
    tokens and hidden size 2048."""
    if not cases:
        return default_shapes(16384, 2048)
    parsed = [(d, bool(causal), group)
              for d, causal, group in (map(int, case.split(":")) for case in cases)]
    return default_shapes(16384, 2048, seqlen=seqlen, cases=parsed)


def main(out_path: str, seqlen: int = 4096, cases: list[str] | None = None) -> None:
    records = []
    for shape in shapes(seqlen, cases):
        q, k, v, dout = make_inputs(shape)
        for t in (q, k, v):
            t.requires_grad_()
        steps = {impl: step_fn(impl, shape, q, k, v, dout)
                 for impl in ("stable_flash", "stable_flash_nofix", "sdpa_cudnn")}
        for impl, step in steps.items():
            try:
                kernels = kernel_ms(step, (q, k, v))
                record = dict(impl=impl, **asdict(shape), kernels_ms=kernels,
                              total_ms=sum(kernels.values()), tiles=tiles_run(impl))
            except Exception as exc:  # noqa: BLE001  (a refused shape is a result)
                error = f"{type(exc).__name__}: {exc}"[:300]
                record = dict(impl=impl, **asdict(shape), error=error)
            records.append(record)
            top = {name[:60]: round(ms, 3)
                   for name, ms in list(record.get("kernels_ms", {}).items())[:4]}
            print(json.dumps(dict(impl=impl, d=shape.head_dim, causal=shape.causal,
                                  hkv=shape.heads_kv, total=record.get("total_ms"), top=top)),
                  flush=True)
    report = dict(gpu=torch.cuda.get_device_name(), torch=torch.__version__,
                  tuned=AUTOTUNE, records=records)
    with open(out_path, "w") as f:
        json.dump(report, f, indent=1)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--seqlen", type=int, default=4096)
    ap.add_argument("--cases", nargs="+", help="D:causal:group (default: tune_kernel's shapes)")
    args = ap.parse_args()
    main(args.out, args.seqlen, args.cases)

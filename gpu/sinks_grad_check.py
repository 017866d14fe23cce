"""How far the attention sinks' gradient lies from float64, on the GPU's routes and the CPU's
reference path, against plain bf16 PyTorch (session 36: ``tests/gpu/test_sinks_gpu.py`` failed
once on dsinks, 1.7e-3 against plain's 2.7e-4).

For each seed: the largest |error| of dsinks (Hq,) for ours with bf16 sinks (the test's), ours
with fp32 sinks (the sum before its rounding to bf16), the CPU reference backend on the same
inputs, plain bf16 attention (``attention_oracle``), and the bf16 rounding of the exact value
(no bf16 result can beat it). Writes JSON lines to ``--out``.

    PYTHONPATH=$PWD python3 gpu/sinks_grad_check.py --out $OUT/sinks_grad.jsonl
"""

from __future__ import annotations

import argparse
import json

import torch

from hf_stable_attn import flash_attn_func
from hf_stable_attn.testing import attention_oracle

SHAPES = [(1, 2048, 2048, 8, 1, 64, False), (1, 2048, 2048, 4, 4, 128, True)]


def dsinks(fn, inputs, dout, sinks_dtype):
    """d out / d sinks (Hq,) as float64 for ``fn(q, k, v, sinks)``, sinks cast to ``sinks_dtype``."""
    leaves = [t.clone().requires_grad_() for t in (*inputs[:3], inputs[3].to(sinks_dtype))]
    out = fn(*leaves)
    return torch.autograd.grad(out, leaves[3], dout.to(out.dtype))[0].double()


def one(shape, seed):
    b, sq, sk, hq, hk, d, causal = shape
    g = torch.Generator(device="cuda").manual_seed(seed)

    def draw(*dims, scale=1.0):
        return (scale * torch.randn(*dims, generator=g, device="cuda")).to(torch.bfloat16)

    inputs = (draw(b, sq, hq, d), draw(b, sk, hk, d), draw(b, sk, hk, d), draw(hq, scale=2.0))
    dout = draw(b, sq, hq, d)

    def ours(backend):
        return lambda q, k, v, s: flash_attn_func(q, k, v, causal=causal, s_aux=s, backend=backend)

    def plain(q, k, v, s):
        return attention_oracle(q, k, v, causal=causal, sinks=s, compute_dtype=torch.bfloat16)

    exact_in = [t.double().requires_grad_() for t in inputs]
    exact_out = attention_oracle(*exact_in[:3], causal=causal, sinks=exact_in[3],
                                 compute_dtype=torch.float64)
    exact = torch.autograd.grad(exact_out, exact_in[3], dout.double())[0]
    cpu = [t.cpu() for t in inputs]
    found = {
        "ours_bf16_sinks": dsinks(ours("triton"), inputs, dout, torch.bfloat16),
        "ours_fp32_sinks": dsinks(ours("triton"), inputs, dout, torch.float32),
        "cpu_reference": dsinks(ours("reference"), cpu, dout.cpu(), torch.bfloat16).cuda(),
        "plain_bf16": dsinks(plain, inputs, dout, torch.bfloat16),
        "exact_rounded": exact.to(torch.bfloat16).double(),
    }
    row = {"shape": shape, "seed": seed, "largest_exact": exact.abs().max().item()}
    row.update({name: (got - exact).abs().max().item() for name, got in found.items()})
    return row


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--seeds", type=int, default=8)
    args = parser.parse_args()
    with open(args.out, "w") as f:
        for shape in SHAPES:
            for seed in [shape[1] * 7 + shape[5], *range(args.seeds)]:
                row = one(shape, seed)
                print(json.dumps({k: (f"{v:.3e}" if isinstance(v, float) else v)
                                  for k, v in row.items()}), flush=True)
                f.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()

"""Where attention sinks' cost lies on the GPU: the forward kernels with and without the sinks
folded in their epilogue (``sinks=``), and the backward with and without the dQ kernel's fp32
``rowsum(P * dP)`` (``p_dp_out``), on gpt-oss's attention shapes (D64, 64/8 heads, 16384
tokens; causal, and a 128-key window). Prints one line per shape, medians of
``triton.testing.do_bench``.

    PYTHONPATH=$PWD python3 gpu/sinks_cost_split.py
"""

from __future__ import annotations

import torch
import triton.testing

from hf_stable_attn.kernels import LAUNCHES, flash_attn_bwd, flash_attn_fwd
from hf_stable_attn.shift_rule import shift_params
from hf_stable_attn.testing import fix_kwargs, launch_kwargs


def _median_ms(fn) -> float:
    return triton.testing.do_bench(fn, rep=200, return_mode="median")


def main():
    g = torch.Generator(device="cuda").manual_seed(0)
    fix = fix_kwargs(shift_params(torch.bfloat16))
    for seqlen in (2048, 4096):
        for window in (None, 128):
            batch = 16384 // seqlen
            q, dout = (torch.randn(batch, seqlen, 64, 64, generator=g, device="cuda",
                                   dtype=torch.bfloat16) for _ in range(2))
            k, v = (torch.randn(batch, seqlen, 8, 64, generator=g, device="cuda",
                                dtype=torch.bfloat16) for _ in range(2))
            sinks = 2 * torch.randn(64, generator=g, device="cuda")
            m = launch_kwargs(seqlen, seqlen, 64, causal=True,
                              window_left=-1 if window is None else window - 1)
            fwd = {name: _median_ms(lambda: flash_attn_fwd(q, k, v, **m, **fix, sinks=s))
                   for name, s in (("plain", None), ("sinks", sinks))}
            route = LAUNCHES["fwd"].last
            out, lse = flash_attn_fwd(q, k, v, **m, **fix, sinks=sinks)
            p_dp = torch.empty_like(lse)
            bwd = {name: _median_ms(lambda: flash_attn_bwd(dout, q, k, v, out, lse, **m,
                                                           p_dp_out=buffer))
                   for name, buffer in (("plain", None), ("p_dp", p_dp))}
            print(f"S {seqlen} window {window}: forward {fwd['plain']:.3f} ms, with sinks "
                  f"{fwd['sinks']:.3f} ms (+{100 * (fwd['sinks'] / fwd['plain'] - 1):.1f}%, "
                  f"config {route}); backward {bwd['plain']:.3f} ms, with p_dp "
                  f"{bwd['p_dp']:.3f} ms (+{100 * (bwd['p_dp'] / bwd['plain'] - 1):.1f}%)",
                  flush=True)


if __name__ == "__main__":
    main()

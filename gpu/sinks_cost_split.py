"""Where attention sinks' cost lies on the GPU (session 36): the kernels' backward with and
without the dQ kernel's fp32 ``rowsum(P * dP)`` (``p_dp_out``), and ``sinks.fold_sinks`` alone
(PyTorch's ops and the Triton kernel), on gpt-oss's attention shapes (D64, 64/8 heads, 16384
tokens, causal and a 128-key window). Also checks that the in-place PyTorch fold gives the bits of
``(out.float() * kept).to(bf16)`` on CUDA, and how far the kernel's lies from it.

    PYTHONPATH=$PWD python3 gpu/sinks_cost_split.py
"""

from __future__ import annotations

import torch
import triton.testing

from hf_stable_attn.kernels import flash_attn_bwd, flash_attn_fwd
from hf_stable_attn.shift_rule import shift_params
from hf_stable_attn.sinks import _per_row, fold_sinks
from hf_stable_attn.testing import fix_kwargs, launch_kwargs


def main():
    g = torch.Generator(device="cuda").manual_seed(0)
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
            out, lse = flash_attn_fwd(q, k, v, **m, **fix_kwargs(shift_params(q.dtype)))
            p_dp = torch.empty_like(lse)

            def bwd(p_dp_out=None):
                return flash_attn_bwd(dout, q, k, v, out, lse, **m, p_dp_out=p_dp_out)

            plain = triton.testing.do_bench(bwd, rep=200, return_mode="median")
            with_p_dp = triton.testing.do_bench(lambda: bwd(p_dp), rep=200, return_mode="median")
            folds = {kernel: triton.testing.do_bench(
                lambda: fold_sinks(out.clone(), lse.clone(), sinks, kernel), rep=200,
                return_mode="median") for kernel in (False, True)}
            copy = triton.testing.do_bench(lambda: (out.clone(), lse.clone()), rep=200,
                                           return_mode="median")
            folded, new_lse = fold_sinks(out.clone(), lse.clone(), sinks)
            kept = torch.exp(lse - new_lse)
            same = torch.equal(folded, (out.float() * _per_row(kept)).to(out.dtype))
            by_kernel = fold_sinks(out.clone(), lse.clone(), sinks, True)[0]
            steps = (by_kernel.float() - folded.float()).abs().max().item()
            print(f"S {seqlen} window {window}: backward {plain:.3f} ms, with p_dp "
                  f"{with_p_dp:.3f} ms (+{100 * (with_p_dp / plain - 1):.1f}%); fold: PyTorch "
                  f"{folds[False] - copy:.3f} ms, kernel {folds[True] - copy:.3f} ms (clones "
                  f"{copy:.3f} ms subtracted); PyTorch in-place bits equal: {same}; kernel's "
                  f"largest difference {steps:.2e}", flush=True)


if __name__ == "__main__":
    main()

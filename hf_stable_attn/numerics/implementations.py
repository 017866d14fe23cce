"""The attention implementations the lab compares, each as ``run(inputs, scale, causal) -> Run``.

For every implementation the lab needs its output ``O``, its query gradient ``dQ`` (autograd,
or the FlashAttention-2 backward of the reference path) and ``delta``: the paper's quantity
``rowsum(dO * O)`` in fp32, as FlashAttention-2 computes it from the stored output. Only the
Section 3.2 isolation ``delta_from_dp`` computes ``delta = rowsum(dP * P)`` instead, which is what
its backward uses.

Families:
- ``sdpa_*``: PyTorch's scaled_dot_product_attention restricted to one backend (math, flash,
  efficient, cudnn; on CPU only math and flash exist).
- ``triton_*``: our kernel through ``hf_stable_attn.flash_attn_func(backend="triton")`` with the
  fix off (``triton_fa2``) or on with beta 2/4/8; ``triton_single_b2`` calls the launcher with
  the experimental ``shift_single`` (shift every row, guarded by ``max_gap``). CUDA only.
- ``ref_*``: the tiled PyTorch reference path (``hf_stable_attn.reference``): the same variants,
  the Section 3.2 isolations and the flash-attention PR #2721 idea (``l`` = sum of rounded P).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch
import torch.nn.functional as F

from ..reference import ReferenceNumerics, reference_backward, reference_forward
from ..shift_rule import shift_params
from .drift import delta_rowsum
from .exact import causal_mask
from .inputs import Inputs


@dataclass(frozen=True)
class Run:
    """One implementation's results: out, dq ``(B, S, H, D)``; delta fp32 ``(B, H, S)``."""

    out: torch.Tensor
    dq: torch.Tensor
    delta: torch.Tensor


@dataclass(frozen=True)
class Implementation:
    name: str
    family: str  # "sdpa", "triton" or "reference"
    description: str
    run: Callable[[Inputs, float, bool], Run]

    def supports(self, device: torch.device) -> bool:
        """Triton needs CUDA; the rest run anywhere (an SDPA backend may still refuse)."""
        return self.family != "triton" or device.type == "cuda"


def _sdpa(backend) -> Callable[[Inputs, float, bool], Run]:
    def run(x: Inputs, scale: float, causal: bool) -> Run:
        from torch.nn.attention import sdpa_kernel

        q, k, v = (t.transpose(1, 2).detach().requires_grad_(i == 0) for i, t in enumerate((x.q, x.k, x.v)))
        with sdpa_kernel([backend]):
            out = F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale)
            (dq,) = torch.autograd.grad(out, q, x.dout.transpose(1, 2))
        out = out.detach().transpose(1, 2)
        return Run(out, dq.transpose(1, 2), delta_rowsum(x.dout, out))

    return run


def _triton(stabilize: bool, beta: float) -> Callable[[Inputs, float, bool], Run]:
    def run(x: Inputs, scale: float, causal: bool) -> Run:
        from .. import flash_attn_func

        q = x.q.detach().requires_grad_()
        out = flash_attn_func(
            q, x.k, x.v, softmax_scale=scale, causal=causal, stabilize=stabilize, beta=beta,
            backend="triton",
        )
        (dq,) = torch.autograd.grad(out, q, x.dout)
        return Run(out.detach(), dq, delta_rowsum(x.dout, out))

    return run


def _triton_single(beta: float) -> Callable[[Inputs, float, bool], Run]:
    def run(x: Inputs, scale: float, causal: bool) -> Run:
        from .. import kernels

        p = shift_params(x.q.dtype, True, beta, shift_single=True)
        masking = dict(
            cu_seqlens_q=None, cu_seqlens_k=None, max_seqlen_q=x.q.shape[1],
            max_seqlen_k=x.k.shape[1], softmax_scale=scale, causal=causal, window_left=-1,
            window_right=-1, softcap=0.0, dropout_p=0.0, seed=0,
        )
        out, lse = kernels.flash_attn_fwd(
            x.q, x.k, x.v, **masking, stabilize=True, beta=beta, tie_window=p.tie_window,
            min_gap=p.min_gap, max_gap=p.max_gap, shift_single=True,
        )
        dq, _, _ = kernels.flash_attn_bwd(x.dout, x.q, x.k, x.v, out, lse, **masking)
        return Run(out, dq, delta_rowsum(x.dout, out))

    return run


def _delta_from_dp(x: Inputs, lse: torch.Tensor, scale: float, causal: bool) -> torch.Tensor:
    """``rowsum(dP * P)`` in fp32 with ``P = exp(S - lse)`` and ``dP = dO V^T`` (B, H, S)."""
    q, k, v, do = (t.float().transpose(1, 2) for t in (x.q, x.k, x.v, x.dout))
    s = torch.matmul(q, k.transpose(-1, -2)) * scale
    if causal:
        s = s.masked_fill(~causal_mask(s.shape[-1], s.device), float("-inf"))
    p = torch.exp(s - lse[..., None])
    return (p * torch.matmul(do, v.transpose(-1, -2))).sum(-1)


def _reference(
    stabilize: bool, beta: float = 2.0, shift_single: bool = False, **numerics: bool
) -> Callable[[Inputs, float, bool], Run]:
    options = ReferenceNumerics(**numerics)

    def run(x: Inputs, scale: float, causal: bool) -> Run:
        shift = shift_params(x.q.dtype, stabilize, beta, shift_single=shift_single)
        args = dict(softmax_scale=scale, causal=causal, numerics=options)
        out, lse = reference_forward(x.q, x.k, x.v, shift=shift, **args)
        dq, _, _ = reference_backward(x.dout, x.q, x.k, x.v, out, lse, **args)
        if options.delta_from_dp:
            delta = _delta_from_dp(x, lse, scale, causal)
        else:
            delta = delta_rowsum(x.dout, out)
        return Run(out, dq, delta)

    return run


def _registry() -> dict[str, Implementation]:
    from torch.nn.attention import SDPBackend

    items = [
        Implementation("sdpa_math", "sdpa", "PyTorch SDPA, math backend", _sdpa(SDPBackend.MATH)),
        Implementation("sdpa_flash", "sdpa", "PyTorch SDPA, FLASH backend", _sdpa(SDPBackend.FLASH_ATTENTION)),
        Implementation("sdpa_efficient", "sdpa", "PyTorch SDPA, EFFICIENT backend", _sdpa(SDPBackend.EFFICIENT_ATTENTION)),
        Implementation("sdpa_cudnn", "sdpa", "PyTorch SDPA, cuDNN backend", _sdpa(SDPBackend.CUDNN_ATTENTION)),
        Implementation("triton_fa2", "triton", "our kernel, fix off (FlashAttention-2 numerics)", _triton(False, 2.0)),
    ]
    items += [
        Implementation(f"triton_b{b}", "triton", f"our kernel, fix on, beta {b}", _triton(True, float(b)))
        for b in (2, 4, 8)
    ]
    items += [
        Implementation("triton_single_b2", "triton", "our kernel, experimental: shift single maxima too (beta 2)", _triton_single(2.0)),
        Implementation("ref_fa2", "reference", "reference path, fix off", _reference(False)),
    ]
    items += [
        Implementation(f"ref_b{b}", "reference", f"reference path, fix on, beta {b}", _reference(True, float(b)))
        for b in (2, 4, 8)
    ]
    items += [
        Implementation("ref_single_b2", "reference", "reference, experimental: shift single maxima too (beta 2)", _reference(True, 2.0, shift_single=True)),
        Implementation("ref_pr2721", "reference", "reference, fix off, l = sum of rounded P (flash-attention PR #2721)", _reference(False, normalize_by_rounded_p=True)),
        Implementation("ref_pr2721_b2", "reference", "reference, fix on (beta 2) + l = sum of rounded P", _reference(True, normalize_by_rounded_p=True)),
        Implementation("ref_single_pr2721_b2", "reference", "reference, experimental: shift single maxima too (beta 2) + l = sum of rounded P", _reference(True, 2.0, shift_single=True, normalize_by_rounded_p=True)),
        Implementation("ref_out_fp32", "reference", "reference, fix off, O kept in fp32 (Section 3.2)", _reference(False, out_fp32=True)),
        Implementation("ref_delta_from_dp", "reference", "reference, fix off, delta = rowsum(dP * P) (Section 3.2)", _reference(False, delta_from_dp=True)),
        Implementation("ref_pv_fp32", "reference", "reference, fix off, P not rounded before P @ V (Section 3.2)", _reference(False, pv_fp32=True)),
    ]
    return {impl.name: impl for impl in items}


IMPLEMENTATIONS: dict[str, Implementation] = _registry()

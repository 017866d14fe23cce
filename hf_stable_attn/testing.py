"""Test helpers: a plain attention oracle and the flash-attention error rule.

``attention_oracle`` materializes the full score matrix, in float64 (the ground truth) or in the
inputs' own dtype (the "same math in plain PyTorch" whose error the rule compares against).
``oracle_with_grads`` adds its gradients. ``check_flash_rule`` is flash-attention's acceptance
test: the implementation's error against the float64 oracle may be at most ``factor`` times the
plain-PyTorch error, plus a small slack.
``launch_kwargs`` and ``fix_kwargs`` give the Triton launchers' keyword arguments for the tests,
benchmarks and GPU scripts that call them directly.
"""

from __future__ import annotations

import torch

from .dropout import keep_mask
from .shift_rule import ShiftParams


def launch_kwargs(seqlen_q: int, seqlen_k: int, head_dim: int, **changes) -> dict:
    """Masking keywords of ``kernels.flash_attn_fwd`` / ``flash_attn_bwd`` for dense
    (B, S, H, D) inputs: scale ``head_dim ** -0.5``, no mask, window, softcap, dropout or key
    padding mask, unless ``changes`` sets them (``causal=True``; a packed call passes
    ``cu_seqlens_q/k`` and ``max_seqlen_q/k``)."""
    kwargs = dict(cu_seqlens_q=None, cu_seqlens_k=None, max_seqlen_q=seqlen_q,
                  max_seqlen_k=seqlen_k, softmax_scale=head_dim**-0.5, causal=False,
                  window_left=-1, window_right=-1, softcap=0.0, dropout_p=0.0, seed=0,
                  key_padding_mask=None)
    unknown = set(changes) - set(kwargs)
    if unknown:
        raise TypeError(f"unknown launcher keyword(s) {sorted(unknown)}; valid: {sorted(kwargs)}")
    kwargs.update(changes)
    return kwargs


def fix_kwargs(params: ShiftParams) -> dict:
    """The fix's keywords of ``kernels.flash_attn_fwd`` from ``shift_rule.shift_params(...)``."""
    return dict(stabilize=params.stabilize, beta=params.beta, tie_window=params.tie_window,
                min_gap=params.min_gap, max_gap=params.max_gap)


def _dense(x: torch.Tensor, cu: torch.Tensor | None, max_len: int | None):
    """Packed (T, H, D) -> padded (N, max_len, H, D) and a validity mask (N, max_len)."""
    if cu is None:
        return x, torch.ones(x.shape[0], x.shape[1], dtype=torch.bool, device=x.device)
    lens = (cu[1:] - cu[:-1]).long()
    pos = torch.arange(max_len, device=x.device)
    valid = pos[None] < lens[:, None]
    out = x.new_zeros(lens.numel(), max_len, *x.shape[1:])
    out[valid] = x[: int(cu[-1])]
    return out, valid


def attention_oracle(
    q, k, v, *, cu_seqlens_q=None, cu_seqlens_k=None, max_seqlen_q=None, max_seqlen_k=None,
    softmax_scale=None, causal=False, window_left=-1, window_right=-1, softcap=0.0,
    dropout_p=0.0, seed=0, key_padding_mask=None, sinks=None, compute_dtype=torch.float64,
):
    """Standard attention ``softmax(mask(S)) V`` on the full matrix, in ``compute_dtype``.

    Same arguments and layouts as ``hf_stable_attn.reference.reference_forward``; differentiable
    with respect to q, k, v (and ``sinks``). ``sinks`` (Hq,): attention-sink logits, appended to
    each row's scores as a last column and dropped after the softmax (gpt-oss's eager attention).
    Returns ``out`` in ``compute_dtype``, rows that see no key are 0.
    """
    qd, valid_q = _dense(q, cu_seqlens_q, max_seqlen_q)
    kd, valid_k = _dense(k, cu_seqlens_k, max_seqlen_k)
    vd, _ = _dense(v, cu_seqlens_k, max_seqlen_k)
    hq, hk = q.shape[-2], k.shape[-2]
    qd, kd, vd = (x.to(compute_dtype).transpose(1, 2) for x in (qd, kd, vd))
    kd = kd.repeat_interleave(hq // hk, dim=1)
    vd = vd.repeat_interleave(hq // hk, dim=1)
    scale = softmax_scale if softmax_scale is not None else q.shape[-1] ** -0.5
    s = torch.matmul(qd, kd.transpose(-1, -2)) * scale
    if softcap > 0:
        s = softcap * torch.tanh(s / softcap)
    lq = valid_q.sum(1).view(-1, 1, 1, 1)
    lk = valid_k.sum(1).view(-1, 1, 1, 1)
    i = torch.arange(s.shape[-2], device=q.device).view(1, 1, -1, 1)
    j = torch.arange(s.shape[-1], device=q.device).view(1, 1, 1, -1)
    diag = i + lk - lq
    ok = (i < lq) & (j < lk)
    right = 0 if causal else window_right
    if right >= 0:
        ok = ok & (j <= diag + right)
    if window_left >= 0:
        ok = ok & (j >= diag - window_left)
    if key_padding_mask is not None:
        ok = ok & key_padding_mask.bool()[:, None, None, :]
    s = s.masked_fill(~ok, float("-inf"))
    if sinks is not None:
        column = sinks.to(compute_dtype).view(1, hq, 1, 1).expand(*s.shape[:3], 1)
        p = torch.softmax(torch.cat([s, column], dim=-1), dim=-1)[..., :-1]
    else:
        p = torch.softmax(s, dim=-1).nan_to_num(0.0)
    if dropout_p > 0:
        keep = keep_mask(seed, dropout_p, s.shape[0], hq, s.shape[2], s.shape[3], q.device)
        p = p * keep.to(p.dtype) / (1.0 - dropout_p)
    out = torch.matmul(p, vd).transpose(1, 2)
    if cu_seqlens_q is None:
        return out
    packed = out.new_zeros(q.shape[0], *out.shape[2:])
    packed[: int(cu_seqlens_q[-1])] = out[valid_q]
    return packed


def oracle_with_grads(q, k, v, dout, compute_dtype, **mask):
    """``attention_oracle`` in ``compute_dtype`` and its gradients for the output gradient
    ``dout``: ``(out, (dq, dk, dv))``, shaped like the inputs and all in ``compute_dtype``: q, k
    and v are cast before the graph, so float64 gradients are not rounded to the inputs' dtype on
    the way back. ``mask``: ``attention_oracle``'s keyword arguments."""
    leaves = [t.detach().to(compute_dtype).requires_grad_() for t in (q, k, v)]
    out = attention_oracle(*leaves, **mask, compute_dtype=compute_dtype)
    return out.detach(), torch.autograd.grad(out, leaves, dout.to(compute_dtype))


def near_tie_inputs(head_dim: int, seqlen_q: int, seqlen_k: int, seed: int):
    """q (1, Sq, 1, D), k and v (1, Sk, 1, D), bf16 on the CPU, whose rows' two largest scores
    come from keys 100 and ``Sk - 300`` (different key tiles) and lie a few bf16 steps apart:
    inside the tie window for some rows, outside it for others. Drawn on the CPU after
    ``torch.manual_seed(seed)``, so a seed gives the same tensors on every machine."""
    torch.manual_seed(seed)
    u = torch.randn(head_dim)
    q = (0.3 * torch.randn(1, seqlen_q, 1, head_dim) + u).to(torch.bfloat16)
    k = 0.3 * torch.randn(1, seqlen_k, 1, head_dim)
    k[0, 100, 0] = 3 * u
    k[0, seqlen_k - 300, 0] = 3 * u + 0.003 * torch.randn(head_dim)
    v = torch.randn(1, seqlen_k, 1, head_dim).to(torch.bfloat16)
    return q, k.to(torch.bfloat16), v


def max_error(a: torch.Tensor, b: torch.Tensor) -> float:
    """Largest absolute difference, computed in float64; NaN anywhere gives inf."""
    d = (a.double() - b.double()).abs()
    if torch.isnan(d).any():
        return float("inf")
    return d.max().item() if d.numel() else 0.0


def check_flash_rule(name: str, got, plain, exact, factor: float, slack: float = 1e-5) -> None:
    """Assert ``|got - exact| <= factor * |plain - exact| + slack`` (max norms), no NaN.

    got: the implementation under test; plain: the same math in plain PyTorch in the low dtype;
    exact: the float64 oracle.
    """
    if torch.isnan(got).any():
        raise AssertionError(f"{name}: NaN in the result")
    err, base = max_error(got, exact), max_error(plain, exact)
    if not err <= factor * base + slack:
        raise AssertionError(
            f"{name}: error {err:.3e} > {factor} x plain-PyTorch error {base:.3e} + {slack:.0e}"
        )

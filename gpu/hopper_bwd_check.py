"""The Gluon Hopper dK/dV and dQ (``kernels/flash_bwd_hopper.py``) against float64 and the
Triton backward, then ``flash_attn_bwd`` timed with them and without them (H100/H200).

Run: ``PYTHONPATH=$PWD python gpu/hopper_bwd_check.py --out results.json [--budget-s 400]``.
Correctness: the flash rule for gradients (3x the plain-PyTorch error against float64) on odd
lengths, GQA (with and without the group split), ``Sq != Sk`` both ways (causal rows that see no
key), both dtypes, and Q/K/V in the (B, H, S, D) layout transposed, as Transformers passes them.
Timing: ``do_bench`` medians of the whole backward (dQ, then dK/dV) with the Triton dK/dV and
with each Gluon config (16384 tokens at each of ``--seqlens``), over ``--rounds`` rounds that
each start at another variant (``benchmarks.timing.interleaved_medians``: session 19's runs, in
one fixed order, measured the config timed first 2-7% slower whichever it was). Every head dim
runs the Gluon kernel here, whether or not ``flash_bwd_hopper.FASTER`` routes it.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import torch

from gpu.timed_checks import rates, save, time_within_budget
from hf_stable_attn.kernels import LAUNCHES, clear_plans, flash_attn_bwd, flash_attn_fwd
from hf_stable_attn.kernels import flash_bwd, flash_bwd_hopper
from hf_stable_attn.shift_rule import shift_params
from hf_stable_attn.testing import attention_oracle, fix_kwargs, launch_kwargs, max_error

# (STAGES, consumer registers, query rows per step) of the dK/dV and (BLOCK_N, STAGES,
# consumer registers) of the dQ tried per head dim; the first of each is the table's.
CONFIGS = {128: [(2, 240, 64), (3, 240, 64)], 64: [(2, 240, 128), (3, 240, 128)]}
DQ_CONFIGS = {128: [(64, 3, 240), (128, 2, 240)], 64: [(128, 2, 232), (64, 3, 232)]}


def backward(dout, q, k, v, out, lse, causal, config, dq_config=None):
    """``flash_attn_bwd`` with the Gluon dK/dV at ``config`` (and the Gluon dQ at
    ``dq_config``, else the Triton dQ), or both Triton kernels (``config`` None)."""
    kw = launch_kwargs(q.shape[1], k.shape[1], q.shape[-1], causal=causal)
    if config is None:
        saved, flash_bwd.flash_bwd_hopper = flash_bwd.flash_bwd_hopper, None
        try:
            return flash_attn_bwd(dout, q, k, v, out, lse, **kw)
        finally:
            flash_bwd.flash_bwd_hopper = saved
    d = q.shape[-1]
    m = flash_bwd_hopper
    saved = (m.HOPPER_CONFIGS[d], m.FASTER, m.DQ_CONFIGS[d], m.DQ_FASTER)
    both = {(d, False), (d, True)}
    m.HOPPER_CONFIGS[d], m.FASTER = config, {(*key, g): 0 for key in both for g in (False, True)}
    m.DQ_CONFIGS[d], m.DQ_FASTER = (dq_config, both) if dq_config else (saved[2], set())
    clear_plans()  # a plan keeps the routes of the call that made it
    try:
        grads = flash_attn_bwd(dout, q, k, v, out, lse, **kw)
        assert LAUNCHES["dkdv"].last == m.tile_record(d), "not the Gluon dK/dV"
        assert (LAUNCHES["dq"].last == m.dq_tile_record(d)) == bool(dq_config), "dQ path"
    finally:
        m.HOPPER_CONFIGS[d], m.FASTER, m.DQ_CONFIGS[d], m.DQ_FASTER = saved
        clear_plans()
    return grads


def inputs(batch, sq, sk, hq, hk, d, dtype, seed, heads_outer=False):
    """q (B, Sq, Hq, D), k, v (B, Sk, Hk, D), dout like q; with ``heads_outer`` views of
    (B, H, S, D) tensors, as Transformers' attention interface passes them."""
    g = torch.Generator(device="cuda").manual_seed(seed)

    def draw(s, h):
        if heads_outer:
            return torch.randn(batch, h, s, d, device="cuda", dtype=dtype, generator=g).transpose(1, 2)
        return torch.randn(batch, s, h, d, device="cuda", dtype=dtype, generator=g)
    return draw(sq, hq), draw(sk, hk), draw(sk, hk), draw(sq, hq)


def check(case, config):
    batch, sq, sk, hq, hk, d, dtype, causal, heads_outer, whole_group = case
    q, k, v, dout = inputs(batch, sq, sk, hq, hk, d, dtype, sq * 7 + d, heads_outer)
    kw = launch_kwargs(sq, sk, d, causal=causal)
    out, lse = flash_attn_fwd(q, k, v, **kw, **fix_kwargs(shift_params(dtype)))
    saved = flash_bwd.PROGRAMS_PER_SM, flash_bwd_hopper.PROGRAMS_PER_SM
    if whole_group:  # one program sums every query head of its group (no split)
        flash_bwd.PROGRAMS_PER_SM, flash_bwd_hopper.PROGRAMS_PER_SM = 0, {False: 0, True: 0}
    try:
        got = backward(dout, q, k, v, out, lse, causal, config, DQ_CONFIGS[d][0])
        ref = backward(dout, q, k, v, out, lse, causal, None)
    finally:
        flash_bwd.PROGRAMS_PER_SM, flash_bwd_hopper.PROGRAMS_PER_SM = saved
    grads = {}
    for compute_dtype in (torch.float64, dtype):
        leaves = [t.detach().clone().requires_grad_() for t in (q, k, v)]
        attention_oracle(*leaves, **kw, compute_dtype=compute_dtype).backward(dout.to(compute_dtype))
        grads[compute_dtype] = [t.grad for t in leaves]
    r = dict(case=str(case), config=config, dq_config=DQ_CONFIGS[d][0], ok=True)
    for i, name in enumerate(("dq", "dk", "dv")):
        err = max_error(got[i], grads[torch.float64][i])
        base = max_error(grads[dtype][i], grads[torch.float64][i])
        r[name] = dict(err=err, plain_err=base, vs_triton=max_error(got[i], ref[i]))
        r["ok"] &= bool(err <= 3 * base + 1e-5 and not torch.isnan(got[i]).any())
    return r


def timing(shape, configs, rounds):
    batch, s, hq, hk, d, causal = shape
    q, k, v, dout = inputs(batch, s, s, hq, hk, d, torch.bfloat16, seed=1)
    kw = launch_kwargs(s, s, d, causal=causal)
    out, lse = flash_attn_fwd(q, k, v, **kw, **fix_kwargs(shift_params(torch.bfloat16)))
    fns = {"triton": lambda: backward(dout, q, k, v, out, lse, causal, None)}
    for c in configs:
        fns[f"dkdv {c}"] = (lambda c=c: backward(dout, q, k, v, out, lse, causal, c))
    for c in DQ_CONFIGS[d]:
        fns[f"dkdv {configs[0]} + dq {c}"] = (
            lambda c=c: backward(dout, q, k, v, out, lse, causal, configs[0], c))
    flops = 2.5 * 4 * batch * hq * s * s * d / (2 if causal else 1)
    return dict(shape=dict(batch=batch, seqlen=s, heads_q=hq, heads_kv=hk, head_dim=d,
                           causal=causal), **rates(fns, rounds, q.device, flops))


CASES = [  # batch, Sq, Sk, Hq, Hk, D, dtype, causal, (B, H, S, D) layout, no group split
    (1, 2048, 2048, 4, 4, 128, torch.bfloat16, False, False, False),
    (1, 2048, 2048, 4, 4, 64, torch.bfloat16, True, False, False),
    (2, 2100, 2100, 8, 1, 128, torch.float16, True, False, False),  # GQA, group split
    (2, 2100, 2100, 8, 2, 128, torch.bfloat16, True, False, True),  # GQA, 4 heads a program
    (1, 3000, 2048, 2, 2, 128, torch.bfloat16, True, False, False),  # rows that see no key
    (1, 2048, 3000, 2, 2, 64, torch.bfloat16, True, False, False),
    (1, 2500, 2171, 4, 2, 64, torch.float16, False, True, True),
    (1, 2200, 2200, 4, 1, 128, torch.bfloat16, True, True, False),
]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--budget-s", type=float, default=400)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--head-dims", type=int, nargs="+", default=[128, 64])
    ap.add_argument("--seqlens", type=int, nargs="+", default=[4096])
    ap.add_argument("--timing-only", action="store_true")
    ap.add_argument("--causal-only", action="store_true", help="time only causal shapes")
    args = ap.parse_args()
    t0 = time.time()
    result = dict(gpu=torch.cuda.get_device_name(), torch=torch.__version__, checks=[],
                  timings=[])

    for case in ([] if args.timing_only else CASES):
        if case[5] in args.head_dims:
            r = check(case, CONFIGS[case[5]][0])
            result["checks"].append(r)
            print(json.dumps(r), flush=True)
    save(result, args.out)
    shapes = []
    for s in args.seqlens:
        for d in args.head_dims:
            h, b = (16 if d == 128 else 32), 16384 // s
            shapes += [(b, s, h, hk, d, causal) for hk in (h, h // 8)
                       for causal in ((True,) if args.causal_only else (False, True))]
    time_within_budget(shapes, lambda shape: timing(shape, CONFIGS[shape[4]], args.rounds),
                       result, args.out, args.budget_s, t0, ("shape", "tflops"))
    sys.exit(0 if all(c["ok"] for c in result["checks"]) else 1)


if __name__ == "__main__":
    main()

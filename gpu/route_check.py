"""Which route is faster at 2048 and 4096 tokens (H100/H200): the forward with the fix through
the Gluon kernel (two tile widths) or the tuned Triton kernel, and the GQA backward with each
group split (docs/kernel_notes.md, session 18).

Run: ``PYTHONPATH=$PWD python gpu/route_check.py --out routes.json [--budget-s 300]``.
Timing: ``do_bench`` medians over ``--rounds`` rounds, each starting at another variant of the
shape (``benchmarks.timing.interleaved_medians``), B 4, H 16 at D128 and 32 at D64 (GQA 8:1 for
the backward), bf16, after one untimed call each (which compiles and, for the Triton kernel,
tunes).
"""

from __future__ import annotations

import argparse
import time

import torch

from gpu.timed_checks import rates, time_within_budget
from hf_stable_attn.kernels import clear_plans, flash_attn_bwd, flash_attn_fwd
from hf_stable_attn.kernels import flash_bwd, flash_fwd_hopper
from hf_stable_attn.shift_rule import shift_params
from hf_stable_attn.testing import fix_kwargs, launch_kwargs


def draw(batch, s, h, d, seed):
    g = torch.Generator(device="cuda").manual_seed(seed)
    return torch.randn(batch, s, h, d, device="cuda", dtype=torch.bfloat16, generator=g)


def forward_variants(q, k, v, kw, fix):
    """name -> forward call: the Gluon kernel at its table config and at 64-key tiles, and the
    Triton kernel (Gluon routing switched off for this head dim)."""
    d = q.shape[-1]
    m = flash_fwd_hopper
    table = m.HOPPER_CONFIGS[d]

    def run(config, gluon):
        """With ``gluon`` the Gluon kernel at ``config`` from one full tile (whatever ``FASTER``'s
        length rule says), else the Triton kernel."""
        saved = m.HOPPER_CONFIGS[d], m.FASTER
        m.HOPPER_CONFIGS[d] = config
        rest = {key: rows for key, rows in saved[1].items() if key != (d, True)}
        m.FASTER = {**rest, (d, True): (128, 128)} if gluon else rest
        clear_plans()  # a plan keeps the route of the call that made it
        try:
            return flash_attn_fwd(q, k, v, **kw, **fix)
        finally:
            m.HOPPER_CONFIGS[d], m.FASTER = saved
            clear_plans()
    return {f"gluon {table}": lambda: run(table, True),
            f"gluon {(64, *table[1:])}": lambda: run((64, *table[1:]), True),
            "triton": lambda: run(table, False)}


def backward_variants(dout, q, k, v, out, lse, kw):
    """name -> backward call with the dK/dV's group split forced to each divisor of the group."""
    group = q.shape[2] // k.shape[2]

    def run(splits):
        saved = flash_bwd.group_splits
        flash_bwd.group_splits = lambda *args: splits
        try:
            return flash_attn_bwd(dout, q, k, v, out, lse, **kw)
        finally:
            flash_bwd.group_splits = saved
    return {f"splits {n}": (lambda n=n: run(n)) for n in range(1, group + 1) if group % n == 0}


def measure(kind, s, d, causal, rounds):
    batch, hq = 4, (16 if d == 128 else 32)
    hk = hq if kind == "fwd" else hq // 8
    q, k, v, dout = draw(batch, s, hq, d, 1), draw(batch, s, hk, d, 2), draw(batch, s, hk, d, 3), \
        draw(batch, s, hq, d, 4)
    kw = launch_kwargs(s, s, d, causal=causal)
    fix = fix_kwargs(shift_params(torch.bfloat16))
    if kind == "fwd":
        fns, flops = forward_variants(q, k, v, kw, fix), 4 * batch * hq * s * s * d
    else:
        out, lse = flash_attn_fwd(q, k, v, **kw, **fix)
        fns, flops = backward_variants(dout, q, k, v, out, lse, kw), 2.5 * 4 * batch * hq * s * s * d
    flops /= 2 if causal else 1
    return dict(kind=kind, shape=dict(batch=batch, seqlen=s, heads_q=hq, heads_kv=hk,
                                      head_dim=d, causal=causal),
                **rates(fns, rounds, q.device, flops))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--budget-s", type=float, default=300)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    t0 = time.time()
    result = dict(gpu=torch.cuda.get_device_name(), torch=torch.__version__, timings=[])
    plan = [(kind, s, d, causal) for kind in ("fwd", "bwd") for s in (2048, 4096)
            for d in (64, 128) for causal in (True, False)]
    time_within_budget(plan, lambda item: measure(*item, args.rounds), result, args.out,
                       args.budget_s, t0, ("kind", "shape", "tflops"))


if __name__ == "__main__":
    main()

"""The Gluon Hopper forward (``kernels/flash_fwd_hopper.py``) against float64 and the Triton
forward, then timed against it per config (H100/H200).

Run: ``PYTHONPATH=$PWD python gpu/hopper_fwd_check.py --out results.json [--budget-s 400]``.
Correctness: the flash rule (2x the plain-PyTorch error against float64) on odd lengths, GQA,
``Sq != Sk`` both ways (causal rows that see no key), both dtypes, and the Triton forward's lse
on tied rows. Timing: ``do_bench`` medians, the Triton forward (its tuned config) and each
Gluon config, over ``--rounds`` rounds that each start at another variant
(``benchmarks.timing.interleaved_medians``); ``triton_config`` names the tile config the
Triton forward ran with (its tuner's pick in this process: compare it with a sweep's before
trusting the baseline, docs/kernel_notes.md v23a).
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import torch

from gpu.timed_checks import rates, save, time_within_budget
from hf_stable_attn.kernels import LAUNCHES, clear_plans, flash_attn_fwd
from hf_stable_attn.kernels._common import tma_ready
from hf_stable_attn.kernels import flash_fwd_hopper
from hf_stable_attn.kernels.flash_fwd_hopper import flash_attn_fwd_hopper
from hf_stable_attn.shift_rule import shift_params
from hf_stable_attn.testing import (
    attention_oracle, fix_kwargs, launch_kwargs, max_error, near_tie_inputs,
)


def gluon_call(q, k, v, causal, params, config=None):
    """The Gluon forward at ``config``: a ``HOPPER_CONFIGS`` tuple, optionally followed by
    ``persistent`` (1: one program per SM, 0: one per query tile; without it
    ``PERSISTENT_BELOW`` decides)."""
    persistent = bool(config[5]) if config is not None and len(config) == 6 else None
    return flash_attn_fwd_hopper(q, k, v, softmax_scale=q.shape[-1] ** -0.5, causal=causal,
                                 **fix_kwargs(params), config=config and config[:5],
                                 persistent=persistent)


# (BLOCK_N, STAGES, consumer registers, consumers, ping-pong) tried per head dim: the table's,
# then other tiles with the table's ping-pong setting.
CONFIGS = {128: [flash_fwd_hopper.HOPPER_CONFIGS[128], (64, 3, 232, 2, False)],
           64: [flash_fwd_hopper.HOPPER_CONFIGS[64], (128, 2, 232, 2, True),
                (64, 3, 232, 2, True), (128, 3, 232, 2, True)]}


# (batch, Sq, Sk, Hq, Hk, D, dtype, causal) of the correctness checks.
CASES = [(1, 2048, 2048, 4, 4, 64, torch.bfloat16, False),
         (1, 2048, 2048, 4, 4, 128, torch.bfloat16, True),
         (2, 2100, 2100, 8, 1, 128, torch.float16, True),
         (1, 2048, 3000, 2, 2, 64, torch.bfloat16, True),
         (1, 3000, 2048, 2, 2, 128, torch.bfloat16, True),
         (1, 2500, 2171, 4, 2, 64, torch.float16, False),
         (1, 2200, 2200, 2, 2, 64, torch.bfloat16, True)]


def triton_call(q, k, v, causal, params):
    """The shipped Triton forward (the Gluon path turned off for the call)."""
    flash_fwd_hopper.ENABLED = False
    clear_plans()  # a plan keeps the route of the call that made it
    try:
        return _triton_call(q, k, v, causal, params)
    finally:
        flash_fwd_hopper.ENABLED = True
        clear_plans()


def _triton_call(q, k, v, causal, params):
    return flash_attn_fwd(q, k, v, **launch_kwargs(q.shape[1], k.shape[1], q.shape[-1],
                                                   causal=causal), **fix_kwargs(params))


def inputs(batch, sq, sk, hq, hk, d, dtype, seed):
    g = torch.Generator(device="cuda").manual_seed(seed)
    q = torch.randn(batch, sq, hq, d, device="cuda", dtype=dtype, generator=g)
    k = torch.randn(batch, sk, hk, d, device="cuda", dtype=dtype, generator=g)
    v = torch.randn(batch, sk, hk, d, device="cuda", dtype=dtype, generator=g)
    return q, k, v


def check(case, config, stabilize=True):
    batch, sq, sk, hq, hk, d, dtype, causal = case
    q, k, v = inputs(batch, sq, sk, hq, hk, d, dtype, seed=sq * 7 + d)
    assert tma_ready(max(sq, sk), q, k, v)
    params = shift_params(dtype, stabilize=stabilize)
    out, lse = gluon_call(q, k, v, causal, params, config)
    ref_out, ref_lse = triton_call(q, k, v, causal, params)
    kw = launch_kwargs(sq, sk, d, causal=causal)
    exact = attention_oracle(q, k, v, **kw)
    plain = attention_oracle(q, k, v, **kw, compute_dtype=dtype)
    err, base = max_error(out, exact), max_error(plain, exact)
    finite = torch.isfinite(ref_lse)
    return dict(case=str(case), config=config, stabilize=stabilize, err=err, plain_err=base,
                ok=bool(err <= 2 * base + 1e-5 and not torch.isnan(out).any()
                        and torch.equal(finite, torch.isfinite(lse))),
                lse_vs_triton=max_error(lse[finite], ref_lse[finite]),
                out_vs_triton=max_error(out, ref_out))


def tied_check(config, d):
    """Rows whose top two scores lie in different key tiles, some inside the tie window (the
    GPU suite's construction): the Gluon forward's lse and output against the Triton one's."""
    q, k, v = (t.cuda() for t in near_tie_inputs(d, 512, 4096, seed=d))
    params = shift_params(q.dtype)
    out, lse = gluon_call(q, k, v, False, params, config)
    ref_out, ref_lse = triton_call(q, k, v, False, params)
    return dict(case=f"tied d{d}", config=config, lse_vs_triton=max_error(lse, ref_lse),
                out_vs_triton=max_error(out, ref_out), out_equal=bool(torch.equal(out, ref_out)))


def timing(shape, configs, rounds):
    batch, s, hq, hk, d, causal, stabilize = shape
    q, k, v = inputs(batch, s, s, hq, hk, d, torch.bfloat16, seed=1)
    params = shift_params(torch.bfloat16, stabilize=stabilize)
    fns = {"triton": lambda: triton_call(q, k, v, causal, params)}
    for c in configs:
        fns[str(c)] = (lambda c=c: gluon_call(q, k, v, causal, params, c))
    return timed_record(shape, fns, rounds, q.device)


def shape_rates(shape, fns, rounds, device) -> dict:
    """``rates`` of forwards ``fns`` on ``shape`` = (batch, seqlen, Hq, Hkv, D, causal,
    stabilize), with the shape named."""
    batch, s, hq, hk, d, causal, stabilize = shape
    timed = rates(fns, rounds, device, 4 * batch * hq * s * s * d / (2 if causal else 1))
    return dict(shape=dict(batch=batch, seqlen=s, heads_q=hq, heads_kv=hk, head_dim=d,
                           causal=causal, stabilize=stabilize), **timed)


def timed_record(shape, fns, rounds, device) -> dict:
    """``shape_rates`` of ``fns`` (one of them ``triton_call``) with ``triton_config``, the tile
    config the Triton forward ran."""
    record = shape_rates(shape, fns, rounds, device)
    return dict(shape=record.pop("shape"), triton_config=list(LAUNCHES["fwd"].last), **record)


def shape_grid(seqlens, head_dims, masks=(False, True), groups=(1, 8)) -> list[tuple]:
    """(batch, S, Hq, Hkv, D, causal, stabilize), 16384 tokens a batch, 16 query heads at D128
    and 32 at D64: ``groups`` query heads per KV head (MHA and GQA 8:1), causal as ``masks``
    lists, the fix on and off."""
    shapes = []
    for s in seqlens:
        for d in head_dims:
            h = 16 if d == 128 else 32
            for group in groups:
                for causal in masks:
                    for stabilize in (True, False):
                        shapes.append((16384 // s, s, h, h // group, d, causal, stabilize))
    return shapes


def timing_shapes(seqlens, head_dims, wanted=None) -> list[tuple]:
    """``shape_grid``'s shapes to time: every MHA shape and GQA 8:1 without a mask with the fix,
    or those ``wanted`` names as ``D:causal:fix`` (MHA) or ``D:causal:fix:group`` (``group``
    query heads per KV head)."""
    if not wanted:
        return [sh for sh in shape_grid(seqlens, head_dims)
                if sh[2] == sh[3] or (not sh[5] and sh[6])]
    keys = {tuple(map(int, text.split(":"))) for text in wanted}
    keys = {key if len(key) == 4 else (*key, 1) for key in keys}
    shapes = shape_grid(seqlens, head_dims, groups=sorted({key[3] for key in keys}))
    return [sh for sh in shapes if (sh[4], int(sh[5]), int(sh[6]), sh[2] // sh[3]) in keys]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--budget-s", type=float, default=400)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--head-dims", type=int, nargs="+", default=[128, 64])
    ap.add_argument("--timing-only", action="store_true")
    ap.add_argument("--shapes", nargs="+", default=None,
                    help="timing shapes as D:causal:fix[:group], e.g. 128:1:1 or 64:1:1:8 "
                         "(default: every MHA shape, GQA 8:1 without a mask with the fix)")
    ap.add_argument("--configs", nargs="+", default=None,
                    help="Gluon configs as D:BLOCK_N:STAGES:REGS:CONSUMERS:PINGPONG, then "
                         "optionally :PERSISTENT (1 or 0; without it PERSISTENT_BELOW decides; "
                         "default: CONFIGS)")
    ap.add_argument("--seqlens", type=int, nargs="+", default=[4096],
                    help="timing lengths (16384 tokens per batch)")
    args = ap.parse_args()
    t0 = time.time()
    result = dict(gpu=torch.cuda.get_device_name(), torch=torch.__version__, checks=[],
                  timings=[])

    if args.configs:
        CONFIGS.clear()
        for text in args.configs:
            d, *config = map(int, text.split(":"))
            CONFIGS.setdefault(d, []).append(tuple(config))
    for d in ([] if args.timing_only else args.head_dims):
        for config in CONFIGS[d]:
            for case in CASES:
                if case[5] != d:
                    continue
                for stabilize in (True, False):
                    r = check(case, config, stabilize)
                    result["checks"].append(r)
                    print(json.dumps(r), flush=True)
            r = tied_check(config, d)
            result["checks"].append(r)
            print(json.dumps(r), flush=True)
    save(result, args.out)
    shapes = timing_shapes(args.seqlens, args.head_dims, args.shapes)
    time_within_budget(shapes, lambda shape: timing(shape, CONFIGS[shape[4]], args.rounds),
                       result, args.out, args.budget_s, t0,
                       ("shape", "triton_config", "tflops"))
    sys.exit(0 if all(c.get("ok", True) for c in result["checks"]) else 1)


if __name__ == "__main__":
    main()

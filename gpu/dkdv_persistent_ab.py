"""The Gluon dK/dV kernel (``kernels/flash_bwd_hopper.py``) against an older copy of that file
(``--base``), bit for bit and timed, the package's kernel both with one program per work item
and on a persistent grid (one program per SM), the latter also with 248 registers per consumer
thread instead of the table's (H100/H200).

Run: ``PYTHONPATH=$PWD python gpu/dkdv_persistent_ab.py --base old_flash_bwd_hopper.py
--out r.json`` (``git show REV:kernels/flash_bwd_hopper.py > old_flash_bwd_hopper.py``).
Every variant gets the same inputs: q, k, v, dO (B, S, H, D) random, the forward's lse, delta =
rowsum(dO * O), and ``flash_bwd``'s group split. Checks: dK and dV of the three variants equal
(``torch.equal``); timing: ``interleaved_medians`` of the kernel alone, 16384 tokens per batch.
"""

from __future__ import annotations

import argparse
import time

import torch

from gpu.hopper_fwd_ab import load_base
from gpu.timed_checks import rates, save, time_within_budget
from hf_stable_attn.kernels import flash_attn_fwd, flash_bwd, flash_bwd_hopper
from hf_stable_attn.kernels._common import ceil_div, tma_ready
from hf_stable_attn.shift_rule import shift_params
from hf_stable_attn.testing import fix_kwargs, launch_kwargs

TOKENS, HIDDEN = 16384, 2048


def problem(seqlen, d, group, causal, dtype=torch.bfloat16, tokens=TOKENS, seed=0):
    """The dK/dV kernel's inputs and the group split ``flash_bwd`` would pick."""
    torch.manual_seed(seed)
    batch, hq = tokens // seqlen, HIDDEN // d
    hk = hq // group
    q, dout = (torch.randn(batch, seqlen, hq, d, device="cuda", dtype=dtype) for _ in range(2))
    k, v = (torch.randn(batch, seqlen, hk, d, device="cuda", dtype=dtype) for _ in range(2))
    assert tma_ready(seqlen, q, k, v, dout)
    out, lse = flash_attn_fwd(q, k, v, **launch_kwargs(seqlen, seqlen, d, causal=causal),
                              **fix_kwargs(shift_params(dtype)))
    delta = (dout.float() * out.float()).sum(-1).transpose(1, 2).contiguous()
    m = flash_bwd_hopper
    splits = flash_bwd.group_splits(ceil_div(seqlen, m.BLOCK_N) * batch * hk, group,
                                    flash_bwd.sm_count(q.device), m.PROGRAMS_PER_SM[causal],
                                    m.MOST_SPLITS)
    return q, k, v, dout, lse, delta, splits


def variants(base, q, k, v, dout, lse, delta, splits, causal):
    """name -> call returning (dk_out, dv_out)."""
    shape = (splits, *k.shape)
    dtype = torch.float32 if splits > 1 else k.dtype
    sms = flash_bwd.sm_count(q.device)

    def run(module, **kw):
        def call():
            dk, dv = (torch.empty(shape, device=k.device, dtype=dtype) for _ in range(2))
            module.dkdv_hopper(q, k, v, dout, lse, delta, dk, dv,
                               softmax_scale=q.shape[-1] ** -0.5, causal=causal, **kw)
            return dk, dv
        return call

    stages, _, tile_m = flash_bwd_hopper.HOPPER_CONFIGS[q.shape[-1]]
    return {"base": run(base), "per_item": run(flash_bwd_hopper, programs=None),
            "persistent": run(flash_bwd_hopper, programs=sms),
            "persistent_248": run(flash_bwd_hopper, programs=sms, config=(stages, 248, tile_m))}


def measure(base, rounds, shape):
    seqlen, d, group, causal = shape
    q, k, v, dout, lse, delta, splits = problem(seqlen, d, group, causal)
    calls = variants(base, q, k, v, dout, lse, delta, splits, causal)
    ref = calls["base"]()
    equal = {n: all(torch.equal(a, b) for a, b in zip(fn(), ref)) for n, fn in calls.items()}
    flops = 2.0 * 4 * q.shape[0] * q.shape[2] * seqlen * seqlen * d / (2 if causal else 1)
    record = dict(seqlen=seqlen, head_dim=d, group=group, causal=causal, splits=splits,
                  equal=equal, **rates(calls, rounds, q.device, flops))
    record["vs_base"] = {n: record["ms"]["base"] / ms for n, ms in record["ms"].items()}
    return record


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--seqlens", nargs="+", type=int, default=[2048, 4096, 8192])
    ap.add_argument("--head-dims", nargs="+", type=int, default=[64, 128])
    ap.add_argument("--causal", nargs="+", type=int, default=[0, 1])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--budget-s", type=float, default=400.0)
    args = ap.parse_args()
    base = load_base(args.base)
    start = time.time()
    result = dict(gpu=torch.cuda.get_device_name(), torch=torch.__version__, timings=[])
    shapes = [(s, d, g, bool(c)) for s in args.seqlens for d in args.head_dims
              for c in args.causal for g in (1, 8)]
    time_within_budget(shapes, lambda s: measure(base, args.rounds, s), result, args.out,
                       args.budget_s, start, ("seqlen", "head_dim", "group", "causal", "splits",
                                              "equal", "vs_base"))
    save(result, args.out)


if __name__ == "__main__":
    main()

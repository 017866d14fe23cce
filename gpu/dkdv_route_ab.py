"""The whole backward (``flash_attn_bwd``: dQ, then dK/dV) with each dK/dV route, same process
(H100/H200): the Triton dK/dV, the Gluon one of an older ``flash_bwd_hopper.py`` (``--base``),
and the package's Gluon one with one program per work item and on a persistent grid.

Run: ``PYTHONPATH=$PWD python gpu/dkdv_route_ab.py --base old_flash_bwd_hopper.py --out r.json``.
Shapes: bf16, 16384 tokens, hidden 2048, MHA and GQA 8:1; the Triton kernels autotune on their
first call. Recorded beside the timings: each route's largest difference from the Triton
route's dQ, dK and dV (accuracy against float64 is the GPU suite's job).
"""

from __future__ import annotations

import argparse
import contextlib
import time
import types

import torch

from gpu.hopper_fwd_ab import load_base
from gpu.timed_checks import rates, save, time_within_budget
from hf_stable_attn.kernels import flash_attn_bwd, flash_attn_fwd, flash_bwd, flash_bwd_hopper
from hf_stable_attn.shift_rule import shift_params
from hf_stable_attn.testing import fix_kwargs, launch_kwargs

TOKENS, HIDDEN = 16384, 2048


def base_shim(base):
    """``base`` as ``flash_bwd`` calls the package's module (its ``dkdv_hopper`` takes and drops
    ``programs``); the dQ side is the package's."""
    def dkdv_hopper(*args, programs=None, **kw):
        return base.dkdv_hopper(*args, **kw)
    return types.SimpleNamespace(
        routes=base.routes, dkdv_hopper=dkdv_hopper, tile_record=base.tile_record,
        dq_hopper=flash_bwd_hopper.dq_hopper, dq_tile_record=flash_bwd_hopper.dq_tile_record,
        BLOCK_N=base.BLOCK_N, PROGRAMS_PER_SM=base.PROGRAMS_PER_SM, MOST_SPLITS=base.MOST_SPLITS,
        PERSISTENT={False: False, True: False}, FASTER=base.FASTER)


@contextlib.contextmanager
def route(module, pair, gluon, persistent=False):
    """``flash_bwd`` with ``module`` as its Hopper module, the (head dim, causal) ``pair`` on
    the Gluon dK/dV or not, and the persistent grid or not."""
    saved = flash_bwd.flash_bwd_hopper, set(module.FASTER), dict(module.PERSISTENT)
    flash_bwd.flash_bwd_hopper = module
    module.FASTER.discard(pair)
    if gluon:
        module.FASTER.add(pair)
    module.PERSISTENT[pair[1]] = persistent
    try:
        yield
    finally:
        flash_bwd.flash_bwd_hopper = saved[0]
        module.FASTER.clear()
        module.FASTER.update(saved[1])
        module.PERSISTENT.update(saved[2])


def measure(base, rounds, shape):
    seqlen, d, group, causal = shape
    batch, hq = TOKENS // seqlen, HIDDEN // d
    torch.manual_seed(seqlen + d + group)
    q, dout = (torch.randn(batch, seqlen, hq, d, device="cuda", dtype=torch.bfloat16)
               for _ in range(2))
    k, v = (torch.randn(batch, seqlen, hq // group, d, device="cuda", dtype=torch.bfloat16)
            for _ in range(2))
    kw = launch_kwargs(seqlen, seqlen, d, causal=causal)
    out, lse = flash_attn_fwd(q, k, v, **kw, **fix_kwargs(shift_params(torch.bfloat16)))
    pair = (d, causal)
    shim = base_shim(base)
    routes = {"triton": (flash_bwd_hopper, False, False), "gluon_base": (shim, True, False),
              "gluon_per_item": (flash_bwd_hopper, True, False),
              "gluon_persistent": (flash_bwd_hopper, True, True)}

    def call(name):
        def run():
            with route(pair=pair, **dict(zip(("module", "gluon", "persistent"), routes[name]))):
                return flash_attn_bwd(dout, q, k, v, out, lse, **kw)
        return run

    calls = {name: call(name) for name in routes}
    ref = calls["triton"]()
    diff = {n: max(float((a.float() - b.float()).abs().max()) for a, b in zip(fn(), ref))
            for n, fn in calls.items()}
    flops = 2.5 * 4 * batch * hq * seqlen * seqlen * d / (2 if causal else 1)
    record = dict(seqlen=seqlen, head_dim=d, group=group, causal=causal, max_abs_diff=diff,
                  **rates(calls, rounds, q.device, flops))
    record["vs_triton"] = {n: record["ms"]["triton"] / ms for n, ms in record["ms"].items()}
    record["vs_base"] = {n: record["ms"]["gluon_base"] / ms for n, ms in record["ms"].items()}
    return record


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--shapes", nargs="+", default=["2048:64:1:1", "2048:64:8:1", "4096:64:1:1",
                                                    "4096:64:8:1", "8192:64:1:1", "8192:64:8:1"],
                    help="S:D:group:causal")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--budget-s", type=float, default=300.0)
    args = ap.parse_args()
    base = load_base(args.base)
    start = time.time()
    result = dict(gpu=torch.cuda.get_device_name(), torch=torch.__version__, timings=[])
    shapes = [tuple(int(x) for x in s.split(":")) for s in args.shapes]
    shapes = [(s, d, g, bool(c)) for s, d, g, c in shapes]
    time_within_budget(shapes, lambda s: measure(base, args.rounds, s), result, args.out,
                       args.budget_s, start, ("seqlen", "head_dim", "group", "causal",
                                              "vs_triton", "vs_base"))
    save(result, args.out)


if __name__ == "__main__":
    main()

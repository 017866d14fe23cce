"""Several copies of the Gluon Hopper forward (``kernels/flash_fwd_hopper.py``) in one process:
each against the first, bit for bit, then all timed together on the same inputs (H100/H200).

Run: ``PYTHONPATH=$PWD python gpu/hopper_fwd_variants.py --variant base=old.py --variant
a=kernels/flash_fwd_hopper.py --out r.json`` (``git show REV:kernels/flash_fwd_hopper.py >
old.py`` makes a copy). Checks: ``hopper_fwd_ab``'s (random inputs with odd lengths, GQA,
``Sq != Sk``, both dtypes, the fix on and off; rows tied across key tiles; an attention sink),
output and lse ``torch.equal`` to the first variant's. Timing: ``interleaved_medians`` of every
variant at its own ``HOPPER_CONFIGS`` entry, one program per query tile, 16384 tokens a batch,
random inputs or (``--inputs sink``) a sink at key 0; the shapes of ``shape_grid``, or with
``--fix-only`` only those with the fix on (fix-off launches are controls where a change
touches only the fix's code). Unlike ``hopper_fwd_ab`` no Triton forward or persistent launch
is timed, so a budget covers more shapes.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import torch

from gpu.hopper_fwd_ab import LONG_CASE, call, load_base, sink_inputs
from gpu.hopper_fwd_check import CASES, inputs, shape_grid
from gpu.timed_checks import rates, save, time_within_budget
from hf_stable_attn.shift_rule import shift_params
from hf_stable_attn.testing import near_tie_inputs


def load_variants(specs: list[str]) -> dict:
    """``name=path`` specs as modules (``hopper_fwd_ab.load_base`` under a name each)."""
    modules = {}
    for spec in specs:
        name, path = spec.split("=", 1)
        modules[name] = load_base(path, f"hf_stable_attn.kernels.flash_fwd_hopper_{name}")
    return modules


def check_inputs():
    """``(label, q, k, v, causal, params)`` of ``hopper_fwd_ab.checks``' cases."""
    for batch, sq, sk, hq, hk, d, dtype, causal in CASES[:-1] + [LONG_CASE]:
        q, k, v = inputs(batch, sq, sk, hq, hk, d, dtype, seed=sq * 7 + d)
        for stabilize in (True, False):
            yield (str((batch, sq, sk, hq, hk, d, dtype)), q, k, v, causal,
                   shift_params(dtype, stabilize=stabilize))
    for d in (64, 128):
        q, k, v = (t.cuda() for t in near_tie_inputs(d, 512, 4096, seed=d))
        yield f"tied d{d}", q, k, v, False, shift_params(q.dtype)
    for hk in (32, 4):
        q, k, v = sink_inputs(1, 4096, 4096, 32, hk, 64, torch.bfloat16, seed=hk)
        for causal in (False, True):
            yield f"sink d64 32/{hk}", q, k, v, causal, shift_params(q.dtype)


def checks(modules: dict) -> list[dict]:
    """Every variant's output and lse against the first variant's, bit for bit."""
    names = list(modules)
    out = []
    for label, q, k, v, causal, params in check_inputs():
        ref_out, ref_lse = call(modules[names[0]], q, k, v, causal, params)
        equal = {}
        for name in names[1:]:
            o, lse = call(modules[name], q, k, v, causal, params)
            equal[name] = bool(torch.equal(o, ref_out) and torch.equal(lse, ref_lse)
                               and not torch.isnan(o).any())
        out.append(dict(case=label, causal=causal, stabilize=params.stabilize, equal=equal,
                        ok=all(equal.values())))
    return out


def timing(modules: dict, shape, rounds: int, make_inputs) -> dict:
    batch, s, hq, hk, d, causal, stabilize = shape
    q, k, v = make_inputs(batch, s, s, hq, hk, d, torch.bfloat16, seed=1)
    params = shift_params(torch.bfloat16, stabilize=stabilize)
    fns = {name: (lambda m=m: call(m, q, k, v, causal, params, persistent=False))
           for name, m in modules.items()}
    timed = rates(fns, rounds, q.device, 4 * batch * hq * s * s * d / (2 if causal else 1))
    return dict(shape=dict(batch=batch, seqlen=s, heads_q=hq, heads_kv=hk, head_dim=d,
                           causal=causal, stabilize=stabilize), **timed)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--variant", action="append", required=True,
                    help="name=path of a flash_fwd_hopper.py copy; the first is the reference")
    ap.add_argument("--out", required=True)
    ap.add_argument("--budget-s", type=float, default=300)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--head-dims", type=int, nargs="+", default=[64, 128])
    ap.add_argument("--seqlens", type=int, nargs="+", default=[4096, 8192, 2048])
    ap.add_argument("--causal", choices=("both", "true", "false"), default="both")
    ap.add_argument("--inputs", choices=("random", "sink"), default="random")
    ap.add_argument("--fix-only", action="store_true")
    ap.add_argument("--no-checks", action="store_true")
    args = ap.parse_args()
    t0 = time.time()
    modules = load_variants(args.variant)
    result = dict(gpu=torch.cuda.get_device_name(), torch=torch.__version__,
                  variants=args.variant, inputs=args.inputs, timings=[],
                  checks=[] if args.no_checks else checks(modules))
    for c in result["checks"]:
        print(json.dumps(c), flush=True)
    save(result, args.out)
    masks = {"both": (False, True), "true": (True,), "false": (False,)}[args.causal]
    shapes = [s for s in shape_grid(args.seqlens, args.head_dims, masks)
              if s[-1] or not args.fix_only]
    make_inputs = sink_inputs if args.inputs == "sink" else inputs
    time_within_budget(shapes, lambda shape: timing(modules, shape, args.rounds, make_inputs),
                       result, args.out, args.budget_s, t0, ("shape", "tflops"))
    sys.exit(0 if all(c["ok"] for c in result["checks"]) else 1)


if __name__ == "__main__":
    main()

"""Several copies of the Gluon Hopper forward (``kernels/flash_fwd_hopper.py``) in one process:
each against the first, bit for bit, then all timed together on the same inputs (H100/H200).

Run: ``PYTHONPATH=$PWD python gpu/hopper_fwd_variants.py --variant base=old.py --variant
a=kernels/flash_fwd_hopper.py --out r.json`` (``git show REV:kernels/flash_fwd_hopper.py >
old.py`` makes a copy). Checks: ``hopper_fwd_ab.check_inputs``' cases, output and lse
``torch.equal`` to the first variant's. Timing: ``interleaved_medians`` of every
variant at its own ``HOPPER_CONFIGS`` entry, one program per query tile (``--launch shipped``:
persistent where ``PERSISTENT_BELOW`` says), 16384 tokens a batch,
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

from gpu.hopper_fwd_ab import (add_timing_args, call, check_inputs, load_base, same_result,
                               sink_inputs)
from gpu.hopper_fwd_check import inputs, shape_grid, shape_rates
from gpu.timed_checks import save, time_within_budget
from hf_stable_attn.shift_rule import shift_params


def load_variants(specs: list[str]) -> dict:
    """``name=path`` specs as modules (``hopper_fwd_ab.load_base`` under a name each)."""
    modules = {}
    for spec in specs:
        name, path = spec.split("=", 1)
        modules[name] = load_base(path, f"hf_stable_attn.kernels.flash_fwd_hopper_{name}")
    return modules


def checks(modules: dict) -> list[dict]:
    """Every variant's output and lse against the first variant's, bit for bit."""
    names = list(modules)
    out = []
    for label, q, k, v, causal, params in check_inputs():
        reference = call(modules[names[0]], q, k, v, causal, params)
        equal = {name: same_result(call(modules[name], q, k, v, causal, params), reference)
                 for name in names[1:]}
        out.append(dict(case=label, causal=causal, stabilize=params.stabilize, equal=equal,
                        ok=all(equal.values())))
    return out


def timing(modules: dict, shape, rounds: int, make_inputs, persistent) -> dict:
    """``shape``'s TFLOP/s for every variant; ``persistent`` False (one program per tile) or
    None (the variant's ``PERSISTENT_BELOW``)."""
    batch, s, hq, hk, d, causal, stabilize = shape
    q, k, v = make_inputs(batch, s, s, hq, hk, d, torch.bfloat16, seed=1)
    params = shift_params(torch.bfloat16, stabilize=stabilize)
    fns = {name: (lambda m=m: call(m, q, k, v, causal, params, persistent=persistent))
           for name, m in modules.items()}
    return shape_rates(shape, fns, rounds, q.device)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--variant", action="append", required=True,
                    help="name=path of a flash_fwd_hopper.py copy; the first is the reference")
    add_timing_args(ap)
    ap.add_argument("--fix-only", action="store_true")
    ap.add_argument("--no-checks", action="store_true")
    ap.add_argument("--launch", choices=("tile", "shipped"), default="tile",
                    help="one program per query tile, or the shipped persistent rule")
    args = ap.parse_args()
    t0 = time.time()
    modules = load_variants(args.variant)
    result = dict(gpu=torch.cuda.get_device_name(), torch=torch.__version__,
                  variants=args.variant, inputs=args.inputs, launch=args.launch, timings=[],
                  checks=[] if args.no_checks else checks(modules))
    for c in result["checks"]:
        print(json.dumps(c), flush=True)
    save(result, args.out)
    masks = {"both": (False, True), "true": (True,), "false": (False,)}[args.causal]
    shapes = [s for s in shape_grid(args.seqlens, args.head_dims, masks)
              if s[-1] or not args.fix_only]
    make_inputs = sink_inputs if args.inputs == "sink" else inputs
    persistent = False if args.launch == "tile" else None
    time_within_budget(shapes, lambda shape: timing(modules, shape, args.rounds, make_inputs,
                                                    persistent),
                       result, args.out, args.budget_s, t0, ("shape", "tflops"))
    sys.exit(0 if all(c["ok"] for c in result["checks"]) else 1)


if __name__ == "__main__":
    main()

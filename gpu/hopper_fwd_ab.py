"""Two versions of the Gluon Hopper forward in one process: the package's
``kernels/flash_fwd_hopper.py`` against an older copy of that file (``--base``), bit for bit
and timed, beside the Triton forward (H100/H200).

Run: ``PYTHONPATH=$PWD python gpu/hopper_fwd_ab.py --base old_flash_fwd_hopper.py --out r.json``
(``git show REV:kernels/flash_fwd_hopper.py > old_flash_fwd_hopper.py`` makes the base).
The package's version runs with one program per query tile (``new``) and persistent
(``new_persistent``, one program per SM). Checks: output and lse of both versions equal
(``torch.equal``) on random inputs (odd lengths, GQA, ``Sq != Sk``, both dtypes, fix on and
off), on rows tied across key tiles and with an attention sink (``sink_inputs``). Timing: as
``hopper_fwd_check``'s (``interleaved_medians``, 16384 tokens per batch), each version at its
own ``HOPPER_CONFIGS`` entry, on random inputs or (``--inputs sink``) with a sink, the shapes
with and without a causal mask or (``--causal``) one of them; ``triton_config`` names the tile
config the Triton forward ran. ``--no-checks`` times only.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import time

import torch

from gpu.hopper_fwd_check import CASES, inputs, shape_grid, timed_record, triton_call
from gpu.timed_checks import save, time_within_budget
from hf_stable_attn.kernels import flash_fwd_hopper
from hf_stable_attn.kernels._common import tma_ready
from hf_stable_attn.shift_rule import shift_params
from hf_stable_attn.testing import fix_kwargs, near_tie_inputs


def load_base(path: str, name: str = "hf_stable_attn.kernels.flash_fwd_hopper_base"):
    """The file at ``path`` as module ``name`` (its relative imports resolve in the package)."""
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def call(module, q, k, v, causal, params, **launch):
    """``module``'s Gluon forward (``tma_ready`` first: it sets Triton's scratch allocator);
    ``launch``: keywords only the package's version takes (``persistent``)."""
    assert tma_ready(max(q.shape[1], k.shape[1]), q, k, v)
    return module.flash_attn_fwd_hopper(q, k, v, softmax_scale=q.shape[-1] ** -0.5,
                                        causal=causal, **fix_kwargs(params), **launch)


def same_result(result, reference) -> bool:
    """``(out, lse)`` bit-identical to ``reference``'s, and out free of NaN."""
    (out, lse), (ref_out, ref_lse) = result, reference
    return bool(torch.equal(out, ref_out) and torch.equal(lse, ref_lse)
                and not torch.isnan(out).any())


def equal_check(base, label, q, k, v, causal, params):
    """The package's forward, with one program per query tile and persistent, against the
    base's, bit for bit."""
    reference = call(base, q, k, v, causal, params)
    ok = {persistent: same_result(call(flash_fwd_hopper, q, k, v, causal, params,
                                       persistent=persistent), reference)
          for persistent in (False, True)}
    return dict(case=label, causal=causal, stabilize=params.stabilize, ok=all(ok.values()),
                ok_persistent=ok[True], ok_per_tile=ok[False])


# The last of hopper_fwd_check's cases swapped for one that runs 64 key tiles per row.
LONG_CASE = (1, 8192, 8192, 2, 2, 64, torch.bfloat16, True)


def sink_inputs(batch, sq, sk, hq, hk, d, dtype, seed):
    """``inputs`` with an attention sink: every query gets a shared direction ``a`` and key 0 is
    ``a``, so key 0 scores about 8 above the mean (others spread with std about 1.4) and most
    rows' maximum sits in the first key tile, as in trained models' attention."""
    q, k, v = inputs(batch, sq, sk, hq, hk, d, dtype, seed)
    a = torch.randn(d, device=q.device, generator=torch.Generator(device="cuda").manual_seed(seed))
    q = (q.float() + a).to(dtype)
    k[:, 0] = a.to(dtype)
    return q, k, v


def check_inputs():
    """``(label, q, k, v, causal, params)`` of the bit-for-bit checks: random inputs (odd
    lengths, GQA, ``Sq != Sk``, both dtypes, the fix on and off), rows tied across key tiles,
    and an attention sink."""
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


def checks(base) -> list[dict]:
    return [equal_check(base, *case) for case in check_inputs()]


def timing(base, shape, rounds, make_inputs=inputs):
    batch, s, hq, hk, d, causal, stabilize = shape
    q, k, v = make_inputs(batch, s, s, hq, hk, d, torch.bfloat16, seed=1)
    params = shift_params(torch.bfloat16, stabilize=stabilize)
    fns = {"triton": lambda: triton_call(q, k, v, causal, params),
           "base": lambda: call(base, q, k, v, causal, params),
           "new": lambda: call(flash_fwd_hopper, q, k, v, causal, params, persistent=False),
           "new_persistent": lambda: call(flash_fwd_hopper, q, k, v, causal, params,
                                          persistent=True)}
    return timed_record(shape, fns, rounds, q.device)


def add_timing_args(ap: argparse.ArgumentParser) -> None:
    """The output, budget and timed shapes' options (shared with ``hopper_fwd_variants``)."""
    ap.add_argument("--out", required=True)
    ap.add_argument("--budget-s", type=float, default=300)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--head-dims", type=int, nargs="+", default=[64, 128])
    ap.add_argument("--seqlens", type=int, nargs="+", default=[4096, 8192, 2048])
    ap.add_argument("--causal", choices=("both", "true", "false"), default="both")
    ap.add_argument("--inputs", choices=("random", "sink"), default="random",
                    help="timing inputs: random normal, or with an attention sink at key 0")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--base", required=True, help="an older kernels/flash_fwd_hopper.py")
    ap.add_argument("--no-checks", action="store_true",
                    help="time only (an earlier run on the same sources made the checks)")
    add_timing_args(ap)
    args = ap.parse_args()
    t0 = time.time()
    base = load_base(args.base)
    result = dict(gpu=torch.cuda.get_device_name(), torch=torch.__version__,
                  checks=[] if args.no_checks else checks(base), timings=[])
    for c in result["checks"]:
        print(json.dumps(c), flush=True)
    save(result, args.out)
    masks = {"both": (False, True), "true": (True,), "false": (False,)}[args.causal]
    shapes = shape_grid(args.seqlens, args.head_dims, masks)
    make_inputs = sink_inputs if args.inputs == "sink" else inputs
    result["inputs"] = args.inputs
    time_within_budget(shapes, lambda shape: timing(base, shape, args.rounds, make_inputs),
                       result, args.out, args.budget_s, t0, ("shape", "triton_config", "tflops"))
    sys.exit(0 if all(c["ok"] for c in result["checks"]) else 1)


if __name__ == "__main__":
    main()

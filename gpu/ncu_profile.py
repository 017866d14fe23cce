"""One attention implementation's forward + backward on one shape, for Nsight Compute.

``gpu/ncu_profile.sh`` runs this once per implementation under ``ncu`` (after a warm process
has tuned and compiled our kernels, so the profiled process launches only the picks), to read
the hardware counters of each attention kernel: issue slots, pipes, warp stalls, occupancy.
Shapes as ``benchmarks/tune_kernel.py``'s (bf16, 16k tokens, hidden 2048).

Run: ``PYTHONPATH=$PWD python3 -m gpu.ncu_profile --impl stable_flash --case 64:1:1
--seqlen 2048 --steps 1`` (GPU only). ``--config fwd=64,64,4,2,True`` makes that tile config
the only entry of a Triton kernel's table at the case's head dim (``kernels.LAUNCHES``);
``--gluon-fwd-from ROWS`` routes the forward at that head dim to the Gluon kernel from ROWS query
rows, causal or not (``flash_fwd_hopper.FASTER``).
"""

from __future__ import annotations

import argparse
import ast

import torch

# Before benchmarks.tune_kernel, which sets HF_STABLE_ATTN_AUTOTUNE=0 for a package imported later.
from hf_stable_attn.kernels import LAUNCHES, flash_fwd_hopper
from benchmarks.bench_attention import candidates
from benchmarks.tune_kernel import default_shapes, make_inputs, parse_case

IMPLS = ("stable_flash", "stable_flash_nofix", "sdpa_cudnn", "sdpa_flash")


def step_fn(impl: str, shape, q, k, v, dout):
    """A closure running ``impl``'s forward + backward on ``q, k, v`` (B, S, H, D) the way the
    sweeps run it: ``benchmarks.bench_attention.candidates``' first way (SDPA at GQA through
    ``enable_gqa``, which both backends took in session 68's sweeps)."""
    _, attend = next(candidates(impl, shape, q.device))

    def step():
        attend(q, k, v).backward(dout)
    return step


def tiles_run(impl: str) -> dict:
    """Part -> the tile config our kernels last launched with (``TiledLaunch.last``) after
    ``impl`` ran, if ``impl`` is one of ours; empty for a peer."""
    if not impl.startswith("stable_flash"):
        return {}
    return {part: launch.last for part, launch in LAUNCHES.items() if launch.last is not None}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--impl", choices=(*IMPLS, "all"), default="all")
    ap.add_argument("--case", default="64:1:1", help="D:causal:group")
    ap.add_argument("--seqlen", type=int, default=2048)
    ap.add_argument("--steps", type=int, default=1)
    ap.add_argument("--config", action="append", default=[], help="PART=BLOCK_M,BLOCK_N,...")
    ap.add_argument("--gluon-fwd-from", type=int, help="query rows")
    args = ap.parse_args()
    (shape,) = default_shapes(16384, 2048, seqlen=args.seqlen, cases=[parse_case(args.case)])
    for item in args.config:
        part, fields = item.split("=")
        LAUNCHES[part].table[shape.head_dim] = [tuple(map(ast.literal_eval, fields.split(",")))]
    if args.gluon_fwd_from is not None:
        for key in [key for key in flash_fwd_hopper.FASTER if key[0] == shape.head_dim]:
            flash_fwd_hopper.FASTER[key] = (args.gluon_fwd_from, args.gluon_fwd_from)
    q, k, v, dout = make_inputs(shape)
    for t in (q, k, v):
        t.requires_grad_()
    for impl in IMPLS if args.impl == "all" else (args.impl,):
        step = step_fn(impl, shape, q, k, v, dout)
        for _ in range(args.steps):
            for t in (q, k, v):
                t.grad = None
            step()
        torch.cuda.synchronize()
        print(impl, shape, "ran", args.steps, "steps; Triton tiles", tiles_run(impl), flush=True)


if __name__ == "__main__":
    main()

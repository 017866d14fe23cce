"""What the packed calls' value checks (``ops.validate_packing``) cost on a GPU (GPU only).

The check reads ``cu_seqlens`` (and tensor ``max_seqlen``s) from the device once per call. With
tensor lengths (Transformers' packed path) that read replaces the ``int(max_seqlen)`` the
launchers would make anyway; with int lengths it is a synchronization of its own, which stops the
host from running ahead of the GPU. Per setting (checks on or off, ``HF_STABLE_ATTN_CHECK_PACKING``;
``max_seqlen`` int or 0-d tensor) this times iterations of a matrix product (the rest of a layer,
``--matmul`` wide, 0 for none) followed by one packed forward (``flash_attn_varlen_func``, bf16,
causal), with nothing synchronizing but the check: median ms per iteration over ``--reps`` runs of
``--iters`` iterations (``--matmul 0``: the attention calls alone).

Run: ``PYTHONPATH=$PWD python gpu/packing_check_cost.py --out cost.json``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch

import hf_stable_attn
from hf_stable_attn import ops


def packed_inputs(lengths, heads, head_dim, device):
    """q, k, v (T, H, D) bf16 and int32 cu_seqlens (N + 1,) for sequences of ``lengths``."""
    total = sum(lengths)
    q, k, v = (torch.randn(total, heads, head_dim, device=device, dtype=torch.bfloat16)
               for _ in range(3))
    cu = torch.tensor([0, *torch.tensor(lengths).cumsum(0).tolist()], device=device,
                      dtype=torch.int32)
    return q, k, v, cu


def ms_per_iteration(step, iters: int, reps: int) -> float:
    """Median over ``reps`` of the wall ms per iteration of ``iters`` calls of ``step``."""
    laps = []
    for _ in range(reps):
        torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(iters):
            step()
        torch.cuda.synchronize()
        laps.append(1e3 * (time.perf_counter() - start) / iters)
    return statistics.median(laps)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lengths", type=int, nargs="+", default=[512, 300, 700, 536])
    ap.add_argument("--heads", type=int, default=16)
    ap.add_argument("--head-dim", type=int, default=64)
    ap.add_argument("--matmul", type=int, nargs="+", default=[0, 4096, 8192])
    ap.add_argument("--iters", type=int, default=200)
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--out", required=True)
    args = ap.parse_args(argv)
    device = torch.device("cuda")
    q, k, v, cu = packed_inputs(args.lengths, args.heads, args.head_dim, device)
    longest = max(args.lengths)
    records = []
    for width in args.matmul:
        a = torch.randn(width, width, device=device, dtype=torch.bfloat16) if width else None
        for check in (True, False):
            for kind in ("int", "tensor"):
                ops.CHECK_PACKING = check
                m = longest if kind == "int" else torch.tensor(longest, device=device)

                def step(a=a, m=m):
                    if a is not None:
                        torch.mm(a, a)
                    hf_stable_attn.flash_attn_varlen_func(q, k, v, cu, cu, m, m, causal=True)

                with torch.no_grad():
                    for _ in range(20):
                        step()
                    ms = ms_per_iteration(step, args.iters, args.reps)
                records.append(dict(matmul=width, check=check, max_seqlen=kind, ms=ms))
                print(f"matmul {width:5d} check {check!s:5} max_seqlen {kind:6}: {ms:.4f} ms",
                      flush=True)
    ops.CHECK_PACKING = True
    with open(args.out, "w") as f:
        json.dump(dict(gpu=torch.cuda.get_device_name(), torch=torch.__version__,
                       lengths=args.lengths, heads=args.heads, head_dim=args.head_dim,
                       iters=args.iters, reps=args.reps, records=records), f, indent=1)


if __name__ == "__main__":
    main()

"""The whole backward (``flash_attn_bwd``), or with ``--part fwd`` the forward
(``flash_attn_fwd``, the fix on), of two kernel packages on the same inputs (GPU only): one of
them a copy of ``kernels/`` with a change (e.g. ``cp -r kernels .variants/x/kbase`` before
editing, then ``PYTHONPATH=$PWD:.variants/x``), the tile table's first config (autotuning off),
5 rounds of ``do_bench`` medians (10 ms warm-up, 50 ms) per shape in
``benchmarks.timing.rotated_rounds`` (rounds 1-3 start at the base, 4-5 at the variant).

Per shape it prints both times, the change, the largest difference of each result (dQ, dK, dV;
or out, lse) relative to the base's largest value, and which kernel ran (the dK/dV's, or the
forward's): its Triton config, registers and spills, or no Triton kernel where the call took
the Gluon route (a control: code the change left alone).

``--tiles fwd=64,64,4,2,1`` (repeatable; ``fwd``, ``dq`` or ``dkdv``) cuts that kernel's table to
one entry (block M, block N, warps, stages, TMA 0/1[, register cap]) in both packages, e.g. the
tuner's pick, where the first entry is not what a tuned run launches (a TMA entry needs
``--seqlens`` from 2048: shorter calls with a mask load through pointers).

Run: ``PYTHONPATH=$PWD:.variants/x python gpu/backward_ab.py --base kbase --out ab.json``.
"""

from __future__ import annotations

import argparse
import functools
import importlib
import json
import os
import statistics
import time

os.environ["HF_STABLE_ATTN_AUTOTUNE"] = "0"  # the launchers read it at import

import torch  # noqa: E402
import triton  # noqa: E402

from benchmarks.bench_attention import Shape  # noqa: E402
from benchmarks.timing import median_ms, rotated_rounds  # noqa: E402
from benchmarks.tune_kernel import make_inputs  # noqa: E402
from hf_stable_attn.kernels import flash_fwd  # noqa: E402
from hf_stable_attn.shift_rule import shift_params  # noqa: E402
from hf_stable_attn.testing import fix_kwargs, launch_kwargs  # noqa: E402

SHAPES = [  # (S, B, Hq, Hkv, D, causal)
    (2048, 8, 32, 32, 64, True), (2048, 8, 32, 4, 64, True), (1024, 16, 12, 12, 64, True),
    (4096, 4, 32, 32, 64, True), (2048, 8, 32, 32, 64, False), (2048, 8, 16, 16, 128, True),
    (1024, 16, 32, 32, 64, True), (1024, 16, 16, 16, 128, True),
]
ROUNDS = 5


def kernel_record(launch) -> dict:
    """The Triton kernels ``launch`` (a ``TiledLaunch``) compiled since its ``compiled`` was
    cleared (none: the call took Gluon)."""
    kernels = list(launch.compiled.values())
    return dict(config=launch.last, kernels=len(kernels),
                regs=[k.n_regs for k in kernels], spills=[k.n_spills for k in kernels])


def force_tiles(package, specs: list[str]) -> None:
    """Cut the tables of ``package``'s launchers (``LAUNCHES``) named in ``specs``
    (``kernel=bm,bn,warps,stages,tma[,maxnreg]``) to that one entry at every head dim."""
    launches = importlib.import_module(package).LAUNCHES
    for spec in specs:
        kernel, numbers = spec.split("=")
        bm, bn, warps, stages, tma, *cap = (int(x) for x in numbers.split(","))
        launch = launches[kernel]
        launch.table = {d: [(bm, bn, warps, stages, bool(tma), *cap)] for d in launch.table}


def part_call(part: str, module, q, k, v, dout, out, lse, kw, fix):
    """``(call, launch)``: the forward or backward of kernel module ``module`` (``flash_fwd``
    or ``flash_bwd`` of a package) on these tensors, and the launcher whose kernel it records."""
    if part == "fwd":
        return (lambda: module.flash_attn_fwd(q, k, v, **kw, **fix)), module._fwd_launch
    return (lambda: module.flash_attn_bwd(dout, q, k, v, out, lse, **kw)), module._dkdv_launch


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", required=True, help="the kernel package to compare against")
    ap.add_argument("--variant", default="hf_stable_attn.kernels")
    ap.add_argument("--part", choices=("bwd", "fwd"), default="bwd")
    ap.add_argument("--tiles", action="append", default=[],
                    help="kernel=bm,bn,warps,stages,tma[,maxnreg]: that kernel's only entry")
    ap.add_argument("--seqlens", type=int, nargs="+", help="only SHAPES of these lengths")
    ap.add_argument("--shape", action="append", default=[],
                    help="S:B:Hq:Hkv:D:causal (0/1), repeatable, instead of SHAPES")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    for package in (args.base, args.variant):
        force_tiles(package, args.tiles)
    module_name = "flash_fwd" if args.part == "fwd" else "flash_bwd"
    modules = {name: importlib.import_module(f"{pkg}.{module_name}")
               for name, pkg in (("base", args.base), ("variant", args.variant))}
    rows = []
    shapes = [tuple(int(x) for x in spec.split(":")) for spec in args.shape] or SHAPES
    for seqlen, batch, hq, hk, d, causal in shapes:
        if args.seqlens and seqlen not in args.seqlens:
            continue
        q, k, v, dout = make_inputs(Shape("bf16", seqlen, batch, hq, hk, d, causal),
                                    seed=seqlen + hk + d)
        kw = launch_kwargs(seqlen, seqlen, d, causal=causal)
        fix = fix_kwargs(shift_params(q.dtype, stabilize=True, beta=4.0))
        out, lse = flash_fwd.flash_attn_fwd(q, k, v, **kw, **fix)
        calls, results, info = {}, {}, {}
        for name, module in modules.items():
            calls[name], launch = part_call(args.part, module, q, k, v, dout, out, lse, kw, fix)
            # a plan kept from an earlier call would launch without the launcher recording it
            importlib.import_module(module.__package__).clear_plans()
            launch.compiled.clear()
            results[name] = [r.float() for r in calls[name]()]
            torch.cuda.synchronize()
            info[name] = kernel_record(launch)
        diff = [float((a - b).abs().max() / b.abs().max())
                for a, b in zip(results["variant"], results["base"])]
        laps = rotated_rounds([functools.partial(median_ms, fn, q.device, warmup_ms=10,
                                                 rep_ms=50) for fn in calls.values()], ROUNDS)
        times = dict(zip(calls, laps))
        ms = {name: statistics.median(t) for name, t in times.items()}
        row = dict(S=seqlen, B=batch, Hq=hq, Hkv=hk, D=d, causal=causal, ms=ms, rounds=times,
                   info=info, rel_diff=diff, change=ms["base"] / ms["variant"] - 1)
        rows.append(row)
        print(f"S{seqlen} B{batch} {hq}/{hk} D{d} causal={causal}: base {ms['base']:.3f} "
              f"variant {ms['variant']:.3f} ms, speedup {100 * row['change']:+.1f}%, "
              f"diff {['%.1e' % x for x in diff]}, {info}", flush=True)
    with open(args.out, "w") as f:
        json.dump(dict(gpu=torch.cuda.get_device_name(), triton=triton.__version__,
                       torch=torch.__version__, date=time.strftime("%Y-%m-%d %H:%M"),
                       part=args.part, tiles=args.tiles, base=args.base, variant=args.variant,
                       rows=rows), f, indent=1)


if __name__ == "__main__":
    main()

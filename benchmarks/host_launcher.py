"""Host time of our launchers' own Python per call (CPU or GPU): ``flash_attn_fwd`` and
``flash_attn_bwd`` on a GPT-2-sized training shape with Triton's compiled kernel replaced by a
no-op, so what is timed is argument assembly, keys, grids and the specialization check, not
Triton's C launcher or the kernels. Several kernel packages (``--kernels``, e.g. a copy of an older
``kernels/``) run interleaved, each timing the best of ``--rounds`` rounds.

Run: ``PYTHONPATH=$PWD python -m benchmarks.host_launcher [--kernels PKG ...]``.
"""

from __future__ import annotations

import argparse
import importlib
import timeit

import torch

from hf_stable_attn.shift_rule import shift_params
from hf_stable_attn.testing import fix_kwargs, launch_kwargs


class _NoOpKernel:
    """Stands in for a ``@triton.jit`` kernel: ``kernel[grid](...)`` returns a compiled stand-in
    whose ``compiled[grid](*args)`` does nothing."""

    def __getitem__(self, grid):
        return lambda *args, **kwargs: self

    def __call__(self, *args):
        return None


def stub_package(package: str):
    """The package's forward and backward modules, autotuning off and every launch a no-op."""
    importlib.import_module(f"{package}._common").AUTOTUNE = False
    fwd = importlib.import_module(f"{package}.flash_fwd")
    bwd = importlib.import_module(f"{package}.flash_bwd")
    for launch in (fwd._fwd_launch, bwd._dq_launch, bwd._dkdv_launch):
        launch.kernel = _NoOpKernel()
        launch.variants = {d: launch.kernel for d in getattr(launch, "variants", {})}
    return fwd, bwd


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kernels", nargs="+", default=["hf_stable_attn.kernels"])
    ap.add_argument("--rounds", type=int, default=25)
    ap.add_argument("--calls", type=int, default=200)
    args = ap.parse_args(argv)
    batch, seqlen, heads, head_dim = 8, 1024, 12, 64
    q, k, v, dout, out = (torch.randn(batch, seqlen, heads, head_dim, dtype=torch.bfloat16)
                          for _ in range(5))
    lse = torch.randn(batch, heads, seqlen)
    kw = launch_kwargs(seqlen, seqlen, head_dim, causal=True)
    fix = fix_kwargs(shift_params(torch.bfloat16))
    packages = {name: stub_package(name) for name in args.kernels}
    best: dict[str, float] = {}
    for _ in range(args.rounds):
        for name, (fwd, bwd) in packages.items():
            calls = {"fwd": lambda: fwd.flash_attn_fwd(q, k, v, **kw, **fix),
                     "bwd": lambda: bwd.flash_attn_bwd(dout, q, k, v, out, lse, **kw)}
            for part, call in calls.items():
                us = timeit.timeit(call, number=args.calls) / args.calls * 1e6
                best[f"{name} {part}"] = min(best.get(f"{name} {part}", us), us)
    for label, us in best.items():
        print(f"{label}: {us:.1f} us per call")
    return best


if __name__ == "__main__":
    main()

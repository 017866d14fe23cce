"""Per-config timings of our Triton kernels: which tile shape wins for which shape (GPU only).

For every shape and every candidate ``(BLOCK_M, BLOCK_N, num_warps, num_stages)`` this launches
that config alone (``HF_STABLE_ATTN_AUTOTUNE=0`` with the launcher's default entry replaced) and
times it with ``triton.testing.do_bench`` (median, L2 flushed between repetitions):

- ``fwd`` / ``fwd_nofix``: the forward with the fix on / off;
- ``dkdv``: the whole backward while the dK/dV kernel takes the candidate (dQ at its default);
- ``dq``: the whole backward while the dQ kernel takes the candidate (dK/dV at its default).

Compiles run first in ``--jobs`` worker processes (small inputs with the same specialisation),
which fill Triton's on-disk cache, so the timing pass mostly loads binaries. ``--kernels`` picks
the kernel package (``hf_stable_attn.kernels`` or a development copy with the same layout), so
two variants can be compared in one session. Configs that do not fit (shared memory, registers)
are recorded with their error.

``--grid table`` times only the package's own table entries (a quick variant comparison).
``--whole-step`` times each config in the forward + backward a training step runs (a forward
config followed by the default backward, a dQ or dK/dV config after the default forward), and
``--sustain-s T`` back to back for ``T`` seconds instead of ``do_bench``
(``benchmarks.timing.sustained_ms``), where the card stays at its power limit as in training
(docs/kernel_notes.md, sessions 66-67: short windows can favour a config that spends more
energy per unit of work).
``--check`` also scores each config's result against a float64 oracle on the timed inputs:
``err`` is the largest error of what the part computes (the forward's output; dQ; dK and dV),
``plain_err`` that of the same math in plain PyTorch in bf16, ``flash_rule`` whether
``err <= 2 x plain_err`` (forward) or ``3 x`` (gradients) plus 1e-5, the suite's factors: a
candidate config (one not in the tables, which ``tests/gpu/test_table_configs.py`` checks) is
checked on the shapes it is timed on.

On Hopper, calls that the routes send to a Gluon kernel (``flash_fwd_hopper.covers``,
``flash_bwd_hopper.routes``) run that kernel whatever the config: set ``HF_STABLE_ATTN_GLUON=0``
to time the Triton tables at those shapes.

Run: ``PYTHONPATH=$PWD python -m benchmarks.tune_kernel --out tune.json [--kernels PKG]``.
"""

from __future__ import annotations

import argparse
import importlib
import itertools
import json
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict

os.environ["HF_STABLE_ATTN_AUTOTUNE"] = "0"  # the launchers read it at import
os.environ["HF_STABLE_ATTN_TMA"] = "1"  # TMA candidates run as TMA (whatever the caller set)

import torch  # noqa: E402

from benchmarks.bench_attention import Shape, attention_flops  # noqa: E402
from benchmarks.timing import sustained_ms  # noqa: E402
from hf_stable_attn.kernels._common import TMA_MIN_SEQLEN, tile_config  # noqa: E402
from hf_stable_attn.shift_rule import shift_params  # noqa: E402
from hf_stable_attn.testing import (  # noqa: E402
    fix_kwargs, launch_kwargs, max_error, oracle_with_grads,
)

PARTS = ("fwd", "fwd_nofix", "dkdv", "dq")
GRIDS = {
    "fwd": dict(m=(64, 128), n=(32, 64, 128), w=(4, 8), s=(2, 3, 4)),
    "dkdv": dict(m=(16, 32, 64, 128), n=(64, 128), w=(4, 8), s=(2, 3)),
    "dq": dict(m=(64, 128), n=(32, 64, 128), w=(4, 8), s=(2, 3)),
}


def candidates(part: str, tma: str = "with", tma_min_stages: int = 3) -> list[tuple]:
    """Tile configs of ``part``'s grid: pointer loads (``tma`` "with" or "off") and TMA loads
    (``tma`` "with" or "only") with ``tma_min_stages`` stages or more (the ptxas of CUDA 12.8
    and 12.9 crash on 2-stage TMA kernels; CUDA 13.5's compiles them)."""
    grid = GRIDS["fwd" if part.startswith("fwd") else part]
    tiles = list(itertools.product(grid["m"], grid["n"], grid["w"]))
    plain = [(m, n, w, s) for m, n, w in tiles for s in grid["s"]] if tma != "only" else []
    with_tma = [(m, n, w, s, True) for m, n, w in tiles for s in grid["s"] if s >= tma_min_stages]
    return plain + (with_tma if tma != "off" else [])


DEFAULT_CASES = [(128, False, 1), (128, True, 1), (64, False, 1), (64, True, 1), (128, True, 8)]


def default_shapes(total_tokens: int, hidden: int, head_dims=None, *, seqlen: int = 4096,
                   cases=None) -> list[Shape]:
    """``seqlen`` (default 4096), ``hidden // D`` query heads; the (D, causal, group) ``cases``,
    else MHA causal and not for each of ``head_dims``, else the default cases."""
    if not cases:
        cases = (DEFAULT_CASES if not head_dims
                 else [(d, c, 1) for d in head_dims for c in (False, True)])
    shapes = []
    for d, causal, group in cases:
        hq = hidden // d
        shapes.append(Shape("bf16", seqlen, total_tokens // seqlen, hq, hq // group, d, causal))
    return shapes


def parse_case(text: str) -> tuple[int, bool, int]:
    """``"64:1:8"`` -> ``(64, True, 8)``: head dim, causal, query heads per KV head."""
    head_dim, causal, group = (int(part) for part in text.split(":"))
    return head_dim, bool(causal), group


def small(shape: Shape) -> Shape:
    """Same compile-time specialisation (divisibility by 16, group size, long enough for the
    TMA configs), small problem."""
    return Shape("bf16", TMA_MIN_SEQLEN, 1, shape.heads_q, shape.heads_kv, shape.head_dim,
                 shape.causal)


def ptxas_version() -> str:
    """The ptxas release our kernels compile with (``kernels/_ptxas.py``: the user's
    ``TRITON_PTXAS_PATH``, else torch's where it is newer than Triton's, else Triton's)."""
    from hf_stable_attn.kernels import _ptxas
    found = _ptxas.release(_ptxas.compiling_ptxas())
    return ".".join(map(str, found)) if found else "unknown"


def make_inputs(shape: Shape, seed: int = 0):
    gen = torch.Generator(device="cuda").manual_seed(seed)

    def randn(heads):
        return torch.randn(shape.batch, shape.seqlen, heads, shape.head_dim, device="cuda",
                           dtype=torch.bfloat16, generator=gen)

    return randn(shape.heads_q), randn(shape.heads_kv), randn(shape.heads_kv), randn(shape.heads_q)


def oracle_results(shape: Shape, tensors, dtype: torch.dtype) -> dict:
    """``oracle_with_grads`` in ``dtype`` on ``tensors`` (q, k, v, dout): ``{"fwd": (out,),
    "dq": (dq,), "dkdv": (dk, dv)}`` in (B, S, H, D), dK/dV summed over each KV head's group."""
    out, (dq, dk, dv) = oracle_with_grads(*tensors, dtype, causal=shape.causal)
    return {"fwd": (out,), "dq": (dq,), "dkdv": (dk, dv)}


def config_errors(part: str, got, exact: dict, plain: dict) -> dict:
    """``err``, ``plain_err`` and ``flash_rule`` of one config's result ``got`` (the forward's
    ``(out, lse)`` or the backward's ``(dq, dk, dv)``) against the float64 and bf16 oracles."""
    key = "fwd" if part.startswith("fwd") else part
    mine = got[1:] if key == "dkdv" else got[:1]  # (dk, dv), or out / dq
    err = max(max_error(a, b) for a, b in zip(mine, exact[key]))
    plain_err = max(max_error(a, b) for a, b in zip(plain[key], exact[key]))
    factor = 2.0 if key == "fwd" else 3.0
    return dict(err=err, plain_err=plain_err, flash_rule=err <= factor * plain_err + 1e-5)


class Runner:
    """Launches one part of one kernel package with one config."""

    def __init__(self, package: str):
        self.fwd_mod = importlib.import_module(f"{package}.flash_fwd")
        self.bwd_mod = importlib.import_module(f"{package}.flash_bwd")
        self.block_d = importlib.import_module(f"{package}._common").block_d
        # Plans keep a call's tile config: forgotten after each table change (older copies of
        # the package have none).
        self.clear_plans = getattr(importlib.import_module(package), "clear_plans", lambda: None)

    def tables(self, part: str) -> dict:
        """The package's config table (padded head dim -> entries) of the kernel ``part`` tunes."""
        if part.startswith("fwd"):
            return self.fwd_mod._FWD_CONFIGS
        return self.bwd_mod._DKDV_CONFIGS if part == "dkdv" else self.bwd_mod._DQ_CONFIGS

    def table(self, part: str, head_dim: int) -> list[tuple]:
        """The package's own table entries for ``part`` at ``head_dim``."""
        return list(self.tables(part)[self.block_d(head_dim)])

    @staticmethod
    def keywords(part: str, shape: Shape, dtype: torch.dtype) -> tuple[dict, dict]:
        """The launchers' masking keywords and the fix's (off for ``fwd_nofix``)."""
        kw = launch_kwargs(shape.seqlen, shape.seqlen, shape.head_dim, causal=shape.causal)
        return kw, fix_kwargs(shift_params(dtype, stabilize=part != "fwd_nofix", beta=4.0))

    def whole_step(self, part: str, run, shape: Shape, tensors):
        """``run`` (``call``'s pass) inside a forward + backward: a forward followed by the
        default backward on its output, or a backward after the default forward. Returns the
        backward's ``(dq, dk, dv)``."""
        q, k, v, dout = tensors
        kw, fix = self.keywords(part, shape, q.dtype)
        if part.startswith("fwd"):
            return lambda: self.bwd_mod.flash_attn_bwd(dout, q, k, v, *run(), **kw)

        def step():
            self.fwd_mod.flash_attn_fwd(q, k, v, **kw, **fix)
            return run()
        return step

    def call(self, part: str, cfg, shape: Shape, tensors):
        q, k, v, dout = tensors
        bd = self.block_d(shape.head_dim)
        kw, fix = self.keywords(part, shape, q.dtype)
        table = self.tables(part)
        if part.startswith("fwd"):
            def run():
                return self.fwd_mod.flash_attn_fwd(q, k, v, **kw, **fix)
        else:
            out, lse = self.fwd_mod.flash_attn_fwd(q, k, v, **kw, **fix)

            def run():
                return self.bwd_mod.flash_attn_bwd(dout, q, k, v, out, lse, **kw)

        entries = table[bd]
        table[bd] = [cfg]  # alone: a config that does not fit raises, not another one runs
        self.clear_plans()

        def restore():
            table[bd] = entries
            self.clear_plans()

        run.restore = restore
        return run


def timed_mode(part: str, whole_step: bool) -> str:
    """``attention_flops``' mode of what a config's timing covers: the forward, or the whole
    backward (the dQ and dK/dV configs), or both with ``whole_step``."""
    if whole_step:
        return "fwd_bwd"
    return "fwd" if part.startswith("fwd") else "bwd"


def _compile_worker(package: str, jobs: list) -> list[str | None]:
    runner = Runner(package)
    errors = []
    for part, cfg, shape in jobs:
        try:
            fn = runner.call(part, cfg, shape, make_inputs(shape))
            try:
                fn()
            finally:  # a failed config must not stay in the table for the next job
                fn.restore()
            errors.append(None)
        except Exception as exc:  # noqa: BLE001  (record why a config does not fit)
            errors.append(f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}")
        torch.cuda.synchronize()
    return errors


def precompile(package: str, work: list[tuple], jobs: int) -> dict:
    """Compile every ``(part, config, shape)`` of ``work`` at its ``small`` shape in ``jobs``
    worker processes, which fills Triton's on-disk cache; returns ``{(part, config, small
    shape): error}`` for the ones that failed."""
    compile_jobs = sorted({(p, c, small(s)) for p, c, s in work}, key=str)
    chunks = [compile_jobs[i::jobs] for i in range(jobs)]
    ctx = torch.multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(jobs, mp_context=ctx) as pool:
        results = list(pool.map(_compile_worker, [package] * len(chunks), chunks))
    return {job: err for chunk, errs in zip(chunks, results) for job, err in zip(chunk, errs)
            if err}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kernels", default="hf_stable_attn.kernels")
    ap.add_argument("--parts", nargs="+", default=list(PARTS), choices=PARTS)
    ap.add_argument("--head-dims", nargs="+", type=int, help="default: D 128 and 64 cases")
    ap.add_argument("--tma", choices=("with", "off", "only"), default="with",
                    help="pointer-load configs, TMA-load configs, or both")
    ap.add_argument("--grid", choices=("full", "table"), default="full",
                    help="every candidate of GRIDS, or the package's own table entries")
    ap.add_argument("--tma-min-stages", type=int, default=3,
                    help="fewest pipeline stages of the full grid's TMA configs")
    ap.add_argument("--seqlen", type=int, default=4096)
    ap.add_argument("--cases", nargs="+", metavar="D:CAUSAL:GROUP",
                    help="shapes as head dim, causal (0/1) and query heads per KV head, e.g. "
                         "64:1:1 64:1:8 (default: --head-dims' cases, else DEFAULT_CASES)")
    ap.add_argument("--total-tokens", type=int, default=16384)
    ap.add_argument("--hidden", type=int, default=2048)
    ap.add_argument("--jobs", type=int, default=min(16, os.cpu_count() or 1))
    ap.add_argument("--time-budget-s", type=float, default=480.0)
    ap.add_argument("--whole-step", action="store_true",
                    help="time each config in a forward + backward (Runner.whole_step)")
    ap.add_argument("--sustain-s", type=float, default=0.0,
                    help="time each config back to back for this long instead of do_bench")
    ap.add_argument("--check", action="store_true",
                    help="score each config against a float64 oracle (err, plain_err, "
                         "flash_rule)")
    ap.add_argument("--out", required=True)
    args = ap.parse_args(argv)
    start = time.perf_counter()
    cases = [parse_case(c) for c in args.cases or ()]
    shapes = default_shapes(args.total_tokens, args.hidden, args.head_dims, seqlen=args.seqlen,
                            cases=cases)
    runner = Runner(args.kernels)

    def configs(part: str, shape: Shape) -> list[tuple]:
        if args.grid == "full":
            return candidates(part, args.tma, args.tma_min_stages)
        return [c for c in runner.table(part, shape.head_dim)
                if args.tma == "with" or tile_config(c)[4] == (args.tma == "only")]

    work = [(p, c, s) for s in shapes for p in args.parts for c in configs(p, s)]

    failed = precompile(args.kernels, work, args.jobs)
    compile_s = time.perf_counter() - start
    print(f"compiled {len({(p, c, small(s)) for p, c, s in work})} variants in {compile_s:.0f} s, "
          f"{len(failed)} failed", file=sys.stderr)

    records = []
    report = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
              "triton": importlib.import_module("triton").__version__, "kernels": args.kernels,
              "ptxas": ptxas_version(),
              "date": time.strftime("%Y-%m-%d %H:%M"), "compile_s": compile_s,
              "whole_step": args.whole_step, "sustain_s": args.sustain_s, "records": records}
    from triton.testing import do_bench
    tensors, oracles = {}, {}
    for part, cfg, shape in work:
        if time.perf_counter() - start > args.time_budget_s:
            report["cut_by_budget"] = True
            break
        block_m, block_n, num_warps, num_stages, tma, maxnreg = tile_config(cfg)
        rec = dict(part=part, **asdict(shape), block_m=block_m, block_n=block_n,
                   num_warps=num_warps, num_stages=num_stages, tma=tma, maxnreg=maxnreg,
                   ms=None, tflops=None, error=failed.get((part, cfg, small(shape))))
        if rec["error"] is None:
            if shape not in tensors:
                tensors = {shape: make_inputs(shape, seed=len(records))}
                oracles = ({dtype: oracle_results(shape, tensors[shape], dtype)
                            for dtype in (torch.float64, torch.bfloat16)} if args.check else {})
            try:
                fn = runner.call(part, cfg, shape, tensors[shape])
                timed = (runner.whole_step(part, fn, shape, tensors[shape]) if args.whole_step
                         else fn)
                try:
                    if args.sustain_s > 0:
                        timed()  # loads the compiled config before the clock starts
                        rec["ms"] = sustained_ms(timed, tensors[shape][0].device, args.sustain_s)
                    else:
                        rec["ms"] = do_bench(timed, warmup=10, rep=40, return_mode="median")
                    if args.check:
                        rec.update(config_errors(part, fn(), oracles[torch.float64],
                                                 oracles[torch.bfloat16]))
                finally:
                    fn.restore()
                rec["tflops"] = attention_flops(shape, timed_mode(part, args.whole_step)) \
                    / rec["ms"] * 1e-9
            except Exception as exc:  # noqa: BLE001
                rec["error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
        records.append(rec)
    with open(args.out, "w") as f:
        json.dump(report, f, indent=1)
    for shape in shapes:
        for part in args.parts:
            ok = [r for r in records if r["part"] == part and r["ms"] and
                  (r["seqlen"], r["heads_kv"], r["head_dim"], r["causal"]) ==
                  (shape.seqlen, shape.heads_kv, shape.head_dim, shape.causal)]
            if ok:
                best = min(ok, key=lambda r: r["ms"])
                print(f"{part:9s} D={shape.head_dim:3d} causal={shape.causal!s:5s} "
                      f"Hkv={shape.heads_kv:2d}: best {best['ms']:.3f} ms "
                      f"({best['block_m']},{best['block_n']},{best['num_warps']},{best['num_stages']}"
                      f"{', TMA' if best['tma'] else ''}"
                      f"{', maxnreg %d' % best['maxnreg'] if best['maxnreg'] else ''})")


if __name__ == "__main__":
    main()

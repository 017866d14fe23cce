"""Session 66: why v65a's faster D64 causal MHA forward (the Triton forward below 8192 rows
under Triton 3.9, 5-8% faster than the Gluon launch alone) showed 0.0-0.8% in forward +
backward (session 65). Two readings: the backward runs slower after the faster forward (the
card's power cap lowering its clock), or timing noise. On S 4096, B 4, 32 heads, D64, bf16,
causal, through ``hf_stable_attn.flash_attn_func``, with the forward route patched as in
``docs/results/session65/v65a_route_ab.py`` (``triton``: below 8192 rows; ``gluon``: from 4096;
``nofix``: the fix off, table route):

1. ``do_bench`` medians over 7 rotated rounds of fwd, fwd_bwd and bwd (the backward of one
   stored forward of that route, ``retain_graph``), with the SM clock and power over each
   (``benchmarks.gpu_clocks``);
2. each route and mode run back to back for 2 s without L2 flushes, twice, rotated: ms per
   call and the clock and power over that span;
3. GPU time per kernel of fwd_bwd (``torch.profiler``, 20 steps): does the backward's time
   change with the forward's route?

Run on the GPU from the repository root: ``python3 docs/results/session66/route_power.py OUT.json
[--table-per-span] [--seqlen S --heads-kv H]``. At S 4096 MHA (the default) ``gluon`` is the
shipped route under Triton 3.6 and ``triton`` under 3.9; at S 2048 ``triton`` under both.
Calls 2 and 4 ran S 4096 MHA with ``ROWS`` (2048, 8192) and (2048, 4096), the same routes there
as (2048, S + 1) and (2048, S) now; call 7 added ``--seqlen`` and ``--heads-kv``.

As first run (call 2), the table was patched around every call, as in session 65's A/B, which
clears the launch plans each time. ``--table-per-span`` patches it once around each timed span
(plans kept between its calls, as in a training loop), and the profile also gives the share of
its span the GPU was busy (and the per-call patching's, for ``triton``).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import time

import torch
import triton

import hf_stable_attn
from benchmarks.gpu_clocks import ClockSampler
from benchmarks.runinfo import source_digest
from benchmarks.timing import median_ms, rotated_rounds
from gpu.profile_e2e import cuda_ms_by_name
from gpu.route_check import patched
from hf_stable_attn.kernels import flash_fwd_hopper

SUSTAIN_S = 2.0


def route(name, seqlen, grouped):
    """The patched forward table of ``name`` at ``seqlen`` causal rows (``triton``: the Triton
    forward; ``gluon``: the Gluon launch; ``nofix``: the table's route) for D64 with the fix,
    MHA or ``grouped``, and whether the fix is on."""
    routes, key = flash_fwd_hopper.FASTER, (64, True, grouped)
    rows = {"triton": (2048, seqlen + 1), "gluon": (2048, seqlen)}.get(name, routes[key])
    return patched(flash_fwd_hopper, FASTER={**routes, key: rows}), name != "nofix"


def calls(name, q, k, v, dout, per_call):
    """mode -> one call of route ``name``; ``per_call``: the forward table patched around each
    call (else the caller patches it: ``route``)."""
    shape = (q.shape[1], k.shape[2] < q.shape[2])

    def forward():
        table, fix = route(name, *shape)
        with table if per_call else contextlib.nullcontext():
            return hf_stable_attn.flash_attn_func(q, k, v, causal=True, stabilize=fix)

    with route(name, *shape)[0]:
        stored = forward()
    return {"fwd": forward,
            "fwd_bwd": lambda: torch.autograd.grad(forward(), (q, k, v), dout),
            "bwd": lambda: torch.autograd.grad(stored, (q, k, v), dout, retain_graph=True)}


def sustained_ms(fn):
    """ms per call of ``fn`` run back to back for ``SUSTAIN_S`` (CUDA events around the run)."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    n, t0 = 0, time.time()
    start.record()
    while time.time() - t0 < SUSTAIN_S:
        fn()
        n += 1
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / n


def kernel_split(fn, steps=20):
    """GPU ms per step of each kernel ``fn`` launches (``torch.profiler``), above 1 us, and
    ``busy``: the kernels' time over the span from the first one's start to the last one's end."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(steps):
            fn()
        torch.cuda.synchronize()
    events = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    span = max(e.time_range.end for e in events) - min(e.time_range.start for e in events)
    split = {k: round(v, 4) for k, v in cuda_ms_by_name(events, steps).items() if v > 1e-3}
    return {**split, "busy": round(sum(split.values()) * steps * 1e3 / span, 4)}


def timed(fns, rounds, measure, clocks, table):
    """``measure(fn)`` of every ``fns`` entry in ``rotated_rounds`` inside ``table(name)``,
    with the clocks over each entry's spans: name -> {"ms": median, "ms_rounds", **clocks}."""
    names, spans = list(fns), {n: [] for n in fns}

    def timer(name):
        t0 = time.time()
        with table(name):
            ms = measure(fns[name])
        spans[name].append((t0, time.time()))
        return ms

    laps = rotated_rounds([lambda n=n: timer(n) for n in names], rounds)
    return {n: {"ms": statistics.median(ms), "ms_rounds": ms, **(clocks.window(spans[n]) or {})}
            for n, ms in zip(names, laps)}


def main(out_path: str, per_call: bool, s: int, hk: int) -> None:
    batch, h, d = 16384 // s, 32, 64
    g = torch.Generator(device="cuda").manual_seed(66)
    q, k, v = (torch.randn(batch, s, heads, d, device="cuda", dtype=torch.bfloat16, generator=g)
               .requires_grad_() for heads in (h, hk, hk))
    dout = torch.randn(batch, s, h, d, device="cuda", dtype=torch.bfloat16, generator=g)
    fns = {f"{name}/{mode}": fn for name in ("triton", "gluon", "nofix")
           for mode, fn in calls(name, q, k, v, dout, per_call).items()}

    def table(name):
        return (contextlib.nullcontext() if per_call
                else route(name.split("/")[0], s, hk < h)[0])

    result = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
              "triton": triton.__version__, "source": source_digest(),
              "shipped_rows": list(flash_fwd_hopper.FASTER[64, True, hk < h]),
              "table_patched": "per call" if per_call else "per timed span",
              "shape": dict(batch=batch, seqlen=s, heads=h, heads_kv=hk, head_dim=d,
                            causal=True)}
    device = torch.device("cuda")
    with ClockSampler(device) as clocks:
        for name, fn in fns.items():  # compile and tune outside the timing
            with table(name):
                fn()
        torch.cuda.synchronize()
        result["do_bench"] = timed(fns, 7, lambda fn: median_ms(fn, device), clocks, table)
        print(json.dumps({n: r["ms"] for n, r in result["do_bench"].items()}), flush=True)
        result["sustained"] = timed(fns, 2, sustained_ms, clocks, table)
        print(json.dumps({n: r["ms"] for n, r in result["sustained"].items()}), flush=True)
        result["kernels_fwd_bwd"] = {}
        for name, fn in fns.items():
            if name.endswith("/fwd_bwd"):
                with table(name):
                    result["kernels_fwd_bwd"][name.split("/")[0]] = kernel_split(fn)
        if not per_call:
            patched_each = calls("triton", q, k, v, dout, True)["fwd_bwd"]
            result["kernels_fwd_bwd"]["triton, table patched per call"] = kernel_split(
                patched_each)
        print(json.dumps({n: r["busy"] for n, r in result["kernels_fwd_bwd"].items()}))
    with open(out_path, "w") as f:
        json.dump(result, f, indent=1)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out")
    parser.add_argument("--table-per-span", action="store_true")
    parser.add_argument("--seqlen", type=int, default=4096, help="batch: 16384 tokens / seqlen")
    parser.add_argument("--heads-kv", type=int, default=32, help="of 32 query heads")
    args = parser.parse_args()
    main(args.out, not args.table_per_span, args.seqlen, args.heads_kv)

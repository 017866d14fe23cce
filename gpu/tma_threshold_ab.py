"""Below ``TMA_MIN_SEQLEN``: the forward and the backward with TMA (and so the Gluon routes) against
the pointer loads, with cuDNN and FlashAttention-2 in the same run (GPU only).

Up to session 46 every call below ``_common.TMA_MIN_SEQLEN`` (2048) rows loaded through
pointers, so none of the Gluon kernels ran there although their D128 routes start at 128 rows
(docs/kernel_notes.md, session 47). Per shape this times fwd+bwd through
``hf_stable_attn.flash_attn_func`` (the fix on) in the ``--variants``, each part's
``tma_ready`` given its own least length:

- ``pointer``: both parts from ``TMA_MIN_SEQLEN``, with or without a mask (the rule before
  ``TMA_MIN_SEQLEN_UNMASKED``);
- ``shipped``: the launchers' own rule;
- ``tma_fwd`` / ``tma_bwd``: the forward / the backward with TMA from ``--least`` rows;
- ``tma``: both.

The variants and the peers (``sdpa_cudnn``, ``sdpa_flash``) run in ``timing.rotated_rounds`` on
the same inputs; plans are cleared at each switch (a plan keeps its first call's route), and the
autotuner's key holds the TMA flag, so each variant tunes its own configs. Each record names the
tiles each part launched (12 or 16 warps: a Gluon kernel) and the variant's largest relative
difference from the first variant in the output and the gradients (same algorithm, other
tiles).

Run: ``PYTHONPATH=$PWD python gpu/tma_threshold_ab.py --out ab.json [--seqlens 512 1024]``.
"""

from __future__ import annotations

import argparse
import functools
import json
import statistics
import time

import torch

from benchmarks import timing
from benchmarks.bench_attention import (
    Shape, attention_flops, candidates, make_inputs, sweep_shapes)
from hf_stable_attn.kernels import LAUNCHES, _common, clear_plans, flash_bwd, flash_fwd

SHIPPED = {"fwd": flash_fwd.tma_ready, "bwd": flash_bwd.tma_ready}


def ready_from(least: int):
    """``_common.tma_ready`` from ``least`` rows, with a mask or without."""
    def ready(seqlen, *tensors, windowed=True):
        return _common.tma_ready(_common.TMA_MIN_SEQLEN if seqlen >= least else 0, *tensors)
    return ready


def variants(least: int) -> dict[str, tuple[int | None, int | None]]:
    """Name -> (forward's, backward's) least rows for TMA; None: the shipped rule."""
    pointer = _common.TMA_MIN_SEQLEN
    return {"pointer": (pointer, pointer), "shipped": (None, None),
            "tma_fwd": (least, pointer), "tma_bwd": (pointer, least), "tma": (least, least)}


def use(fwd_least: int | None, bwd_least: int | None) -> None:
    flash_fwd.tma_ready = SHIPPED["fwd"] if fwd_least is None else ready_from(fwd_least)
    flash_bwd.tma_ready = SHIPPED["bwd"] if bwd_least is None else ready_from(bwd_least)
    clear_plans()


def fwd_bwd(q, k, v, dout, causal):
    import hf_stable_attn

    out = hf_stable_attn.flash_attn_func(q, k, v, causal=causal, stabilize=True,
                                         backend="triton")
    out.backward(dout)
    return out


def results(q, k, v, dout, causal) -> list[torch.Tensor]:
    """Output and gradients of one call, in fp32."""
    for t in (q, k, v):
        t.grad = None
    out = fwd_bwd(q, k, v, dout, causal)
    got = [x.detach().float() for x in (out, q.grad, k.grad, v.grad)]
    timing.clear_grads((q, k, v))
    return got


def measure(shape: Shape, least: int, names: list[str], rounds: int, device) -> list[dict]:
    q, k, v, dout = make_inputs(shape, device, seed=int(time.time()))
    base = dict(seqlen=shape.seqlen, batch=shape.batch, heads_q=shape.heads_q,
                heads_kv=shape.heads_kv, head_dim=shape.head_dim, causal=shape.causal)
    records, timers, reference = [], [], None
    for name in names:
        fl, bl = variants(least)[name]
        use(fl, bl)
        for launch in LAUNCHES.values():
            launch.last = None
        start = time.perf_counter()
        got = results(q, k, v, dout, shape.causal)  # tunes this variant's keys
        timing.synchronize(device)
        first_s = time.perf_counter() - start
        reference = reference or got
        diff = max(float((g - r).norm() / r.norm()) for g, r in zip(got, reference))
        tiles = {f"tile_{p}": list(launch.last) for p, launch in LAUNCHES.items()
                 if launch.last is not None}
        records.append({**base, "impl": name, "fwd_least": fl, "bwd_least": bl,
                        "first_call_s": first_s, "rel_diff_vs_first": diff, **tiles})

        def timer(fl=fl, bl=bl):
            use(fl, bl)
            ms = timing.median_ms(functools.partial(fwd_bwd, q, k, v, dout, shape.causal),
                                  device, grad_to_none=(q, k, v))
            timing.clear_grads((q, k, v))
            return ms
        timers.append(timer)
    for peer in ("sdpa_cudnn", "sdpa_flash"):
        errors = []
        for gqa_via, run in candidates(peer, shape, device):
            def call(run=run):
                out = run(q, k, v)
                out.backward(dout)
                return out
            try:
                call()
            except RuntimeError as exc:
                errors.append(str(exc)[:300])
                continue
            timing.clear_grads((q, k, v))
            records.append({**base, "impl": peer, "gqa_via": gqa_via})
            timers.append(lambda call=call: timing.median_ms(call, device,
                                                             grad_to_none=(q, k, v)))
            break
        else:
            records.append({**base, "impl": peer, "ms": None, "error": " | ".join(errors)})
    timed = [r for r in records if r.get("ms", 0) is not None]
    laps = timing.rotated_rounds(timers, rounds)
    for r, ms in zip(timed, laps):
        r["ms"], r["ms_rounds"] = statistics.median(ms), ms
        r["tflops"] = attention_flops(shape, "fwd_bwd") / (r["ms"] * 1e-3) / 1e12
    use(None, None)
    return records


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seqlens", type=int, nargs="+", default=[1024, 512])
    ap.add_argument("--head-dims", type=int, nargs="+", default=[128, 64])
    ap.add_argument("--kv-groups", type=int, nargs="+", default=[1, 8])
    ap.add_argument("--least", type=int, default=128, help="TMA from this many rows")
    ap.add_argument("--variants", nargs="+", default=list(variants(0)), choices=list(variants(0)))
    ap.add_argument("--causal", choices=["true", "false"], nargs="+", default=["true", "false"])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--total-tokens", type=int, default=16384)
    ap.add_argument("--hidden", type=int, default=2048)
    ap.add_argument("--time-budget-s", type=float, default=None)
    ap.add_argument("--device", default="cuda", help="cpu: a check of the script (interpreter)")
    ap.add_argument("--out", required=True)
    args = ap.parse_args(argv)
    device = torch.device(args.device)
    budget = timing.Budget(args.time_budget_s)
    causals = [c == "true" for c in args.causal]
    shapes = sweep_shapes(["bf16"], args.seqlens, args.head_dims, causals, args.kv_groups,
                          args.total_tokens, args.hidden)
    gpu = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    out = dict(gpu=gpu, torch=torch.__version__,
               triton=__import__("triton").__version__, least=args.least, records=[])
    for shape in shapes:
        if not budget.fits():
            print(f"budget spent before {shape}")
            break
        recs = measure(shape, args.least, args.variants, args.rounds, device)
        out["records"] += recs
        ms = {r["impl"]: r.get("ms") for r in recs}
        print(f"S{shape.seqlen} D{shape.head_dim} causal={shape.causal} "
              f"Hq/Hk={shape.heads_q // shape.heads_kv}: "
              + " ".join(f"{n} {v:.3f}" for n, v in ms.items() if v), flush=True)
        with open(args.out, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()

"""Attention with learned sinks (gpt-oss's ``sinks``, flash-attn's ``s_aux``): what they cost
our kernels, and our kernels against the eager attention gpt-oss runs in Transformers.

gpt-oss's attention layers (head dim 64, 64 query heads, 8 KV heads; full causal attention and
a 128-key sliding window in alternate layers) at a fixed number of tokens per batch. Per shape,
in one process on the same random inputs (``bench_attention.make_inputs``, sinks drawn as
``2 * randn``), training mode (``fwd_bwd``, the sinks requiring grad):

- ``stable_flash_sinks``: ``flash_attn_func(..., s_aux=sinks)`` (the fix on);
- ``stable_flash``: the same call without sinks (what the sinks add);
- ``eager_sinks``: the math of gpt-oss's eager attention in bf16 (the full score matrix, the
  sink appended as a last column, softmax, the column dropped), K/V repeated per query head.

Records: ``ms`` (median of ``--rounds`` interleaved rounds of ``timing.median_ms``),
``tflops`` (``bench_attention``'s convention, the window's visible keys counted), ``peak_mem_mb``
(``timing.peak_extra_mb``), ``compile_s``, ``rel_err`` of the output against an fp32 eager run
(with the sinks, or without them for ``stable_flash``);
``error`` where an implementation refused the shape (e.g. out of memory).

Run (GPU): ``PYTHONPATH=$PWD python -m benchmarks.bench_sinks --out-dir $OUT``.
CPU smoke run: ``--device cpu --total-tokens 256 --heads 4 2 --seqlens 64``.
"""

from __future__ import annotations

import argparse
import functools
import traceback

import torch

from benchmarks import runinfo, timing
from benchmarks.bench_attention import FLOP_FACTOR, Shape, make_inputs

IMPLS = ("stable_flash_sinks", "stable_flash", "eager_sinks")
SLIDING = 128  # gpt-oss's sliding window (keys per query, itself included)


def eager_sinks(q, k, v, sinks, window: int | None, compute_dtype=None):
    """gpt-oss's eager attention: q (B, S, Hq, D), k, v (B, S, Hk, D), sinks (Hq,) ->
    (B, S, Hq, D); causal, each query seeing its last ``window`` keys when one is given."""
    dtype = compute_dtype or q.dtype
    group = q.shape[2] // k.shape[2]
    qt, kt, vt = (x.to(dtype).transpose(1, 2) for x in (q, k, v))
    kt, vt = kt.repeat_interleave(group, dim=1), vt.repeat_interleave(group, dim=1)
    scores = (qt @ kt.transpose(-1, -2)) * q.shape[-1] ** -0.5
    rows = torch.arange(q.shape[1], device=q.device)
    hidden = rows[None, :] > rows[:, None]
    if window is not None:
        hidden |= rows[None, :] <= rows[:, None] - window
    scores = scores.masked_fill(hidden, float("-inf"))
    column = sinks.to(dtype).view(1, -1, 1, 1).expand(*scores.shape[:3], 1)
    logits = torch.cat([scores, column], dim=-1)
    probs = torch.softmax(logits - logits.amax(-1, keepdim=True), dim=-1)[..., :-1]
    return (probs @ vt).transpose(1, 2)


def implementation(name: str, window: int | None, device: torch.device):
    """``fn(q, k, v, sinks)`` of ``name``."""
    if name == "eager_sinks":
        return functools.partial(eager_sinks, window=window)
    import hf_stable_attn

    backend = "triton" if device.type == "cuda" else "reference"
    size = (window - 1, 0) if window else (-1, -1)
    with_sinks = name == "stable_flash_sinks"
    return lambda q, k, v, sinks: hf_stable_attn.flash_attn_func(
        q, k, v, causal=True, window_size=size, s_aux=sinks if with_sinks else None,
        backend=backend)


def flops(shape: Shape, window: int | None) -> float:
    """``fwd_bwd`` FLOPs counting the keys each query sees (causal, within the window)."""
    s = shape.seqlen
    seen = s * (s + 1) / 2 if window is None else sum(min(i + 1, window) for i in range(s))
    return 4 * shape.batch * shape.heads_q * seen * shape.head_dim * FLOP_FACTOR["fwd_bwd"]


def measure(shape: Shape, window: int | None, device, rounds: int, seed: int) -> list[dict]:
    """One record per implementation on ``shape`` (``fwd_bwd``, interleaved rounds)."""
    q, k, v, dout = make_inputs(shape, device, seed)
    gen = torch.Generator(device=device).manual_seed(seed + 1)
    sinks = (2 * torch.randn(shape.heads_q, generator=gen, device=device)).to(q.dtype)
    sinks.requires_grad_()
    leaves = (q, k, v, sinks)
    with torch.no_grad():  # fp32 outputs with the sinks and without them (a -inf sink)
        refs = {with_sinks: eager_sinks(q, k, v, sinks if with_sinks else torch.full_like(
            sinks, float("-inf")), window, compute_dtype=torch.float32) for with_sinks in (1, 0)}
    base = dict(impl=None, dtype=shape.dtype, seqlen=shape.seqlen, batch=shape.batch,
                heads_q=shape.heads_q, heads_kv=shape.heads_kv, head_dim=shape.head_dim,
                causal=True, window=window, mode="fwd_bwd")
    records, calls = [], {}
    for name in IMPLS:
        fn = implementation(name, window, device)
        record = dict(base, impl=name)

        def call(fn=fn):
            out = fn(*leaves)
            out.backward(dout)
            return out

        try:
            record["compile_s"], out = timing.first_call(call, device)
            ref = refs[name.endswith("_sinks")]
            record["rel_err"] = float((out.detach().float() - ref).norm() / ref.norm())
            del out
            record["peak_mem_mb"] = timing.peak_extra_mb(call, device, grad_to_none=leaves)
            calls[name] = call
        except Exception as exc:  # a refused shape is a result (e.g. eager out of memory)
            record["error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:300]}"
            traceback.print_exc()
            if device.type == "cuda":
                torch.cuda.empty_cache()
        timing.clear_grads(leaves)
        records.append(record)
    timed = {name: functools.partial(_reset_then, calls[name], leaves) for name in calls}
    medians, laps = timing.interleaved_medians(timed, rounds, device)
    for record in records:
        if record["impl"] in medians:
            ms = medians[record["impl"]]
            record.update(ms=ms, ms_rounds=laps[record["impl"]],
                          tflops=flops(shape, window) / ms / 1e9)
    return records


def _reset_then(call, leaves):
    timing.clear_grads(leaves)
    return call()


def parse_args(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--seqlens", type=int, nargs="+", default=[2048, 4096, 8192])
    ap.add_argument("--total-tokens", type=int, default=16384)
    ap.add_argument("--heads", type=int, nargs=2, default=[64, 8], metavar=("HQ", "HKV"))
    ap.add_argument("--head-dim", type=int, default=64)
    ap.add_argument("--windows", nargs="+", default=["none", str(SLIDING)],
                    help="'none' (full causal) and/or a sliding window's keys per query")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out-dir", default="benchmarks/results")
    return ap.parse_args(argv)


def main(argv=None) -> dict:
    args = parse_args(argv)
    device = torch.device(args.device)
    windows = [None if w == "none" else int(w) for w in args.windows]
    head = runinfo.header("sinks", device, vars(args))
    path = runinfo.results_path(args.out_dir, head)
    records = []
    for seqlen in args.seqlens:
        shape = Shape("bf16", seqlen, max(1, args.total_tokens // seqlen), *args.heads,
                      args.head_dim, True)
        for window in windows:
            records += measure(shape, window, device, args.rounds, args.seed)
            runinfo.write_results(path, head, records)
            for r in records[-len(IMPLS):]:
                print(f"S {seqlen} window {window} {r['impl']}: {r.get('ms')} ms, "
                      f"{r.get('tflops')} TFLOP/s, {r.get('peak_mem_mb')} MiB "
                      f"{r.get('error', '')}", flush=True)
    print(f"-> {path}")
    return {**head, "records": records}


if __name__ == "__main__":
    main()

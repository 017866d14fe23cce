"""Attention kernel sweep: our Triton kernel (fix on and off) against SDPA's backends and FlexAttention.

Every implementation runs in the same process on the same inputs: for each shape, one set of
random ``q, k, v`` (flash-attn layout ``(B, S, H, D)``, the memory layout of a Transformers
model's projections; SDPA and FlexAttention get the ``(B, H, S, D)`` transposed views, as they do
inside Transformers) and one random ``dout``. Per implementation and mode:

- ``compile_s``: wall time of the first call (Triton autotuning, ``torch.compile``, cuDNN plans;
  with Triton's cache directory warm, loads instead: ``gpu_run.sh`` starts from an empty one);
- ``ms``: median time per call afterwards: the median of ``--rounds`` medians
  (``timing.median_ms``: CUDA events, L2 flushed), the rounds interleaved over all the shape's
  implementations and modes (``time_in_rounds``); ``ms_rounds``: the rounds' medians;
- ``tflops``: ``4 * B * Hq * S * S * D`` FLOPs, halved for causal, x2.5 for ``bwd`` and x3.5 for
  ``fwd_bwd`` (the FlashAttention convention), over ``ms``;
- ``peak_mem_mb``: the call's own peak allocation beyond its inputs (``timing.peak_extra_mb``);
- ``sm_clock_mhz``, ``power_w``, ``power_capped``, ...: the GPU's SM clock and power over the
  entry's timed rounds, and the share of readings with the power cap active
  (``gpu_clocks.summarize``; absent where ``nvidia-smi`` is not there);
- with ``--sustain-s T``: ``ms_sustained`` (``ms_sustained_rounds``, ``tflops_sustained``), each
  call run back to back for ``T`` seconds (``timing.sustained_ms``) in ``--sustain-rounds``
  rotated rounds after the ``ms`` rounds, and the clocks over those runs (keys prefixed
  ``sustained_``): the steady state at the card's power limit;
- ``rel_err``: ``|out - ref| / |ref|`` against an fp32 SDPA on the same inputs (a fast wrong
  kernel must not look good);
- ``error``: why an implementation refused the shape (then ``ms``/``tflops`` are null).

Modes: ``fwd`` (a training forward: inputs require grad), ``bwd`` (backward of a stored forward,
``retain_graph``), ``fwd_bwd`` (both). Gradients are reset to None before every timed call.

GQA: ours and FlexAttention index the shared KV heads; an SDPA backend first gets
``enable_gqa=True`` and, where it refuses that, ``repeat_interleave``d K/V inside the timed call
(what Transformers does for it); ``gqa_via`` says which one ran.

Run (GPU): ``PYTHONPATH=$PWD python -m benchmarks.bench_attention --quick --time-budget-s 270``.
CPU smoke run: ``--device cpu`` with tiny shapes (``--total-tokens 256 --hidden 64 ...``), which
times the reference backend and SDPA's math backend.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import statistics
import sys
import time
import traceback
import warnings
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable, Iterator

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from benchmarks import gpu_clocks, runinfo, timing

OUR_IMPLS = ("stable_flash", "stable_flash_nofix")
IMPLS_CUDA = (*OUR_IMPLS, "sdpa_cudnn", "sdpa_flash", "sdpa_efficient", "flex")
IMPLS_CPU = (*OUR_IMPLS, "sdpa_math")
MODES = ("fwd_bwd", "fwd", "bwd")
DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}
FLOP_FACTOR = {"fwd": 1.0, "bwd": 2.5, "fwd_bwd": 3.5}

# Presets, in priority order: a time budget cuts the tail of the list.
QUICK = dict(dtypes=["bf16"], seqlens=[4096, 2048, 8192, 1024], head_dims=[128, 64], modes=["fwd_bwd", "fwd"])
FULL = dict(
    dtypes=["bf16", "fp16"],
    seqlens=[4096, 2048, 8192, 1024, 16384, 512],
    head_dims=[128, 64, 256],
    modes=list(MODES),
)

AttnFn = Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]


@dataclass(frozen=True)
class Shape:
    """One attention problem; ``heads_q // heads_kv`` query heads share a KV head."""

    dtype: str
    seqlen: int
    batch: int
    heads_q: int
    heads_kv: int
    head_dim: int
    causal: bool


def attention_flops(shape: Shape, mode: str) -> float:
    """FLOPs by the FlashAttention convention (causal halves; backward counts 2.5 forwards)."""
    flops = 4.0 * shape.batch * shape.heads_q * shape.seqlen * shape.seqlen * shape.head_dim
    flops *= FLOP_FACTOR[mode]
    return flops / 2 if shape.causal else flops


def sweep_shapes(dtypes, seqlens, head_dims, causals, kv_groups, total_tokens, hidden) -> list[Shape]:
    """The sweep in priority order: ``batch = total_tokens // seqlen``, ``heads_q = hidden // D``."""
    shapes = []
    for dtype in dtypes:
        for seqlen in seqlens:
            for head_dim in head_dims:
                for causal in causals:
                    for group in kv_groups:
                        heads_q = hidden // head_dim
                        if seqlen > total_tokens or heads_q % group or heads_q == 0:
                            continue
                        shapes.append(
                            Shape(dtype, seqlen, total_tokens // seqlen, heads_q, heads_q // group, head_dim, causal)
                        )
    return shapes


def make_inputs(shape: Shape, device: torch.device, seed: int):
    """Fresh standard-normal ``q (B, S, Hq, D)``, ``k, v (B, S, Hk, D)`` (requiring grad), ``dout``."""
    gen = torch.Generator(device=device).manual_seed(seed)
    dtype = DTYPES[shape.dtype]

    def randn(heads: int, grad: bool) -> torch.Tensor:
        size = (shape.batch, shape.seqlen, heads, shape.head_dim)
        return torch.randn(size, generator=gen, device=device, dtype=dtype).requires_grad_(grad)

    q, k, v = randn(shape.heads_q, True), randn(shape.heads_kv, True), randn(shape.heads_kv, True)
    return q, k, v, randn(shape.heads_q, False)


def reference_output(q, k, v, causal: bool) -> torch.Tensor:
    """fp32 attention of the same inputs ``(B, S, Hq, D)``: SDPA EFFICIENT (CUDA) or MATH (CPU)."""
    group = q.shape[2] // k.shape[2]
    qt, kt, vt = (x.detach().float().transpose(1, 2) for x in (q, k, v))
    kt, vt = kt.repeat_interleave(group, dim=1), vt.repeat_interleave(group, dim=1)
    backends = [SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH] if q.is_cuda else [SDPBackend.MATH]
    with torch.no_grad(), sdpa_kernel(backends):
        return F.scaled_dot_product_attention(qt, kt, vt, is_causal=causal).transpose(1, 2)


_SDPA_BACKENDS = {
    "sdpa_cudnn": SDPBackend.CUDNN_ATTENTION,
    "sdpa_flash": SDPBackend.FLASH_ATTENTION,
    "sdpa_efficient": SDPBackend.EFFICIENT_ATTENTION,
    "sdpa_math": SDPBackend.MATH,
}


def _sdpa(backend: SDPBackend, causal: bool, gqa_via: str | None) -> AttnFn:
    def run(q, k, v):
        qt, kt, vt = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)  # (B, H, S, D)
        if gqa_via == "repeat_kv":
            group = qt.shape[1] // kt.shape[1]
            kt, vt = kt.repeat_interleave(group, dim=1), vt.repeat_interleave(group, dim=1)
        with sdpa_kernel([backend]):
            out = F.scaled_dot_product_attention(qt, kt, vt, is_causal=causal, enable_gqa=gqa_via == "enable_gqa")
        return out.transpose(1, 2)

    return run


_compiled_flex = None


def _flex(shape: Shape, device: torch.device) -> AttnFn:
    """``torch.compile(flex_attention)`` (static shapes); causal through a block mask built here,
    outside the timed call (a model builds it once per batch, not once per layer)."""
    global _compiled_flex
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

    if _compiled_flex is None:
        _compiled_flex = torch.compile(flex_attention, dynamic=False)
    block_mask = None
    if shape.causal:
        block_mask = create_block_mask(
            lambda b, h, q_idx, kv_idx: q_idx >= kv_idx, None, None, shape.seqlen, shape.seqlen, device=device
        )
    gqa = shape.heads_q != shape.heads_kv

    def run(q, k, v):
        out = _compiled_flex(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), block_mask=block_mask, enable_gqa=gqa)
        return out.transpose(1, 2)

    return run


def _ours(stabilize: bool, causal: bool, device: torch.device) -> AttnFn:
    import hf_stable_attn

    backend = "triton" if device.type == "cuda" else "reference"

    def run(q, k, v):
        return hf_stable_attn.flash_attn_func(q, k, v, causal=causal, stabilize=stabilize, backend=backend)

    return run


def candidates(name: str, shape: Shape, device: torch.device) -> Iterator[tuple[str | None, AttnFn]]:
    """``(gqa_via, fn)`` ways to run ``name`` on ``shape``, tried in order until one runs."""
    if name in OUR_IMPLS:
        yield None, _ours(name == "stable_flash", shape.causal, device)
    elif name == "flex":
        yield None, _flex(shape, device)
    elif name in _SDPA_BACKENDS:
        backend = _SDPA_BACKENDS[name]
        if shape.heads_q == shape.heads_kv:
            yield None, _sdpa(backend, shape.causal, None)
        else:
            yield "enable_gqa", _sdpa(backend, shape.causal, "enable_gqa")
            yield "repeat_kv", _sdpa(backend, shape.causal, "repeat_kv")
    else:
        raise ValueError(f"unknown impl {name!r}; known: {IMPLS_CUDA + IMPLS_CPU}")


@contextlib.contextmanager
def _explained_errors() -> Iterator[None]:
    """Re-raise an error with the warnings emitted before it (SDPA says why it refused there)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            yield
        except Exception as exc:
            reasons = "; ".join(dict.fromkeys(str(w.message).strip() for w in caught))
            raise RuntimeError(f"{type(exc).__name__}: {str(exc).strip()}" + (f" [{reasons}]" if reasons else "")) from exc


def _relative_error(out: torch.Tensor, ref: torch.Tensor) -> float:
    out = out.detach().float()
    return float((out - ref).norm() / ref.norm())


@dataclass
class Entry:
    """One implementation in one mode on one shape: its record, and (unless it refused the
    shape) the call to time with the tensors whose gradients are reset before each call."""

    record: dict
    call: Callable[[], torch.Tensor] | None = None
    grads: tuple[torch.Tensor, ...] | None = None


def prepare(fn: AttnFn, shape: Shape, mode: str, inputs, ref: torch.Tensor, device) -> Entry:
    """First call (``compile_s``), ``rel_err`` and ``peak_mem_mb`` of one implementation in one
    mode, and the call to time; raises when the implementation refuses the shape."""
    q, k, v, dout = inputs
    grads = (q, k, v) if mode != "fwd" else None
    with _explained_errors():
        stored = fn(q, k, v) if mode == "bwd" else None

        def call() -> torch.Tensor:
            if stored is not None:
                stored.backward(dout, retain_graph=True)
                return stored
            out = fn(q, k, v)
            if mode == "fwd_bwd":
                out.backward(dout)
            return out

        compile_s, out = timing.first_call(call, device)
        rel_err = _relative_error(out, ref)
        del out
        peak = timing.peak_extra_mb(call, device, grad_to_none=grads)
    timing.clear_grads((q, k, v))
    return Entry({"peak_mem_mb": peak, "compile_s": compile_s, "rel_err": rel_err}, call, grads)


def with_tiles(prepared: Callable[[], Entry]) -> Entry:
    """``prepared()`` with the tile config each of our kernels launched with in it added to the
    record as ``tile_fwd``, ``tile_dq``, ``tile_dkdv`` (BLOCK_M, BLOCK_N, warps, stages, TMA),
    so a shape's swing between runs can be traced to the tuner's picks; kernels the call did not
    launch (all of them on the reference backend's CPU runs) are left out. Where the call chose
    a config for a launch key new to this process, ``tuner_<part>`` says how, one item a key
    (``tuner_record``)."""
    from hf_stable_attn.kernels import LAUNCHES

    known = {}
    for part, launch in LAUNCHES.items():
        launch.last = None
        known[part] = set(launch.chosen)
    entry = prepared()
    for part, launch in LAUNCHES.items():
        if launch.last is None:
            continue
        entry.record[f"tile_{part}"] = list(launch.last)
        new_keys = [key for key in launch.chosen if key not in known[part]]
        if new_keys:
            entry.record[f"tuner_{part}"] = [tuner_record(launch, key) for key in new_keys]
    return entry


def tuner_record(launch, key) -> list | str:
    """How ``launch`` (a ``TiledLaunch``) chose its config for ``key``: where it timed the
    candidates in this process, their medians ``[[config, ms], ...]``, fastest first; else
    "disk cache" (a pick an earlier process saved; the key leaves out the batch, so it may have
    been timed at another batch size) or "one candidate"."""
    if launch.picked_by[key] != "timed":
        return launch.picked_by[key]
    return [[list(config), round(ms, 4)]
            for config, ms in sorted(launch.timings[key].items(), key=lambda item: item[1])]


def prepare_impl(name: str, shape: Shape, modes, inputs, ref, device) -> list[Entry]:
    """``name`` on ``shape``, prepared for each mode; a refusal becomes an ``error`` record."""
    base = {"impl": name, **asdict(shape)}
    entries = []
    chosen: tuple[str | None, AttnFn] | None = None
    for mode in modes:
        errors = []
        options = [chosen] if chosen else None
        try:
            options = options or list(candidates(name, shape, device))
        except Exception as exc:  # e.g. the package or the kernel is missing
            errors.append(f"{type(exc).__name__}: {exc}")
            options = []
        entry = None
        for gqa_via, fn in options:
            try:
                run = functools.partial(prepare, fn, shape, mode, inputs, ref, device)
                entry = with_tiles(run) if name in OUR_IMPLS else run()
                entry.record = {**base, "mode": mode, "gqa_via": gqa_via, **entry.record}
                chosen = (gqa_via, fn)
                break
            except Exception as exc:
                errors.append((f"{gqa_via}: " if gqa_via else "") + str(exc)[:600])
                if name not in _SDPA_BACKENDS:  # SDPA's refusals are expected; ours and flex's are bugs
                    print(f"--- {name} {mode} {shape}:", file=sys.stderr)
                    traceback.print_exc(limit=-6, file=sys.stderr)
                if device.type == "cuda":
                    torch.cuda.empty_cache()
        if entry is None:
            entry = Entry({**base, "mode": mode, "ms": None, "tflops": None, "peak_mem_mb": None,
                           "error": " | ".join(errors)})
        entries.append(entry)
    return entries


def time_in_rounds(entries: list[Entry], shape: Shape, device, args,
                   clocks: gpu_clocks.ClockSampler) -> None:
    """Fill in ``ms`` (the median of ``args.rounds`` medians), ``ms_rounds`` and ``tflops`` of
    the entries that ran, timed in ``timing.rotated_rounds`` (each round starts at another
    entry), and the GPU's clocks and power over each entry's rounds from ``clocks``; then, with
    ``args.sustain_s``, the same with ``_sustained`` (``timing.sustained_ms``)."""
    ready = [e for e in entries if e.call is not None]

    def median(e: Entry) -> float:
        return timing.median_ms(e.call, device, grad_to_none=e.grads, warmup_ms=args.warmup_ms,
                                rep_ms=args.rep_ms)

    def sustained(e: Entry) -> float:
        return timing.sustained_ms(e.call, device, args.sustain_s, grad_to_none=e.grads)

    timings = [("", median, args.rounds)]
    if args.sustain_s > 0:
        timings.append(("_sustained", sustained, args.sustain_rounds))
    for suffix, measure, rounds in timings:
        spans: list[list[tuple[float, float]]] = [[] for _ in ready]

        def timer(i: int) -> float:
            start = time.time()
            ms = measure(ready[i])
            spans[i].append((start, time.time()))
            timing.clear_grads(ready[i].grads)
            return ms

        laps = timing.rotated_rounds([functools.partial(timer, i) for i in range(len(ready))],
                                     rounds)
        for e, ms, entry_spans in zip(ready, laps, spans):
            median_of_rounds = statistics.median(ms)
            e.record[f"ms{suffix}"] = median_of_rounds
            e.record[f"ms{suffix}_rounds"] = ms
            e.record[f"tflops{suffix}"] = (attention_flops(shape, e.record["mode"])
                                           / (median_of_rounds * 1e-3) / 1e12)
            prefix = suffix.lstrip("_") + "_" if suffix else ""
            e.record.update({prefix + k: v for k, v in (clocks.window(entry_spans) or {}).items()})


def _configure_dynamo() -> None:
    """One compiled FlexAttention serves every shape: let it recompile per shape, never fall back."""
    import torch._dynamo

    torch._dynamo.config.cache_size_limit = 1024
    torch._dynamo.config.accumulated_cache_size_limit = 4096
    # The bwd mode re-runs the backward of one stored forward (retain_graph), which a compiled
    # backward with donated buffers refuses; FlexAttention's bwd column needs them off.
    torch._functorch.config.donated_buffer = False


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--quick", action="store_true", help="bf16, D 128/64, S 4k/2k/8k/1k, fwd_bwd+fwd")
    p.add_argument("--dtypes", nargs="+", choices=sorted(DTYPES))
    p.add_argument("--seqlens", nargs="+", type=int)
    p.add_argument("--head-dims", nargs="+", type=int)
    p.add_argument("--causal", nargs="+", choices=["true", "false"], default=["true", "false"])
    p.add_argument("--kv-groups", nargs="+", type=int, default=[1, 8], help="query heads per KV head (1 = MHA)")
    p.add_argument("--modes", nargs="+", choices=MODES)
    p.add_argument("--impls", nargs="+", help="default: all peers for the device")
    p.add_argument("--total-tokens", type=int, default=16384, help="batch * seqlen")
    p.add_argument("--hidden", type=int, default=2048, help="heads_q * head_dim")
    p.add_argument("--time-budget-s", type=float, help="start no shape that would end past this")
    p.add_argument("--warmup-ms", type=float, default=25.0)
    p.add_argument("--rep-ms", type=float, default=100.0, help="timing per call and round")
    p.add_argument("--rounds", type=int, default=3, help="timings per call, interleaved with the other calls")
    p.add_argument("--sustain-s", type=float, default=0.0,
                   help="also time each call back to back for this many seconds (0: not)")
    p.add_argument("--sustain-rounds", type=int, default=2, help="rounds of --sustain-s")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out-dir", default="benchmarks/results")
    p.add_argument("--out", help="explicit output path (default <out-dir>/<gpu>-<date>-attention.json)")
    args = p.parse_args(argv)
    preset = QUICK if args.quick else FULL
    for key, value in preset.items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    if args.impls is None:
        args.impls = list(IMPLS_CUDA if args.device.startswith("cuda") else IMPLS_CPU)
    if args.rounds < 1:
        p.error(f"--rounds must be at least 1, got {args.rounds}")
    return args


def main(argv=None) -> dict:
    """Run the sweep, write the JSON after every shape, and return what was written."""
    args = parse_args(argv)
    device = torch.device(args.device)
    _configure_dynamo()
    budget = timing.Budget(args.time_budget_s)
    shapes = sweep_shapes(
        args.dtypes, args.seqlens, args.head_dims, [c == "true" for c in args.causal], args.kv_groups,
        args.total_tokens, args.hidden,
    )
    head = runinfo.header("attention", device, {k: v for k, v in vars(args).items() if k != "out"})
    path = runinfo.results_path(args.out_dir, head) if args.out is None else Path(args.out)
    records: list[dict] = []
    done = 0

    def save() -> dict:
        extra = {"elapsed_s": round(budget.elapsed(), 1), "not_run": [asdict(s) for s in shapes[done:]]}
        runinfo.write_results(path, head, records, **extra)
        return {**head, **extra, "records": records, "path": str(path)}

    with gpu_clocks.ClockSampler(device) as clocks:
        for index, shape in enumerate(shapes):
            if done and not budget.fits(budget.elapsed() / done):
                break
            inputs = make_inputs(shape, device, args.seed + index)
            ref = reference_output(*inputs[:3], shape.causal)
            entries = [e for name in args.impls
                       for e in prepare_impl(name, shape, args.modes, inputs, ref, device)]
            time_in_rounds(entries, shape, device, args, clocks)
            records += [e.record for e in entries]
            del entries, inputs, ref
            done += 1
            save()  # after every shape, so a crash keeps what was measured
            print(f"[{budget.elapsed():6.0f}s] {done}/{len(shapes)} {shape}", file=sys.stderr,
                  flush=True)
    result = save()
    failed = sum(1 for r in records if r.get("error"))
    print(f"attention: {len(records)} records ({failed} refused), {done}/{len(shapes)} shapes "
          f"in {budget.elapsed():.0f}s -> {path}")
    return result


if __name__ == "__main__":
    main()

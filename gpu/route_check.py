"""Which route is faster at 2048 and 4096 tokens (H100/H200): the forward with the fix through
the Gluon kernel (its table's config, 64-key tiles, and two consumers on 128-row tiles; each
with one program per tile and persistent) or the tuned Triton kernel, MHA and GQA 8:1; the GQA
backward with each group split (docs/kernel_notes.md, session 18); and (``--kinds routes``) the
backward with each pairing of the Gluon and Triton dQ and dK/dV kernels, MHA and GQA 8:1.
With ``--fix-off-too`` every forward route also runs without the fix in the same rounds (names
ending in ``nofix``), which gives each route's cost of the fix. With ``--whole-step`` each forward
variant is followed by the shipped backward and each backward variant follows the shipped forward
(the forward + backward a training step runs), and ``--only REGEX`` keeps the variants whose
names it matches. ``--heads-per-kv`` sets the query heads per KV head of every kind's shapes
(by default MHA and GQA 8:1 for the forward and the pairings, 8:1 for the group splits).

Run: ``PYTHONPATH=$PWD python gpu/route_check.py --out routes.json [--budget-s 300]
[--kinds fwd bwd routes] [--seqlens 2048 4096] [--head-dims 64 128] [--causal true false]
[--fix-off-too] [--sustain-s T] [--whole-step] [--only REGEX] [--heads-per-kv 1 4 8]
[--batch 4]``.
Timing: ``do_bench`` medians over ``--rounds`` rounds, each starting at another variant of the
shape (``benchmarks.timing.interleaved_medians``), B ``--batch`` (4), H 16 at D128 and 32 at D64
(GQA 8:1 for the backward), bf16, after one untimed call each (which compiles and, for the Triton
kernel, tunes). With ``--sustain-s T`` each round runs a variant back to back for ``T`` seconds
instead (``timing.sustained_ms``): the card stays at its power limit, as in training, where
``do_bench``'s short windows leave it headroom (docs/kernel_notes.md, session 66).
"""

from __future__ import annotations

import argparse
import contextlib
import re
import time

import torch

from benchmarks.bench_attention import Shape, attention_flops
from gpu.timed_checks import rates, time_within_budget
from hf_stable_attn.kernels import clear_plans, flash_attn_bwd, flash_attn_fwd
from hf_stable_attn.kernels import flash_bwd, flash_bwd_hopper, flash_fwd_hopper
from hf_stable_attn.shift_rule import shift_params
from hf_stable_attn.testing import fix_kwargs, launch_kwargs


def draw(batch, s, h, d, seed):
    g = torch.Generator(device="cuda").manual_seed(seed)
    return torch.randn(batch, s, h, d, device="cuda", dtype=torch.bfloat16, generator=g)


@contextlib.contextmanager
def patched(module, **values):
    """``module``'s attributes set to ``values`` inside the block and restored after, with the
    launchers' plans cleared on entry and exit (a plan keeps the route, tiles and group split
    of the call that made it, ``kernels._prepared``)."""
    saved = {name: getattr(module, name) for name in values}
    for name, value in values.items():
        setattr(module, name, value)
    clear_plans()
    try:
        yield
    finally:
        for name, value in saved.items():
            setattr(module, name, value)
        clear_plans()


def forward_variants(q, k, v, kw, fix, suffix=""):
    """name + ``suffix`` -> forward call with the fix's keywords ``fix``: the Gluon kernel at its
    table config, at 64-key tiles and with two consumers (128-row tiles, whose 64-row halves see
    the same causal key tiles; session 34's 232 registers), each with one program per tile and
    persistent (one per SM), and the Triton kernel (the head dim's Gluon routes switched off,
    with the fix or without)."""
    d = q.shape[-1]
    m = flash_fwd_hopper
    table = m.HOPPER_CONFIGS[d]
    keys = [(d, bool(kw["causal"]), stacked, fixed) for stacked in (False, True)
            for fixed in (False, True)]

    def run(config, gluon, persistent=False):
        """With ``gluon`` the Gluon kernel at ``config`` from one full tile (whatever ``FASTER``'s
        length rule says), persistent or not (whatever ``PERSISTENT_BELOW`` says), else the
        Triton kernel."""
        rest = {kk: rows for kk, rows in m.FASTER.items() if kk[0] != d}
        mine = {(d, stabilize, grouped): (128, 128) for stabilize in (False, True)
                for grouped in (False, True)}
        below = {kk: rows for kk, rows in m.PERSISTENT_BELOW.items() if kk not in keys}
        with patched(m, HOPPER_CONFIGS={**m.HOPPER_CONFIGS, d: config},
                     FASTER={**rest, **mine} if gluon else rest,
                     PERSISTENT_BELOW={**below, **dict.fromkeys(keys, 1 << 30)} if persistent
                     else below):
            return flash_attn_fwd(q, k, v, **kw, **fix)
    configs = [table, (64, *table[1:]), (table[0], table[1], 232, 2, table[4])]
    variants = {f"gluon {c}{' persistent' if p else ''}{suffix}":
                (lambda c=c, p=p: run(c, True, p))
                for c in dict.fromkeys(configs) for p in (False, True)}
    return {**variants, f"triton{suffix}": lambda: run(table, False)}


def backward_variants(dout, q, k, v, out, lse, kw):
    """name -> backward call with the dK/dV's group split forced to each divisor of the group."""
    group = q.shape[2] // k.shape[2]

    def run(splits):
        with patched(flash_bwd, group_splits=lambda *args: splits):
            return flash_attn_bwd(dout, q, k, v, out, lse, **kw)
    return {f"splits {n}": (lambda n=n: run(n)) for n in range(1, group + 1) if group % n == 0}


def backward_routes(dout, q, k, v, out, lse, kw, causal):
    """name -> backward call with the dQ and the dK/dV each forced to the Gluon or the Triton
    kernel (``flash_bwd_hopper``'s route tables patched for this head dim and mask)."""
    m = flash_bwd_hopper
    key = (q.shape[-1], bool(causal))
    both = {(*key, grouped): 0 for grouped in (False, True)}  # FASTER's keys for this call

    def run(gluon_dq, gluon_dkdv):
        rest = {kk: rows for kk, rows in m.FASTER.items() if kk[:2] != key}
        with patched(m, DQ_FASTER=(m.DQ_FASTER | {key}) if gluon_dq else (m.DQ_FASTER - {key}),
                     FASTER={**rest, **both} if gluon_dkdv else rest):
            return flash_attn_bwd(dout, q, k, v, out, lse, **kw)
    return {f"dq {'gluon' if a else 'triton'}, dkdv {'gluon' if b else 'triton'}":
            (lambda a=a, b=b: run(a, b)) for a in (False, True) for b in (False, True)}


# KV heads of each kind's shapes, from the query heads (None: the kind's default, ``measure``).
VARIED_HEADS = {"fwd": lambda hq: (None, hq // 8), "bwd": lambda hq: (None,),
                "routes": lambda hq: (None, hq)}


def kv_heads(kind: str, heads_q: int, heads_per_kv=None) -> tuple:
    """``measure``'s KV head counts for ``kind``: ``heads_q // n`` for each ``n`` of
    ``heads_per_kv``, else ``VARIED_HEADS``'."""
    if heads_per_kv:
        return tuple(heads_q // n for n in heads_per_kv)
    return VARIED_HEADS[kind](heads_q)


def query_heads(head_dim: int) -> int:
    """Query heads of the checked shapes: 16 at D128, 32 at D64 (model width 2048)."""
    return 16 if head_dim == 128 else 32


def causal_inputs(case: tuple[int, int, int], tokens: int = 16384):
    """Inputs of a causal case (head dim, query heads per KV head, sequence length) with
    ``tokens`` tokens a batch (the sweeps' 16k by default), bf16, the fix on: ``(shape, q, k, v,
    dout, kw, fix)``, ``shape`` a ``bench_attention.Shape``, q and dout (B, S, Hq, D), k and v
    (B, S, Hk, D), ``kw`` and ``fix`` the launchers' keywords."""
    d, per_kv, s = case
    hq = query_heads(d)
    shape = Shape("bf16", s, tokens // s, hq, hq // per_kv, d, True)
    heads = ((hq, 1), (shape.heads_kv, 2), (shape.heads_kv, 3), (hq, 4))
    q, k, v, dout = (draw(shape.batch, s, h, d, seed) for h, seed in heads)
    return (shape, q, k, v, dout, launch_kwargs(s, s, d, causal=True),
            fix_kwargs(shift_params(torch.bfloat16)))


def record_shape(shape: Shape) -> dict:
    """``shape`` as the checks' records name one (bf16 is implied)."""
    return dict(batch=shape.batch, seqlen=shape.seqlen, heads_q=shape.heads_q,
                heads_kv=shape.heads_kv, head_dim=shape.head_dim, causal=shape.causal)


def whole_steps(fns, kind, dout, q, k, v, kw, fix):
    """``fns`` as forward + backward steps: a forward variant (returning ``(out, lse)``) followed
    by the shipped backward, or (``kind`` ``bwd`` or ``routes``) a backward variant after the
    shipped forward."""
    if kind == "fwd":
        return {name: (lambda f=f: flash_attn_bwd(dout, q, k, v, *f(), **kw))
                for name, f in fns.items()}
    return {name: (lambda f=f: (flash_attn_fwd(q, k, v, **kw, **fix), f()))
            for name, f in fns.items()}


def measure(kind, s, d, causal, heads_kv, rounds, fix_off_too=False, sustain_s=0.0,
            whole_step=False, only=None, batch=4):
    """One shape's variants of ``kind`` timed; ``heads_kv`` None: MHA forward, GQA 8:1 backward;
    ``fix_off_too``: the forward's routes without the fix as well; ``sustain_s`` > 0: each
    variant run back to back for that long a round (``timing.sustained_ms``) instead of
    ``do_bench``; ``whole_step``: each variant timed in a forward + backward (``whole_steps``);
    ``only``: a regular expression the kept variants' names match; ``batch`` sequences a call."""
    hq = query_heads(d)
    hk = heads_kv or (hq if kind == "fwd" else hq // 8)
    shape = Shape("bf16", s, batch, hq, hk, d, causal)
    q, k, v, dout = draw(batch, s, hq, d, 1), draw(batch, s, hk, d, 2), draw(batch, s, hk, d, 3), \
        draw(batch, s, hq, d, 4)
    kw = launch_kwargs(s, s, d, causal=causal)
    fix = fix_kwargs(shift_params(torch.bfloat16))
    if kind == "fwd":
        fns = forward_variants(q, k, v, kw, fix)
        if fix_off_too:
            off = fix_kwargs(shift_params(torch.bfloat16, stabilize=False))
            fns.update(forward_variants(q, k, v, kw, off, suffix=" nofix"))
    else:
        out, lse = flash_attn_fwd(q, k, v, **kw, **fix)
        fns = (backward_routes(dout, q, k, v, out, lse, kw, causal) if kind == "routes"
               else backward_variants(dout, q, k, v, out, lse, kw))
    if only:
        fns = {name: f for name, f in fns.items() if re.search(only, name)}
    if whole_step:
        fns = whole_steps(fns, kind, dout, q, k, v, kw, fix)
    mode = "fwd_bwd" if whole_step else ("fwd" if kind == "fwd" else "bwd")
    return dict(kind=kind, whole_step=whole_step, shape=record_shape(shape),
                **rates(fns, rounds, q.device, attention_flops(shape, mode), sustain_s))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--budget-s", type=float, default=300)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--kinds", nargs="+", default=["fwd", "bwd"],
                    choices=["fwd", "bwd", "routes"])
    ap.add_argument("--seqlens", nargs="+", type=int, default=[2048, 4096])
    ap.add_argument("--head-dims", nargs="+", type=int, default=[64, 128])
    ap.add_argument("--causal", nargs="+", default=["true", "false"], choices=["true", "false"])
    ap.add_argument("--fix-off-too", action="store_true",
                    help="time every forward route without the fix too")
    ap.add_argument("--sustain-s", type=float, default=0.0,
                    help="time each variant back to back for this long a round (the card's "
                         "steady state at its power limit) instead of do_bench")
    ap.add_argument("--whole-step", action="store_true",
                    help="time each variant in a forward + backward (whole_steps)")
    ap.add_argument("--only", help="keep the variants whose names match this regular expression")
    ap.add_argument("--heads-per-kv", nargs="+", type=int,
                    help="query heads per KV head of the shapes (default: VARIED_HEADS)")
    ap.add_argument("--batch", type=int, default=4, help="sequences a call (default 4)")
    args = ap.parse_args()
    t0 = time.time()
    result = dict(gpu=torch.cuda.get_device_name(), torch=torch.__version__,
                  timing=f"back to back {args.sustain_s} s" if args.sustain_s > 0 else "do_bench",
                  timings=[])
    plan = [(kind, s, d, causal == "true", heads_kv) for kind in args.kinds
            for s in args.seqlens for d in args.head_dims for causal in args.causal
            for heads_kv in kv_heads(kind, query_heads(d), args.heads_per_kv)]
    time_within_budget(plan, lambda item: measure(*item, args.rounds, args.fix_off_too,
                                                  args.sustain_s, args.whole_step, args.only,
                                                  args.batch),
                       result, args.out, args.budget_s, t0, ("kind", "shape", "tflops"))


if __name__ == "__main__":
    main()

"""Does a Triton forward tile config outside the tuner's pick lead in the forward + backward a
training step runs, against the shipped forward route? (H100/H200.)

Per causal case (head dim, query heads per KV head, sequence length; 16k tokens a batch, bf16,
the fix on) this times, back to back for ``--sustain-s`` seconds a round and ``--rounds``
rounds in rotated order (``timed_checks.rates``):

- ``shipped``: the forward route the package takes (a Gluon launch or the tuned Triton forward);
- ``triton pick``: the Triton forward at the tuner's pick (the head dim's Gluon routes off);
- ``triton CFG`` for each ``--configs`` entry: the Triton forward with its table cut to CFG.

Every variant's forward is followed by the same backward: the dQ's and dK/dV's tables cut to the
picks of the shipped step. Each record names the picks and each variant's largest output
difference from the shipped forward's. Plans are off (``_prepared``), so each call reads the
patched tables.

Run: ``PYTHONPATH=$PWD python gpu/forward_tile_ab.py --out ab.json [--configs 64:128:4:2:1]
[--cases 64:1:2048 64:1:4096] [--rounds 3] [--sustain-s 1] [--budget-s 300]`` (config: BLOCK_M,
BLOCK_N, warps, stages, TMA 0/1[, register cap]; case: head dim, query heads per KV head,
sequence length).
"""

from __future__ import annotations

import argparse
import contextlib
import time

from benchmarks.bench_attention import attention_flops
from gpu.route_check import causal_inputs, patched, record_shape
from gpu.timed_checks import add_case_arguments, rates, time_cases
from hf_stable_attn.kernels import _prepared, flash_attn_bwd, flash_attn_fwd
from hf_stable_attn.kernels import flash_bwd, flash_fwd, flash_fwd_hopper


def parse_config(text: str) -> tuple:
    """``"64:128:4:2:1"`` -> ``(64, 128, 4, 2, True)``; a sixth field is the register cap."""
    m, n, warps, stages, tma, *cap = (int(x) for x in text.split(":"))
    return (m, n, warps, stages, bool(tma), *cap)


@contextlib.contextmanager
def forward_route(head_dim: int, config: tuple | None, gluon: bool):
    """Inside the block the forward of ``head_dim`` takes the Gluon routes only with ``gluon``,
    and the Triton forward's table is cut to ``config`` (None: the table and the tuner's picks
    as they are)."""
    m, launch = flash_fwd_hopper, flash_fwd._fwd_launch
    faster = m.FASTER if gluon else {key: rows for key, rows in m.FASTER.items()
                                     if key[0] != head_dim}
    with contextlib.ExitStack() as scope:
        scope.enter_context(patched(m, FASTER=faster))
        if config is not None:
            scope.enter_context(patched(launch, table=dict.fromkeys(launch.table, [config]),
                                        chosen={}))
        yield


def step(q, k, v, dout, kw, fix, config=None, gluon=True):
    """Forward (routed as ``forward_route`` says) + backward: (out, dq, dk, dv)."""
    with forward_route(q.shape[-1], config, gluon):
        out, lse = flash_attn_fwd(q, k, v, **kw, **fix)
    return (out, *flash_attn_bwd(dout, q, k, v, out, lse, **kw))


def measure(case: tuple[int, int, int], configs: list[tuple], rounds: int, sustain_s: float):
    """One causal shape's variants timed; the launchers' tables restored after."""
    shape, q, k, v, dout, kw, fix = causal_inputs(case)
    backward = (flash_bwd._dq_launch, flash_bwd._dkdv_launch)
    for launch in (flash_fwd._fwd_launch, *backward):
        launch.last = None
    with contextlib.ExitStack() as scope:
        reference = step(q, k, v, dout, kw, fix)  # tunes
        tiles = {"shipped fwd": flash_fwd._fwd_launch.last}
        flash_fwd._fwd_launch.last = None
        for name, launch in zip(("dq", "dkdv"), backward):
            tiles[name] = launch.last
            if launch.last is not None:  # each backward launcher's table cut to its pick
                scope.enter_context(patched(launch, table=dict.fromkeys(launch.table,
                                                                        [launch.last])))
        step(q, k, v, dout, kw, fix, gluon=False)  # tunes the Triton forward
        tiles["triton pick"] = flash_fwd._fwd_launch.last
        fns = {"shipped": lambda: step(q, k, v, dout, kw, fix),
               "triton pick": lambda: step(q, k, v, dout, kw, fix, gluon=False)}
        fns.update({f"triton {c}": (lambda c=c: step(q, k, v, dout, kw, fix, c, False))
                    for c in configs})
        out_diff = {name: float((fn()[0].float() - reference[0].float()).abs().max())
                    for name, fn in fns.items()}
        record = rates(fns, rounds, q.device, attention_flops(shape, "fwd_bwd"), sustain_s)
    return dict(shape=record_shape(shape), tiles=tiles, out_diff=out_diff, **record)


def main() -> None:
    ap = argparse.ArgumentParser()
    add_case_arguments(ap, ["64:1:2048", "64:1:4096"], budget_s=300)
    ap.add_argument("--configs", nargs="+", default=["64:128:4:2:1"])
    args = ap.parse_args()
    t0 = time.time()
    _prepared.ENABLED = False
    configs = [parse_config(c) for c in args.configs]
    time_cases(args, lambda case: measure(case, configs, args.rounds, args.sustain_s),
               ("shape", "tiles", "out_diff", "tflops"), t0)


if __name__ == "__main__":
    main()

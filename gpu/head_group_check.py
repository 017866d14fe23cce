"""Does the causal launch order's grouping (``_common.scheduled_tile``: about
``GROUP_PROGRAMS`` programs, at least 8 columns, run their heaviest tiles first together) move a
training step? (H100/H200.)

``scheduled_tile`` was sized in session 14 (v17a), when the Triton forward ran one or two programs
per SM; since the register caps (v57a) the D64 forward runs four or five, and the dispatch model
(``benchmarks/launch_order_sim.py``) then puts groups of 8 columns several percent above an even
split where larger groups come within 1-2%. Per shape this times forward + backward with the
Triton forward's, dQ's and dK/dV's ``GROUP_PROGRAMS`` (``_common.FWD_GROUP_PROGRAMS``,
``DQ_GROUP_PROGRAMS``, ``DKDV_GROUP_PROGRAMS``) and the Gluon dK/dV's
(``flash_bwd_hopper.GROUP_PROGRAMS``, the shipped value where a setting names three) set to
each setting of ``--settings`` (0: groups of 8 columns, and the dK/dVs' grid order), the tiles
pinned to the tuner's picks for the first setting, back to back for ``--sustain-s`` seconds a
round (``timing.sustained_ms``), ``--rounds`` rounds in rotated order. Every setting's outputs and
gradients must equal the first one's bit for bit (the grouping only reorders the programs).
Plans are off (``_prepared``), so each call reads the flags.

Run: ``PYTHONPATH=$PWD python gpu/head_group_check.py --out groups.json [--settings 0:0:0
1024:512:512:512] [--cases 64:1:2048 64:8:2048 128:1:4096] [--rounds 3] [--sustain-s 1]
[--budget-s 400]`` (case: head dim, query heads per KV head, sequence length; causal, bf16, 16k
tokens a batch).
"""

from __future__ import annotations

import argparse
import contextlib
import time

import torch

from benchmarks.bench_attention import attention_flops
from gpu.route_check import causal_inputs, patched, record_shape
from gpu.timed_checks import add_case_arguments, rates, time_cases
from hf_stable_attn.kernels import _common, _prepared, flash_attn_bwd, flash_attn_fwd
from hf_stable_attn.kernels import flash_bwd, flash_bwd_hopper, flash_fwd


# (module, attribute) of each flag a setting sets, in order.
FLAGS = ((_common, "FWD_GROUP_PROGRAMS"), (_common, "DQ_GROUP_PROGRAMS"),
         (_common, "DKDV_GROUP_PROGRAMS"), (flash_bwd_hopper, "GROUP_PROGRAMS"))


def step(q, k, v, dout, kw, fix, setting: tuple[int, int, int, int]):
    """Forward + backward with the Triton forward's, dQ's and dK/dV's and the Gluon dK/dV's
    ``GROUP_PROGRAMS`` ``setting`` (``FLAGS``): (out, lse, dq, dk, dv)."""
    for (module, name), value in zip(FLAGS, setting):
        setattr(module, name, value)
    out, lse = flash_attn_fwd(q, k, v, **kw, **fix)
    return (out, lse, *flash_attn_bwd(dout, q, k, v, out, lse, **kw))


def measure(case: tuple[int, int, int], settings: list[tuple[int, int, int, int]], rounds: int,
            sustain_s: float):
    """One causal shape's ``settings`` timed, and checked against the first; the flags are
    restored after."""
    shape, q, k, v, dout, kw, fix = causal_inputs(case)
    launches = (flash_fwd._fwd_launch, flash_bwd._dq_launch, flash_bwd._dkdv_launch)
    with contextlib.ExitStack() as scope:
        for module, name in FLAGS:
            scope.enter_context(patched(module, **{name: getattr(module, name)}))
        reference = step(q, k, v, dout, kw, fix, settings[0])  # tunes
        tiles = dict(zip(("fwd", "dq", "dkdv"), (launch.last for launch in launches)))
        for launch in launches:  # each launcher's table cut to its pick
            if launch.last is not None:
                pick = [launch.last]
                scope.enter_context(patched(launch, table=dict.fromkeys(launch.table, pick)))
        mismatched = [f"{setting}" for setting in settings if not all(
            torch.equal(a, b) for a, b in zip(step(q, k, v, dout, kw, fix, setting), reference))]
        fns = {"fwd {}, dq {}, dkdv {}, gluon dkdv {}".format(*p):
               (lambda p=p: step(q, k, v, dout, kw, fix, p)) for p in settings}
        record = rates(fns, rounds, q.device, attention_flops(shape, "fwd_bwd"), sustain_s)
    return dict(shape=record_shape(shape), tiles=tiles, mismatched=mismatched, **record)


def main() -> None:
    ap = argparse.ArgumentParser()
    add_case_arguments(ap, ["64:1:2048", "64:8:2048", "64:1:4096"], budget_s=400)
    ap.add_argument("--settings", nargs="+", default=["0:0:0", "1024:512:512"],
                    help="forward:dQ:dK/dV[:Gluon dK/dV] GROUP_PROGRAMS (0: groups of 8 "
                         "columns, the dK/dVs' grid order), the first tuned")
    args = ap.parse_args()
    t0 = time.time()
    _prepared.ENABLED = False
    settings = [(*(int(x) for x in p.split(":")), flash_bwd_hopper.GROUP_PROGRAMS)[:4]
                for p in args.settings]
    time_cases(args, lambda case: measure(case, settings, args.rounds, args.sustain_s),
               ("shape", "tiles", "mismatched", "tflops"), t0)


if __name__ == "__main__":
    main()

"""How often the Gluon dK/dV kernel (``flash_bwd_hopper.dkdv_hopper``, called directly, routed
or not) gives other bits on a repeated call with the same inputs; with ``--base``, the same for
an older copy of ``kernels/flash_bwd_hopper.py`` on the same inputs, whether the two agree bit
for bit, and both timed (H100/H200).

Run: ``PYTHONPATH=$PWD python gpu/dkdv_determinism.py --out r.json [--repeats 20]
[--base old_flash_bwd_hopper.py]`` (``git show REV:kernels/flash_bwd_hopper.py > old.py``).
Per shape (bf16, 16384 tokens, hidden 2048; ``S:D:group:causal``): the forward's lse, delta =
rowsum(dO * O), ``flash_bwd``'s group split, then ``--repeats`` calls compared with the first
(``torch.equal``): how many differ, the largest difference, and whether the pair is routed
(``FASTER``). Timing: ``interleaved_medians`` of the kernel alone, 3 rounds. ``--splits`` and
``--config`` (STAGES:REGS:TILE_M) override the group split and the table's config, to narrow down
which part of a call a difference needs.
"""

from __future__ import annotations

import argparse
import json

import torch

from gpu.hopper_bwd_check import inputs
from gpu.hopper_fwd_ab import load_base
from gpu.timed_checks import rates
from hf_stable_attn.kernels import flash_attn_fwd, flash_bwd, flash_bwd_hopper
from hf_stable_attn.kernels._common import tma_ready
from hf_stable_attn.shift_rule import shift_params
from hf_stable_attn.testing import fix_kwargs, launch_kwargs

TOKENS, HIDDEN = 16384, 2048


def kernel_calls(modules: dict, seqlen: int, d: int, group: int, causal: bool,
                 splits: int | None = None, config: tuple | None = None):
    """name -> a call of that module's ``dkdv_hopper`` on one shape's inputs (at ``config``),
    returning (dK, dV) partials; and the group split (``flash_bwd``'s unless ``splits``)."""
    batch, hq = TOKENS // seqlen, HIDDEN // d
    hk = hq // group
    q, k, v, dout = inputs(batch, seqlen, seqlen, hq, hk, d, torch.bfloat16, seqlen + d + group)
    assert tma_ready(seqlen, q, k, v, dout)
    out, lse = flash_attn_fwd(q, k, v, **launch_kwargs(seqlen, seqlen, d, causal=causal),
                              **fix_kwargs(shift_params(torch.bfloat16)))
    delta = (dout.float() * out.float()).sum(-1).transpose(1, 2).contiguous()
    if splits is None:
        splits = flash_bwd.dkdv_splits(seqlen, batch, hk, group, q.device, causal, gluon=True)
    dtype = torch.float32 if splits > 1 else k.dtype

    def call(module):
        def run():
            dk, dv = (torch.empty((splits, *k.shape), device="cuda", dtype=dtype)
                      for _ in range(2))
            module.dkdv_hopper(q, k, v, dout, lse, delta, dk, dv, softmax_scale=d ** -0.5,
                               causal=causal, config=config)
            return dk, dv
        return run

    flops = 8.0 * batch * hq * seqlen * seqlen * d / (2 if causal else 1)
    return {name: call(module) for name, module in modules.items()}, splits, flops


def repeats(call, n: int) -> dict:
    first = call()
    differ, largest = 0, 0.0
    for _ in range(n):
        again = call()
        if not all(torch.equal(a, b) for a, b in zip(again, first)):
            differ += 1
            largest = max(largest, max(float((a - b).abs().max()) for a, b in zip(again, first)))
    return dict(differ=differ, largest_diff=largest, first=first)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--base")
    ap.add_argument("--splits", type=int)
    ap.add_argument("--config", help="STAGES:REGS:TILE_M")
    ap.add_argument("--shapes", nargs="+", default=[
        "2048:64:8:1", "4096:64:8:1", "4096:64:1:1", "2048:128:8:1", "4096:128:8:1",
        "8192:128:8:1", "4096:128:1:1", "4096:128:1:0", "4096:64:1:0", "4096:64:8:0"])
    args = ap.parse_args()
    modules = {"package": flash_bwd_hopper}
    if args.base:
        modules["base"] = load_base(args.base)
    result = dict(gpu=torch.cuda.get_device_name(), torch=torch.__version__, runs=[])
    for text in args.shapes:
        s, d, g, c = (int(x) for x in text.split(":"))
        config = tuple(int(x) for x in args.config.split(":")) if args.config else None
        calls, splits, flops = kernel_calls(modules, s, d, g, bool(c), args.splits, config)
        record = dict(seqlen=s, head_dim=d, group=g, causal=bool(c), splits=splits, config=config,
                      routed=flash_bwd_hopper.dkdv_faster(d, bool(c), g > 1, s),
                      repeats=args.repeats)
        firsts = {}
        for name, call in calls.items():
            rep = repeats(call, args.repeats)
            firsts[name] = rep.pop("first")
            record[name] = rep
        if args.base:
            record["equal"] = all(torch.equal(a, b)
                                  for a, b in zip(firsts["package"], firsts["base"]))
            timing = rates(calls, 3, torch.device("cuda"), flops)
            record.update(timing, package_vs_base=timing["ms"]["base"] / timing["ms"]["package"])
        result["runs"].append(record)
        print(json.dumps({k: v for k, v in record.items() if k not in ("ms_rounds", "tflops")}),
              flush=True)
        with open(args.out, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()

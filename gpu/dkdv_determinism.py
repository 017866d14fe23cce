"""How often the Gluon dK/dV kernel (``flash_bwd_hopper.dkdv_hopper``, called directly, routed
or not) gives other bits on a repeated call with the same inputs (H100/H200).

Run: ``PYTHONPATH=$PWD python gpu/dkdv_determinism.py --out r.json [--repeats 20]``.
Per shape (bf16, 16384 tokens, hidden 2048; ``S:D:group:causal``): the forward's lse, delta =
rowsum(dO * O), ``flash_bwd``'s group split, then ``--repeats`` calls compared with the first
(``torch.equal``): how many differ, the largest difference, and whether the pair is routed
(``FASTER``).
"""

from __future__ import annotations

import argparse
import json

import torch

from hf_stable_attn.kernels import flash_attn_fwd, flash_bwd, flash_bwd_hopper
from hf_stable_attn.kernels._common import ceil_div, tma_ready
from hf_stable_attn.shift_rule import shift_params
from hf_stable_attn.testing import fix_kwargs, launch_kwargs

TOKENS, HIDDEN = 16384, 2048


def repeats(seqlen: int, d: int, group: int, causal: bool, n: int) -> dict:
    torch.manual_seed(seqlen + d + group)
    batch, hq = TOKENS // seqlen, HIDDEN // d
    hk = hq // group
    q, dout = (torch.randn(batch, seqlen, hq, d, device="cuda", dtype=torch.bfloat16)
               for _ in range(2))
    k, v = (torch.randn(batch, seqlen, hk, d, device="cuda", dtype=torch.bfloat16)
            for _ in range(2))
    assert tma_ready(seqlen, q, k, v, dout)
    out, lse = flash_attn_fwd(q, k, v, **launch_kwargs(seqlen, seqlen, d, causal=causal),
                              **fix_kwargs(shift_params(torch.bfloat16)))
    delta = (dout.float() * out.float()).sum(-1).transpose(1, 2).contiguous()
    m = flash_bwd_hopper
    splits = flash_bwd.group_splits(ceil_div(seqlen, m.BLOCK_N) * batch * hk, group,
                                    flash_bwd.sm_count(q.device), m.PROGRAMS_PER_SM[causal],
                                    m.MOST_SPLITS)
    dtype = torch.float32 if splits > 1 else k.dtype

    def call():
        dk, dv = (torch.empty((splits, *k.shape), device="cuda", dtype=dtype) for _ in range(2))
        m.dkdv_hopper(q, k, v, dout, lse, delta, dk, dv, softmax_scale=d ** -0.5, causal=causal)
        return dk, dv

    first = call()
    differ, largest = 0, 0.0
    for _ in range(n):
        again = call()
        if not all(torch.equal(a, b) for a, b in zip(again, first)):
            differ += 1
            largest = max(largest, max(float((a - b).abs().max()) for a, b in zip(again, first)))
    return dict(seqlen=seqlen, head_dim=d, group=group, causal=causal, splits=splits,
                routed=(d, causal) in m.FASTER, repeats=n, differ=differ, largest_diff=largest)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--shapes", nargs="+", default=[
        "2048:64:8:1", "4096:64:8:1", "4096:64:1:1", "2048:128:8:1", "4096:128:8:1",
        "8192:128:8:1", "4096:128:1:1", "4096:128:1:0", "4096:64:1:0", "4096:64:8:0"])
    args = ap.parse_args()
    result = dict(gpu=torch.cuda.get_device_name(), torch=torch.__version__, runs=[])
    for text in args.shapes:
        s, d, g, c = (int(x) for x in text.split(":"))
        record = repeats(s, d, g, bool(c), args.repeats)
        result["runs"].append(record)
        print(json.dumps(record), flush=True)
        with open(args.out, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()

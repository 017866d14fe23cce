"""Why the Triton D64 forward with the fix runs MHA slower than GQA 8:1 (GPU only; session 28).

At S 4096 causal the same config ran MHA at 296 TFLOP/s and GQA at 324 (`2154`). Same work per
query head; what differs is the K/V each head reads. Timed in rotated rounds, same process:

- ``mha``: K/V (B, S, 32, D), as the benchmark passes them;
- ``mha_one_kv``: every head reads head 0's K/V (a stride-0 expand of MHA-shaped K/V, so rows
  keep MHA's stride): MHA's launch and layout, a 32nd of its K/V bytes;
- ``gqa``: K/V (B, S, 4, D);
- ``mha_bhsd_kv``: K/V stored (B, H, S, D) and passed transposed: a head's tile is one block;
- ``mha_bhsd_all``: Q, K, V all stored that way.

Run: ``PYTHONPATH=$PWD python gpu/mha_gqa_gap.py --out gap.json [--seqlens 4096 2048]``.
"""

from __future__ import annotations

import argparse

import torch

from gpu.timed_checks import rates, save
from hf_stable_attn.kernels import flash_fwd
from hf_stable_attn.shift_rule import shift_params
from hf_stable_attn.testing import fix_kwargs, launch_kwargs

HEADS, HEAD_DIM, TOKENS = 32, 64, 16384


def bhsd(batch: int, seqlen: int, heads: int) -> torch.Tensor:
    """(B, S, H, D) view of a contiguous (B, H, S, D) tensor."""
    return torch.randn(batch, heads, seqlen, HEAD_DIM, device="cuda",
                       dtype=torch.bfloat16).transpose(1, 2)


def bshd(batch: int, seqlen: int, heads: int) -> torch.Tensor:
    return torch.randn(batch, seqlen, heads, HEAD_DIM, device="cuda", dtype=torch.bfloat16)


def variants(seqlen: int) -> dict[str, tuple]:
    """name -> (q, k, v)."""
    b = TOKENS // seqlen
    q = bshd(b, seqlen, HEADS)
    k_all, v_all = bshd(b, seqlen, HEADS), bshd(b, seqlen, HEADS)
    return {
        "mha": (q, k_all, v_all),
        "mha_one_kv": (q, k_all[:, :, :1].expand(-1, -1, HEADS, -1),
                       v_all[:, :, :1].expand(-1, -1, HEADS, -1)),
        "gqa": (q, bshd(b, seqlen, HEADS // 8), bshd(b, seqlen, HEADS // 8)),
        "mha_bhsd_kv": (q, bhsd(b, seqlen, HEADS), bhsd(b, seqlen, HEADS)),
        "mha_bhsd_all": (bhsd(b, seqlen, HEADS), bhsd(b, seqlen, HEADS), bhsd(b, seqlen, HEADS)),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--seqlens", nargs="+", type=int, default=[4096, 2048])
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    results = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "runs": []}
    for seqlen in args.seqlens:
        for stabilize in (True, False):
            fix = fix_kwargs(shift_params(torch.bfloat16, stabilize=stabilize))
            kw = launch_kwargs(seqlen, seqlen, HEAD_DIM, causal=True)
            calls, tiles = {}, {}
            for name, (q, k, v) in variants(seqlen).items():
                calls[name] = (lambda q=q, k=k, v=v: flash_fwd.flash_attn_fwd(q, k, v, **kw, **fix))
                calls[name]()
                tiles[name] = flash_fwd._fwd_launch.last
            flops = 4 * TOKENS * HEADS * seqlen * HEAD_DIM / 2
            run = {"seqlen": seqlen, "causal": True, "stabilize": stabilize, "tiles": tiles,
                   **rates(calls, args.rounds, torch.device("cuda"), flops)}
            results["runs"].append(run)
            print(seqlen, stabilize, {n: round(t) for n, t in run["tflops"].items()}, tiles,
                  flush=True)
            save(results, args.out)


if __name__ == "__main__":
    main()

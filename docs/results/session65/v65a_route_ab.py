"""Session 65: v65a's D64 causal MHA forward route under Triton 3.9, timed both ways in one
process through ``hf_stable_attn.flash_attn_func`` (the benchmark's ``stable_flash`` call):
``triton`` is v65a (the Triton forward below 8192 rows), ``gluon`` main's rule (the Gluon launch
from 4096), ``nofix`` the call without the fix (no route changed). Forward and forward +
backward, MHA (the changed route) and GQA 8:1 (unchanged: a control), S 4096, B 4, H 32, bf16.

Run on the GPU from the repository root: ``python3 docs/results/session65/v65a_route_ab.py OUT.json``.
Timing: ``benchmarks.timing.interleaved_medians`` over 7 rounds, each starting at another
variant; the route tables are patched (and the launch plans cleared) around each call, as in
``gpu/route_check.py``.
"""

from __future__ import annotations

import json
import sys

import torch

import hf_stable_attn
from benchmarks.runinfo import source_digest
from gpu.route_check import patched
from gpu.timed_checks import rates
from hf_stable_attn.kernels import flash_fwd_hopper


def variants(q, k, v, dout, backward):
    """name -> one ``stable_flash`` call (with ``dout``'s backward when ``backward``, through
    ``torch.autograd.grad``: no gradient accumulates between calls)."""
    routes = flash_fwd_hopper.FASTER

    def run(rows, stabilize=True):
        with patched(flash_fwd_hopper, FASTER={**routes, (64, True, False): rows}):
            out = hf_stable_attn.flash_attn_func(q, k, v, causal=True, stabilize=stabilize)
            return torch.autograd.grad(out, (q, k, v), dout) if backward else out
    return {"triton": lambda: run((2048, 8192)), "gluon": lambda: run((2048, 4096)),
            "nofix": lambda: run(routes[64, True, False], stabilize=False)}


def main(out_path: str) -> None:
    assert flash_fwd_hopper.FASTER[64, True, False] == (2048, 8192), "run under Triton 3.9 at v65a"
    result = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
              "source": source_digest(), "timings": []}
    batch, s, hq, d = 4, 4096, 32, 64
    for hk in (32, 4):
        g = torch.Generator(device="cuda").manual_seed(hk)
        q, k, v = (torch.randn(batch, s, h, d, device="cuda", dtype=torch.bfloat16, generator=g)
                   .requires_grad_() for h in (hq, hk, hk))
        dout = torch.randn(batch, s, hq, d, device="cuda", dtype=torch.bfloat16, generator=g)
        for mode, backward in (("fwd", False), ("fwd_bwd", True)):
            flops = 2 * batch * hq * s * s * d * (3.5 if backward else 1)  # causal: half of 4BHSSD
            record = rates(variants(q, k, v, dout, backward), 7, q.device, flops)
            record.update(heads_kv=hk, mode=mode)
            result["timings"].append(record)
            print(json.dumps({"heads_kv": hk, "mode": mode, "tflops": record["tflops"]}), flush=True)
    with open(out_path, "w") as f:
        json.dump(result, f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1])

"""Host time of the Gluon kernels' launches against a copy of the kernel package from before a
change (session 55: descriptors made on the host against the device-side ones; session 56:
``launch_compiled`` against Triton's JIT path): per ``host_descriptor``, per encoding (Triton's
``fill_tma_descriptor``, which the launcher runs for every descriptor of every launch), and per
launch of each Gluon kernel at a shape too small to keep the GPU busy (head dim 128, causal, 256
rows: the time is the host's).

Run (GPU only): ``PYTHONPATH=$PWD:.variants/x python gpu/host_descriptor_cost.py --base kbase
--out cost.json``, ``kbase`` a copy of ``kernels/`` from before the change.
"""

from __future__ import annotations

import argparse
import importlib
import json

import torch
import triton

from gpu.host_timing import host_us
from hf_stable_attn.kernels import _common
from hf_stable_attn.kernels._hopper_ring import host_descriptor

SHAPE = (1, 256, 4, 2, 128)  # B, S, Hq, Hkv, D


def launches(package: str) -> dict:
    """Each Gluon kernel of ``package`` launched once on ``SHAPE`` (causal, the fix on)."""
    fwd = importlib.import_module(f"{package}.flash_fwd_hopper")
    bwd = importlib.import_module(f"{package}.flash_bwd_hopper")
    batch, s, hq, hk, d = SHAPE
    g = torch.Generator(device="cuda").manual_seed(0)
    q, dout = (torch.randn(batch, s, hq, d, device="cuda", dtype=torch.bfloat16, generator=g)
               for _ in range(2))
    k, v = (torch.randn(batch, s, hk, d, device="cuda", dtype=torch.bfloat16, generator=g)
            for _ in range(2))
    _common.ensure_allocator()  # a base from before session 55 makes descriptors on the device
    fix = dict(stabilize=True, beta=4.0, tie_window=0.0, min_gap=0.1, max_gap=10.0)
    out, lse = fwd.flash_attn_fwd_hopper(q, k, v, softmax_scale=d ** -0.5, causal=True, **fix)
    delta = torch.empty_like(lse)
    dq = torch.empty_like(q)
    dk, dv = (torch.empty(1, *k.shape, device="cuda", dtype=k.dtype) for _ in range(2))
    return {
        "forward": lambda: fwd.flash_attn_fwd_hopper(q, k, v, softmax_scale=d ** -0.5,
                                                     causal=True, **fix),
        "dq": lambda: bwd.dq_hopper(q, k, v, out, dout, lse, delta, dq,
                                    softmax_scale=d ** -0.5, causal=True),
        "dkdv": lambda: bwd.dkdv_hopper(q, k, v, dout, lse, delta, dk, dv,
                                        softmax_scale=d ** -0.5, causal=True),
    }


def encode_us(x: torch.Tensor) -> float:
    """Host microseconds of one ``fill_tma_descriptor`` of a 64-row box over bf16 ``x`` (D 128:
    the launcher encodes a 128-byte swizzle's 64-element box, two copies per row; the compiled
    kernel's bf16 code is 10, the host's 9)."""
    from triton.backends.nvidia.driver import TMA_DTYPE_DEVICE_TO_HOST

    utils = triton.runtime.driver.active.utils
    args = (x.data_ptr(), 3, 2, TMA_DTYPE_DEVICE_TO_HOST[10], [1, 64, 1, 64], list(x.shape),
            list(x.stride()), 0)
    return host_us(lambda: utils.fill_tma_descriptor(*args), n=2000)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", required=True)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    x = torch.empty(8, 2048, 16, 128, device="cuda", dtype=torch.bfloat16)
    result = dict(gpu=torch.cuda.get_device_name(), triton=triton.__version__, shape=SHAPE,
                  host_descriptor_us=host_us(lambda: host_descriptor(x, 64), n=2000),
                  fill_tma_descriptor_us=encode_us(x), launch_us={})
    for name, package in (("base", args.base), ("host", "hf_stable_attn.kernels")):
        calls = launches(package)
        result["launch_us"][name] = {part: host_us(fn, n=500) for part, fn in calls.items()}
    print(json.dumps(result, indent=1))
    with open(args.out, "w") as f:
        json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()

"""Does a Python autograd.Function's backward cost extra host time on CUDA because it runs in the
autograd engine's device thread? Times forward + backward of (1) a trivial Function, (2) the same
Function whose backward launches one small Triton kernel, with the device threads on and off.
Run: ``PYTHONPATH=$PWD python gpu/thread_cost.py``."""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from host_timing import host_us  # gpu/ is the script directory


@triton.jit
def _scale(X, Y, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(Y + offs, tl.load(X + offs, mask=offs < n) * 2.0, mask=offs < n)


def _triton_double(x):
    y = torch.empty_like(x)
    _scale[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK=1024)
    return y


class Trivial(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, g):
        return g * 2


class WithTriton(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return _triton_double(x)

    @staticmethod
    def backward(ctx, g):
        return _triton_double(g)


def main() -> None:
    x = torch.randn(4096, device="cuda", requires_grad=True)
    g = torch.randn(4096, device="cuda")
    cases = {
        "torch op (x * 2)": lambda: torch.autograd.backward(x * 2, g),
        "trivial autograd.Function": lambda: torch.autograd.backward(Trivial.apply(x), g),
        "autograd.Function + Triton": lambda: torch.autograd.backward(WithTriton.apply(x), g),
    }
    for threads in (True, False):
        torch.autograd.set_multithreading_enabled(threads)
        print(f"== device threads {'on' if threads else 'off'}")
        for name, fn in cases.items():
            print(f"  {name:30s} {host_us(fn, warmup=30):7.1f} us")


if __name__ == "__main__":
    main()

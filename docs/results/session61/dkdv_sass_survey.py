"""Session 61, CPU only: the Triton dK/dV's table entries (head dim 64 unless named) built for
sm_90a (``--capability 80``: sm_80, pointer-load entries only) as a causal bf16 training call,
each with the scores transposed (shipped) and rows first (``_ROWS_FIRST_MIN_M`` at 64, as head
dim 256 does from 128 rows): registers, spilled bytes, shared memory, instructions in all and in
the two longest loops (backward branches in the SASS), the cp.async (non-bulk) copies in the
PTX, which the lse and delta vectors of each query tile take.

    PYTHONPATH=$PWD python docs/results/session61/dkdv_sass_survey.py [--capability 80]
        [--head-dims 64 128]
    TRITON_PTXAS_PATH=<CUDA 13.0 ptxas> PYTHONPATH=$PWD <Triton 3.6 python> ...

The GPU machine's Triton 3.6 builds sm_90 with PyTorch's CUDA 13.0 ptxas (kernels/_ptxas.py);
``pip download nvidia-cuda-nvcc==13.0.88`` has the same build (36424714). Triton 3.9 builds it
with its bundled ptxas-blackwell 13.4.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess

import triton

from benchmarks.compile_targets import compile_for, cuobjdump, resource_use, training_constexprs
from hf_stable_attn.kernels import LAUNCHES, flash_bwd
from hf_stable_attn.kernels._common import register_cap, tile_config
from hf_stable_attn.kernels._ptxas import ptxas_env, triton_ptxas

INSTRUCTION = re.compile(r"\s+/\*([0-9a-f]{4,})\*/\s+(.*?);")
TARGET = re.compile(r"BRA\b.*?0x([0-9a-f]+)")


def sass_lines(compiled) -> list[tuple[int, str]]:
    """(address, instruction) of every SASS instruction of a kernel ``compile_for`` built."""
    return [(int(a, 16), op) for a, op in INSTRUCTION.findall(cuobjdump(compiled, "-sass"))]


def loops(lines: list[tuple[int, str]]) -> list[tuple[int, int]]:
    """(first, last) instruction index of every backward branch's span (its target, itself)."""
    index = {address: i for i, (address, _) in enumerate(lines)}
    spans = []
    for i, (address, op) in enumerate(lines):
        found = TARGET.search(op)
        target = int(found.group(1), 16) if found else None
        if target is not None and target < address and target in index:
            spans.append((index[target], i))
    return spans


def loop_sizes(lines: list[tuple[int, str]]) -> list[int]:
    """Instructions between each backward branch and its target, longest first."""
    return sorted((last - first + 1 for first, last in loops(lines)), reverse=True)


def ptxas_release() -> str:
    """The release line of the ptxas that builds sm_90 here (the variable that chooses it, else
    Triton's bundled one)."""
    path = os.environ.get(ptxas_env()) or triton_ptxas()
    return subprocess.run([path, "--version"], capture_output=True, text=True,
                          check=True).stdout.strip().splitlines()[-1]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--capability", type=int, default=90)
    ap.add_argument("--head-dims", nargs="+", type=int, default=[64])
    args = ap.parse_args()
    print(f"triton {triton.__version__}, {ptxas_release()}, sm_{args.capability}")
    for head_dim in args.head_dims:
        for config in map(tile_config, flash_bwd._DKDV_CONFIGS[head_dim]):
            if config[4] and args.capability < 90:
                continue
            for rows_first in (False, True):
                if rows_first and config[0] < 64:
                    continue
                survey(head_dim, config, rows_first, args.capability)


def survey(head_dim: int, config: tuple, rows_first: bool, capability: int) -> None:
    """One line: ``config``'s build at ``head_dim``, scores rows first or transposed."""
    constexprs = training_constexprs("dkdv", head_dim, config)
    constexprs["ROWS_FIRST_MIN_M"] = 64 if rows_first else 0
    compiled = compile_for(LAUNCHES["dkdv"].kernel_for(head_dim), constexprs, config[2],
                           config[3], capability=capability, **register_cap(config))
    use = resource_use(compiled)
    lines = sass_lines(compiled)
    copies = len(re.findall(r"cp\.async\.c[ag]\.", compiled.asm["ptx"]))
    print(f"D{head_dim} {str(config):28s} {'rows first' if rows_first else 'transposed':10s} "
          f"regs {use['registers']} spill {use['stack']:4d} shared {use['shared']:6d} "
          f"instr {len(lines):5d} loops {loop_sizes(lines)[:2]} cp.async {copies}")


if __name__ == "__main__":
    main()

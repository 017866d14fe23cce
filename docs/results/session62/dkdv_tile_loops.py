"""Session 62, CPU only: the Triton dK/dV's loops over query tiles, as built for sm_90a, for a
causal bf16 training call at head dim 64, entry (64, 64, 4, 3, TMA): scores transposed or rows
first, and (where the installed tree's kernel has ``VECTOR_TMA``, branch
``v62a-dkdv-lse-descriptors``) lse and delta through host descriptors or pointers. Per tile loop
(the innermost loops with more than 50 instructions: the diagonal's masked tiles, the unmasked
ones, the sequence end's masked ones): instructions, element-wise ``cp.async`` (LDGSTS), bulk
copies (UTMALDG), ``BAR.SYNC``, local loads (LDL); and the kernel's spilled bytes. Session 61's
survey counted the loop over a program's query heads, which holds all three. With
``VECTOR_TMA`` also the spilled bytes of every TMA entry below head dim 256, both ways.

    PYTHONPATH=$PWD python docs/results/session62/dkdv_tile_loops.py
    TRITON_PTXAS_PATH=<CUDA 13.0 ptxas> PYTHONPATH=$PWD <Triton 3.6 python> ...
"""

from __future__ import annotations

import sys
from pathlib import Path

import triton

from benchmarks.compile_targets import compile_for, resource_use, training_constexprs
from hf_stable_attn.kernels import LAUNCHES
from hf_stable_attn.kernels._common import register_cap, tile_config

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "session61"))
from dkdv_sass_survey import loops, ptxas_release, sass_lines  # noqa: E402

COUNTED = ("LDGSTS", "UTMALDG", "BAR.SYNC", "LDL")


def tile_loops(lines: list[tuple[int, str]]) -> list[tuple[int, int]]:
    """The innermost spans longer than 50 instructions whose branch lies before the kernel's
    last EXIT, in program order: the retry loops of barrier waits sit after it and branch back
    into the middle of a tile loop, and the loop over query heads holds the tile loops."""
    end = max(i for i, (_, op) in enumerate(lines) if op.split()[-1] == "EXIT")
    spans = [s for s in loops(lines) if s[1] - s[0] + 1 > 50 and s[1] < end]
    return sorted(s for s in spans
                  if not any(o != s and s[0] <= o[0] and o[1] <= s[1] for o in spans))


def main() -> None:
    config = tile_config((64, 64, 4, 3, True))
    kernel = LAUNCHES["dkdv"].kernel_for(64)
    names = {p.name for p in kernel.params}
    print(f"triton {triton.__version__}, {ptxas_release()}, sm_90a, D64 {config[:5]}")
    for rows_first in (False, True):
        for vector_tma in ((False, True) if "VECTOR_TMA" in names else (None,)):
            constexprs = training_constexprs("dkdv", 64, config)
            constexprs["ROWS_FIRST_MIN_M"] = 64 if rows_first else 0
            if vector_tma is not None:
                constexprs["VECTOR_TMA"] = vector_tma
            compiled = compile_for(kernel, constexprs, config[2], config[3],
                                   **register_cap(config))
            lines = sass_lines(compiled)
            label = (f"{'rows first' if rows_first else 'transposed'}"
                     f"{'' if vector_tma is None else ', lse ' + ('tma' if vector_tma else 'ptr')}")
            print(f"{label:28s} spilled {resource_use(compiled)['stack']} bytes")
            for first, last in tile_loops(lines):
                body = [op for _, op in lines[first:last + 1]]
                counts = " ".join(f"{name} {sum(name in op for op in body)}" for name in COUNTED)
                print(f"    tile loop {len(body):4d} instructions, {counts}")
    if "VECTOR_TMA" in names:
        spills(kernel)


def spills(kernel) -> None:
    """Spilled bytes of every TMA entry of the dK/dV's tables below head dim 256, lse and delta
    through pointers and through descriptors."""
    for head_dim in (16, 32, 64, 128):
        for config in map(tile_config, LAUNCHES["dkdv"].table[head_dim]):
            if not config[4]:
                continue
            stacks = []
            for vector_tma in (False, True):
                constexprs = {**training_constexprs("dkdv", head_dim, config),
                              "VECTOR_TMA": vector_tma}
                compiled = compile_for(LAUNCHES["dkdv"].kernel_for(head_dim), constexprs,
                                       config[2], config[3], **register_cap(config))
                stacks.append(resource_use(compiled)["stack"])
            print(f"D{head_dim} {str(config[:5]):24s} spilled bytes, lse ptr {stacks[0]:5d}, "
                  f"lse tma {stacks[1]:5d}")


if __name__ == "__main__":
    main()

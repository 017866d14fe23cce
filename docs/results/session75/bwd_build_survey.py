"""Session 75, CPU only: the D64 causal backward's builds at S 2048 under the running Triton, for
sm_90a, as a causal bf16 training call compiles them. The dQ's two entries that the tuners pick
there (3.9: (128, 64, 4, 3, TMA); 3.6: (128, 64, 8, 3), pointer loads) and the dK/dV's pick
(64, 64, 4, 3, TMA), with ``flash_bwd._VECTOR_TMA`` as the running Triton sets it. Prints each
build's registers, spilled bytes and shared memory, its SASS instructions, the three longest
loops, the PTX's cp.async (per-thread) and bulk (TMA) copies, and a few SASS opcode counts.

    PYTHONPATH=$PWD python docs/results/session75/bwd_build_survey.py
    TRITON_PTXAS_PATH=<CUDA 13.0 ptxas> PYTHONPATH=$PWD <Triton 3.6 python> <this file>

Reuses session 61's SASS helpers (``docs/results/session61/dkdv_sass_survey.py``).
"""

from __future__ import annotations

import collections
import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "session61"))
import triton  # noqa: E402
from dkdv_sass_survey import loop_sizes, ptxas_release, sass_lines  # noqa: E402

from benchmarks.compile_targets import compile_for, resource_use, training_constexprs  # noqa: E402
from hf_stable_attn.kernels import LAUNCHES, flash_bwd  # noqa: E402
from hf_stable_attn.kernels._common import register_cap, tile_config  # noqa: E402

BUILDS = [("dq", (128, 64, 4, 3, True)), ("dq", (128, 64, 8, 3)), ("dkdv", (64, 64, 4, 3, True))]
OPCODES = ("HGMMA", "BAR", "SYNCS", "LDL", "STL", "LDS", "LDG", "MUFU")


def opcode(instruction: str) -> str:
    """The opcode of a SASS instruction, its predicate and modifiers dropped."""
    words = instruction.split()
    return (words[1] if words[0].startswith("@") else words[0]).split(".")[0]


def main() -> None:
    print(f"triton {triton.__version__}, ptxas {ptxas_release()}, "
          f"_VECTOR_TMA {flash_bwd._VECTOR_TMA}")
    for part, entry in BUILDS:
        config = tile_config(entry)
        compiled = compile_for(LAUNCHES[part].kernel_for(64), training_constexprs(part, 64, config),
                               config[2], config[3], **register_cap(config))
        lines = sass_lines(compiled)
        ptx = compiled.asm["ptx"]
        counts = collections.Counter(opcode(op) for _, op in lines)
        print(f"{part} {config}: {resource_use(compiled)}, {len(lines)} instructions, longest "
              f"loops {loop_sizes(lines)[:3]}, cp.async "
              f"{len(re.findall(r'cp[.]async[.](?:ca|cg)', ptx))}, bulk "
              f"{len(re.findall(r'cp[.]async[.]bulk', ptx))}, "
              + ", ".join(f"{name} {counts[name]}" for name in OPCODES))


if __name__ == "__main__":
    main()

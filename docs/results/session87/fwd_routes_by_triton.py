"""Session 87, CPU only: the Gluon forward without a mask (the table's D64 and D128 configs),
one program per tile and persistent, fix on and off, built for sm_90a by the installed Triton
with the ptxas it names, to set the builds of Triton 3.6 (torch 2.11's pin) beside 3.8.0's
(torch 2.14's), under which calls 1-5 measured the fix's cost higher:

    TRITON_PTXAS_PATH=<ptxas> PYTHONPATH=$PWD <venv with that Triton>/bin/python \\
        docs/results/session87/fwd_routes_by_triton.py

with the GPU machine's ptxas (CUDA 13.0, build 36424714: ``pip download --no-deps
nvidia-cuda-nvcc==13.0.88``, its ``nvidia/cu13/bin/ptxas``), which calls 1-5 built with under both
Tritons; outputs ``fwd_routes_triton360_ptxas130.txt`` and ``fwd_routes_triton380_ptxas130.txt``.

Per build: registers and spilled bytes a thread, instructions, the sizes of its innermost loops
longer than 200 instructions (session 86's ``fwd_loops_by_triton`` reading), the local-memory
loads and stores (``LDL``, ``STL``: spills) inside those loops and, for the first (consumer 0's
unmasked key-tile step), its count of each opcode that differs between the builds with and
without the fix."""
import collections
import sys

import triton

from benchmarks.compile_targets import resource_use

sys.path.insert(0, "docs/results/session61")
sys.path.insert(0, "docs/results/session86")
from dkdv_sass_survey import ptxas_release, sass_lines  # noqa: E402
from fwd_loops_by_triton import build, innermost, opcode  # noqa: E402


def main() -> None:
    print("triton", triton.__version__, ptxas_release())
    for head_dim in (64, 128):
        for persistent in (False, True):
            mixes = {}
            for stabilize in (True, False):
                compiled = build(head_dim, stabilize, False, persistent)
                lines = sass_lines(compiled)
                steps = innermost(lines)
                first, last = steps[0]
                mixes[stabilize] = collections.Counter(
                    opcode(op) for _, op in lines[first:last + 1])
                use = resource_use(compiled)
                local = sum(opcode(op) in ("LDL", "STL")
                            for a, b in steps for _, op in lines[a:b + 1])
                print(f"D{head_dim} {'persistent' if persistent else 'per tile  '} "
                      f"{'fix  ' if stabilize else 'nofix'} regs {use['registers']} "
                      f"spill {use['stack']} total {len(lines)} "
                      f"loops {[b - a + 1 for a, b in steps]} LDL/STL in them {local}")
            added = {op: mixes[True][op] - mixes[False][op]
                     for op in mixes[True] | mixes[False] if mixes[True][op] != mixes[False][op]}
            print(f"  first loop, fix minus nofix: {dict(sorted(added.items()))}")


if __name__ == "__main__":
    main()

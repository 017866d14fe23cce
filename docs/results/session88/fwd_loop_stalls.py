"""Session 88, CPU only: the static schedule of consumer 0's unmasked key-tile loop in the
no-mask Gluon forward (persistent, the table's D128 and D64 configs, fix on and off; session
86's ``build``), read from each instruction's control bits (the high word of its 128-bit
encoding as ``cuobjdump -sass`` prints it: stall cycles in bits 41-44, the wait mask in 52-57):
the loop's length, the sum of its stall cycles and how many instructions wait on a scoreboard.

    TRITON_PTXAS_PATH=<CUDA 13.0 ptxas> PYTHONPATH=$PWD <venv with that Triton>/bin/python \\
        docs/results/session88/fwd_loop_stalls.py

Outputs: ``fwd_loop_stalls_triton360_ptxas130.txt``, ``fwd_loop_stalls_triton380_ptxas130.txt``."""
import re
import sys

import triton

sys.path.insert(0, "docs/results/session61")
sys.path.insert(0, "docs/results/session86")
from benchmarks.compile_targets import cuobjdump  # noqa: E402
from dkdv_sass_survey import ptxas_release  # noqa: E402
from fwd_loops_by_triton import build, innermost  # noqa: E402

ENCODED = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(.*?);\s*/\* 0x[0-9a-f]{16} \*/\s*"
                     r"/\* 0x([0-9a-f]{16}) \*/")


def main() -> None:
    print("triton", triton.__version__, ptxas_release())
    for head_dim in (128, 64):
        for stabilize in (True, False):
            rows = ENCODED.findall(cuobjdump(build(head_dim, stabilize, False, True), "-sass"))
            first, last = innermost([(int(a, 16), op) for a, op, _ in rows])[0]
            high = [int(h, 16) for _, _, h in rows[first:last + 1]]
            stalls = sum((h >> 41) & 0xF for h in high)
            waits = sum(1 for h in high if (h >> 52) & 0x3F)
            print(f"D{head_dim} {'fix  ' if stabilize else 'nofix'} loop {len(high)} "
                  f"stall cycles {stalls} scoreboard waits {waits}")


if __name__ == "__main__":
    main()

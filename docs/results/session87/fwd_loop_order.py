"""Session 87, CPU only: where the synchronisation and the softmax's work sit in consumer 0's
unmasked key-tile loop of the Gluon forward with the fix, no mask (``fwd_routes_by_triton``'s
builds, session 86's ``build``: D128 and D64, persistent and one program per tile), to set
Triton 3.6's order beside 3.8.0's. Per build: the loop's length, the first and last index of
its ``FMNMX`` (the row maximum), ``FSET`` (the tie count) and ``MUFU`` (the exps), and each
matrix product, barrier, mbarrier wait or arrive and wgmma wait with its index in the loop.

    TRITON_PTXAS_PATH=<CUDA 13.0 ptxas> PYTHONPATH=$PWD <venv with that Triton>/bin/python \\
        docs/results/session87/fwd_loop_order.py

Outputs: ``fwd_loop_order_triton360_ptxas130.txt``, ``fwd_loop_order_triton380_ptxas130.txt``."""
import sys

import triton

sys.path.insert(0, "docs/results/session61")
sys.path.insert(0, "docs/results/session86")
from dkdv_sass_survey import ptxas_release, sass_lines  # noqa: E402
from fwd_loops_by_triton import build, innermost, opcode  # noqa: E402

SYNC = ("HGMMA", "WARPGROUP", "SYNCS", "BAR")


def main() -> None:
    print("triton", triton.__version__, ptxas_release())
    for head_dim in (128, 64):
        for persistent in (True, False):
            lines = sass_lines(build(head_dim, True, False, persistent))
            first, last = innermost(lines)[0]
            ops = [op for _, op in lines[first:last + 1]]
            at = {name: [i for i, op in enumerate(ops) if opcode(op) == name]
                  for name in ("FMNMX", "FSET", "MUFU")}
            spans = ", ".join(f"{name} {i[0]}-{i[-1]}" for name, i in at.items())
            print(f"== D{head_dim} {'persistent' if persistent else 'per tile'}, fix: "
                  f"loop {len(ops)}, {spans}")
            for i, op in enumerate(ops):
                if opcode(op) in SYNC:
                    print(f"  {i}: {op}")


if __name__ == "__main__":
    main()

"""Where the Gluon forward's local-memory traffic (``LDL``/``STL``: ptxas spills) sits, built
for sm_90a on the CPU: in each key-tile loop and in each span of code between loops.

Run (Triton 3.9, its ptxas-blackwell 13.4 or another named by ``TRITON_PTXAS_BLACKWELL_PATH``):
``PYTHONPATH=$PWD:$PWD/tests python docs/results/session93/fwd_spills.py 64 --causal``.
Under Triton 3.6 (``TRITON_PTXAS_PATH`` names the ptxas) the same command.
"""

from __future__ import annotations

import argparse
import collections
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "session77"))
from fwd_loop_sass import forward_sass, opcode, tile_loops  # noqa: E402

LOCAL = ("LDL", "STL")


def spans(code, loops):
    """The runs of ``code`` outside every loop of ``loops``, in address order."""
    inside = {a for loop in loops for a, _ in loop}
    run = []
    for a, text in code:
        if a in inside:
            if run:
                yield run
            run = []
        else:
            run.append((a, text))
    if run:
        yield run


def report(head_dim: int, causal: bool) -> None:
    for stabilize in (True, False):
        code = forward_sass(head_dim, causal, stabilize)
        loops = list(tile_loops(code))
        total = collections.Counter(opcode(t) for _, t in code if opcode(t) in LOCAL)
        print(f"fix={stabilize}: {len(code)} instructions, LDL {total['LDL']} STL {total['STL']}")
        for loop in loops:
            ops = collections.Counter(opcode(t) for _, t in loop)
            print(f"  loop at {loop[0][0]:#x}, {len(loop)} long: LDL {ops['LDL']} STL {ops['STL']}")
        for run in spans(code, loops):
            ops = collections.Counter(opcode(t) for _, t in run)
            if ops["LDL"] or ops["STL"]:
                print(f"  between loops at {run[0][0]:#x}, {len(run)} long: LDL {ops['LDL']} "
                      f"STL {ops['STL']} (HGMMA {ops['HGMMA']}, MUFU {ops['MUFU']})")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("head_dim", type=int)
    ap.add_argument("--causal", action="store_true")
    args = ap.parse_args()
    report(args.head_dim, args.causal)


if __name__ == "__main__":
    main()

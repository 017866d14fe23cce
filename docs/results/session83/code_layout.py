"""The Gluon forward's sm_90a SASS, built on the CPU: each build's length and the key-tile loops
in it (session 83's counts for main and v83a).

Run in the tree to count (main, or a worktree of the branch ``v83a-shared-masked-step``):
``PYTHONPATH=$PWD:$PWD/tests python docs/results/session83/code_layout.py 64 [--causal]
[--persistent]`` (the script itself can come from another tree). For the build with and
without the fix: instructions, ``HGMMA``, ``WARPGROUP.DEPBAR`` (one a ``HGMMA`` would mean
serialized products), spill loads and stores; then every loop (a branch back to an earlier
address) of 300-1200 instructions holding a ``HGMMA``: its span, length and ``MUFU``. In v83a's
nested form the outer loop (the masked step and the unmasked loop) is listed as well.
"""

from __future__ import annotations

import argparse
import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "session77"))

from fwd_loop_sass import forward_sass, opcode  # noqa: E402

from hf_stable_attn.kernels import flash_fwd_hopper  # noqa: E402


def loops(code: list[tuple[int, str]]):
    """``(first, last)`` indices of each conditional back branch's span of 300-1200
    instructions that holds a ``HGMMA`` (the mbarrier waits' out-of-line retries branch back
    unconditionally)."""
    where = {a: i for i, (a, _) in enumerate(code)}
    for i, (a, text) in enumerate(code):
        m = re.search(r"^@!?U?P\w+ BRA.*?(0x[0-9a-f]+)", text)
        if m and int(m.group(1), 16) < a and int(m.group(1), 16) in where:
            first = where[int(m.group(1), 16)]
            if 300 <= i - first < 1200 and any(opcode(t) == "HGMMA" for _, t in code[first:i]):
                yield first, i


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("head_dim", type=int, choices=sorted(flash_fwd_hopper.HOPPER_CONFIGS))
    ap.add_argument("--causal", action="store_true")
    ap.add_argument("--persistent", action="store_true")
    args = ap.parse_args()
    print("kernel source:", flash_fwd_hopper.__file__)
    for stabilize in (True, False):
        code = forward_sass(args.head_dim, args.causal, stabilize, args.persistent)
        ops = [opcode(t) for _, t in code]
        print(f"fix={stabilize}: {len(code)} instructions, {ops.count('HGMMA')} HGMMA, "
              f"{sum('WARPGROUP.DEPBAR' in t for _, t in code)} DEPBAR, {ops.count('LDL')} LDL, "
              f"{ops.count('STL')} STL")
        for first, last in loops(code):
            print(f"  loop [{first}, {last}]: {last - first + 1} instructions, "
                  f"{ops[first:last + 1].count('MUFU')} MUFU")


if __name__ == "__main__":
    main()

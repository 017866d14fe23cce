"""The D64 Gluon forward's key-tile loops in sm_90a SASS, built on the CPU, with the path a tile
takes when no tie is born (session 82's counts for v82a-v82e and main).

Run in the tree to count (main, or a worktree of the branch ``v82-packed-count``):
``PYTHONPATH=$PWD:$PWD/tests python docs/results/session82/loop_hot_path.py [--causal]``
(the script itself can come from another tree). For each loop holding one key tile's 12
``HGMMA``, with the fix: its length; the instructions left outside the blocks a forward branch
skips (``@P BRA`` over 6-299 instructions: the fix-up's bodies; the mbarrier waits' retry loops
jump further); ``MUFU`` there; spill loads and stores; the ``WARPGROUP.DEPBAR`` lines, whose
second (``P V``'s wait) sits before the softmax where ptxas hoists it (session 51); where the
first exp outside those blocks is.
"""

from __future__ import annotations

import argparse
import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "session77"))

from fwd_loop_sass import forward_sass, tile_loops  # noqa: E402

from hf_stable_attn.kernels import flash_fwd_hopper  # noqa: E402


def outside_skips(loop: list[tuple[int, str]]) -> list[tuple[int, str]]:
    """The loop's instructions that no short forward branch (6-299 instructions) jumps over."""
    where = {a: i for i, (a, _) in enumerate(loop)}
    skipped: set[int] = set()
    for i, (a, text) in enumerate(loop):
        m = re.search(r"@!?U?P\w+ BRA (0x[0-9a-f]+)", text)
        if m and int(m.group(1), 16) in where and 5 < where[int(m.group(1), 16)] - i < 300:
            skipped.update(range(i + 1, where[int(m.group(1), 16)]))
    return [x for i, x in enumerate(loop) if i not in skipped]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--causal", action="store_true")
    args = ap.parse_args()
    print("kernel source:", flash_fwd_hopper.__file__)
    code = forward_sass(64, args.causal, True)
    print(f"build: {len(code)} instructions, {sum('LDL' in t for _, t in code)} LDL")
    for loop in tile_loops(code):
        hot = outside_skips(loop)
        depbar = [i for i, (_, t) in enumerate(loop) if "WARPGROUP.DEPBAR" in t]
        first_exp = next(i for i, (a, t) in enumerate(loop) if "MUFU.EX2" in t and (a, t) in hot)
        print(f"loop {len(loop)}: {len(hot)} outside skipped blocks, "
              f"{sum('MUFU' in t for _, t in hot)} MUFU there, "
              f"{sum(('LDL' in t or 'STL' in t) for _, t in loop)} LDL/STL, "
              f"DEPBAR at {depbar}, first MUFU.EX2 at {first_exp}")


if __name__ == "__main__":
    main()

"""The Triton kernels' sm_90a SASS, built on the CPU at the first entry of each table (D64 and
D128, a causal bf16 training call with the fix, ``training_constexprs``): instructions and local
memory a kernel, then each loop that holds wgmma (``HGMMA``) with its compare, select and logic
counts. Session 94 ran it at main and with ``visible_interval.patch`` (the lead for the Triton
kernels' masks: one interval a row).

Run: ``PYTHONPATH=$PWD:$PWD/tests python docs/results/session94/triton_mask_sass.py``.
"""

from __future__ import annotations

import collections
import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "session77"))
from fwd_loop_sass import instructions, opcode  # noqa: E402

from benchmarks.compile_targets import compile_for, cuobjdump, training_constexprs  # noqa: E402
from hf_stable_attn.kernels import LAUNCHES  # noqa: E402
from hf_stable_attn.kernels._common import register_cap, tile_config  # noqa: E402

SHOWN = ("ISETP", "FSEL", "SEL", "LOP3", "IADD3", "LDL", "HGMMA")


def mma_loops(code):
    """``(length, op counts)`` of each loop (a branch back to an earlier address) with wgmma."""
    where = {a: i for i, (a, _) in enumerate(code)}
    for i, (a, text) in enumerate(code):
        m = re.search(r"BRA.*?(0x[0-9a-f]+)", text)
        if m and int(m.group(1), 16) < a and int(m.group(1), 16) in where:
            body = code[where[int(m.group(1), 16)]:i + 1]
            ops = collections.Counter(opcode(t) for _, t in body)
            if ops["HGMMA"]:
                yield len(body), ops


def main() -> None:
    for d in (64, 128):
        for part, launch in LAUNCHES.items():
            config = tile_config(launch.table[d][0])
            compiled = compile_for(launch.kernel_for(d), training_constexprs(part, d, config),
                                   config[2], config[3], **register_cap(config))
            code = instructions(cuobjdump(compiled, "-sass"))
            ops = collections.Counter(opcode(t) for _, t in code)
            print(f"{part} D{d} {config[:5]}: {len(code)} instructions, LDL {ops['LDL']} "
                  f"STL {ops['STL']}", flush=True)
            for n, loop in mma_loops(code):
                print(f"  loop {n}: " + " ".join(f"{k} {loop[k]}" for k in SHOWN), flush=True)


if __name__ == "__main__":
    main()

"""The Gluon forward's key-tile loops in sm_90a SASS, built on the CPU (session 77's counts).

Run: ``PYTHONPATH=$PWD:$PWD/tests python docs/results/session77/fwd_loop_sass.py 64 --causal``.
For the build with and without the fix: every loop that holds the 12 ``HGMMA`` of one key
tile, its length, its op counts, and where a warp's vote (v77b) branches, how many
instructions the skipped path leaves out.
"""

from __future__ import annotations

import argparse
import collections
import re

from benchmarks.compile_targets import compile_for, cuobjdump
from hf_stable_attn.kernels import flash_fwd_hopper
from test_sm90_compiles import _forward_descriptors


def instructions(sass: str) -> list[tuple[int, str]]:
    """``(address, instruction)`` of each SASS line."""
    return [(int(a, 16), t.strip()) for a, t in re.findall(r"/\*([0-9a-f]{4,})\*/\s+(.*?);", sass)]


def opcode(text: str) -> str:
    return re.sub(r"^@!?U?P\w+\s+", "", text).split()[0].split(".")[0]


def forward_sass(head_dim: int, causal: bool, stabilize: bool,
                 persistent: bool = False) -> list[tuple[int, str]]:
    """``instructions`` of the Gluon forward built for sm_90a at its ``HOPPER_CONFIGS`` entry
    for ``head_dim``, with the launch's descriptor boxes."""
    block_n, stages, regs, consumers, pingpong = flash_fwd_hopper.HOPPER_CONFIGS[head_dim]
    compiled = compile_for(flash_fwd_hopper._fwd_ws_kernel, dict(
        CAUSAL=causal, STABILIZE=stabilize, HEAD_DIM=head_dim, BLOCK_N=block_n, STAGES=stages,
        CONSUMER_REGS=regs, CONSUMERS=consumers, PINGPONG=pingpong, PERSISTENT=persistent,
        num_warps=4), descriptors=_forward_descriptors(head_dim))
    return instructions(cuobjdump(compiled, "-sass"))


def tile_loops(code: list[tuple[int, str]]):
    """The loops (a branch back to an earlier address) holding one key tile's 12 wgmma."""
    where = {a: i for i, (a, _) in enumerate(code)}
    for i, (a, text) in enumerate(code):
        m = re.search(r"BRA.*?(0x[0-9a-f]+)", text)
        if m and int(m.group(1), 16) < a and int(m.group(1), 16) in where:
            loop = code[where[int(m.group(1), 16)]:i + 1]
            if sum(opcode(t) == "HGMMA" for _, t in loop) == 12:
                yield loop


def skipped(loop) -> int | None:
    """How many instructions the branch after the loop's ``VOTE`` jumps over."""
    addresses = [a for a, _ in loop]
    for i, (_, text) in enumerate(loop):
        if "VOTE" in text:
            for j in range(i + 1, min(i + 4, len(loop))):
                m = re.search(r"BRA (0x[0-9a-f]+)", loop[j][1])
                if m and int(m.group(1), 16) in addresses:
                    return addresses.index(int(m.group(1), 16)) - j - 1
    return None


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("head_dim", type=int, choices=sorted(flash_fwd_hopper.HOPPER_CONFIGS))
    ap.add_argument("--causal", action="store_true")
    args = ap.parse_args()
    for stabilize in (True, False):
        code = forward_sass(args.head_dim, args.causal, stabilize)
        spills = sum(opcode(t) == "LDL" for _, t in code)
        print(f"fix={stabilize}: {len(code)} instructions, {spills} LDL")
        for loop in tile_loops(code):
            ops = collections.Counter(opcode(t) for _, t in loop)
            print(f"  loop of {len(loop)}, vote skips {skipped(loop)}: {dict(ops.most_common(12))}")


if __name__ == "__main__":
    main()

"""Session 64, CPU only: the D64 Gluon forward (the table's config, fix on or off), as built for
sm_90a, one program per tile or persistent, causal or not. Per build: registers and spilled
bytes a thread, and the innermost loops longer than 200 instructions (first, per consumer, its
unmasked key-tile step and its masked one), each with its instructions, ``MUFU`` count and local
loads and stores. Which Triton and ptxas build it is the caller's:

    PYTHONPATH=$PWD python docs/results/session64/gluon_fwd_loops.py            # 3.9, ptxas 13.4
    TRITON_PTXAS_BLACKWELL_PATH=<CUDA 13.0 ptxas> PYTHONPATH=$PWD python ...      # 3.9, ptxas 13.0
    TRITON_PTXAS_PATH=<CUDA 13.0 ptxas> PYTHONPATH=$PWD <Triton 3.6 python> ...   # the GPU machine's

Session 64 measured the persistent D64 launch without a mask 10% slower with the fix under 3.9
than under 3.6 (347 against 386 TFLOP/s at S 2048 MHA), the per-tile launch level (360 / 361).
"""

from __future__ import annotations

import sys
from pathlib import Path

import triton

from benchmarks.compile_targets import compile_for, resource_use
from hf_stable_attn.kernels import flash_fwd_hopper

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "session61"))
from dkdv_sass_survey import loops, ptxas_release, sass_lines  # noqa: E402


def build(stabilize: bool, causal: bool, persistent: bool):
    """The D64 table config compiled for sm_90a with these switches."""
    block_n, stages, regs, consumers, pingpong = flash_fwd_hopper.HOPPER_CONFIGS[64]
    return compile_for(flash_fwd_hopper._fwd_ws_kernel, dict(
        CAUSAL=causal, STABILIZE=stabilize, HEAD_DIM=64, BLOCK_N=block_n, STAGES=stages,
        CONSUMER_REGS=regs, CONSUMERS=consumers, PINGPONG=pingpong, PERSISTENT=persistent,
        num_warps=4), descriptors={"Q": 64, "K": block_n, "V": block_n})


def count(lines: list[tuple[int, str]], opcode: str) -> int:
    """How many of ``lines`` (``sass_lines``) run ``opcode`` (e.g. ``MUFU``, ``LDL``), counted
    as ``dkdv_tile_loops.py`` counts: the name anywhere in the instruction."""
    return sum(opcode in op for _, op in lines)


def spill_traffic(lines: list[tuple[int, str]]) -> str:
    """``, n LDL, m STL`` for the local loads and stores among ``lines``, or nothing."""
    ldl, stl = count(lines, "LDL"), count(lines, "STL")
    return f", {ldl} LDL, {stl} STL" if ldl or stl else ""


def main() -> None:
    print(f"triton {triton.__version__}, {ptxas_release()}")
    for causal in (False, True):
        for persistent in (False, True):
            for stabilize in (True, False):
                compiled = build(stabilize, causal, persistent)
                use = resource_use(compiled)
                lines = sass_lines(compiled)
                spans = {s for s in loops(lines) if s[1] - s[0] + 1 > 200}
                steps = sorted(s for s in spans if not any(
                    o != s and s[0] <= o[0] and o[1] <= s[1] for o in spans))
                sizes = [f"{b - a + 1} ({count(lines[a:b + 1], 'MUFU')} MUFU"
                         f"{spill_traffic(lines[a:b + 1])})" for a, b in steps]
                print(f"{'causal' if causal else 'full  '} "
                      f"{'persistent' if persistent else 'per-tile  '} "
                      f"{'fix  ' if stabilize else 'nofix'}: {use['registers']} registers, "
                      f"{use['stack']} B spilled, {len(lines)} instructions"
                      f"{spill_traffic(lines)}; loops: {', '.join(sizes)}")


if __name__ == "__main__":
    main()

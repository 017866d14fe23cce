"""Instruction and local-memory counts of the Gluon kernels' sm_90a SASS, built on the CPU: the
forward at each ``HOPPER_CONFIGS`` entry (causal or not, the fix on and off: whole kernel and
each key-tile loop, D64's found by ``tile_loops``), and the dK/dV and dQ, causal. Session 94 ran
it at 84a593a and at 700f520 (a worktree) to see what ``split_columns`` changed.

Run (Triton 3.9 and its ptxas-blackwell 13.4; or Triton 3.6 with ``TRITON_PTXAS_PATH`` at CUDA
13's ptxas): ``PYTHONPATH=$PWD:$PWD/tests python docs/results/session94/mask_sass.py``.
"""

from __future__ import annotations

import collections
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "session77"))
from fwd_loop_sass import forward_sass, instructions, opcode, tile_loops  # noqa: E402

from benchmarks.compile_targets import compile_for, cuobjdump  # noqa: E402
from hf_stable_attn.kernels import flash_bwd_hopper, flash_fwd_hopper  # noqa: E402
from test_sm90_compiles import _backward_descriptors  # noqa: E402


def counts(code) -> str:
    ops = collections.Counter(opcode(t) for _, t in code)
    return f"{len(code)} instructions, LDL {ops['LDL']} STL {ops['STL']}"


def backward_builds():
    """``(name, compiled)`` of the Gluon dK/dV and dQ at their table entries, causal."""
    for d, (stages, regs, tile_m) in sorted(flash_bwd_hopper.HOPPER_CONFIGS.items()):
        yield f"dkdv D{d} causal", compile_for(flash_bwd_hopper._dkdv_ws_kernel, dict(
            CAUSAL=True, HEAD_DIM=d, STAGES=stages, TILE_M=tile_m, CONSUMER_REGS=regs,
            GROUP_PROGRAMS=0, num_warps=4), descriptors=_backward_descriptors("_dkdv_ws_kernel", d))
    for d, (block_n, stages, regs) in sorted(flash_bwd_hopper.DQ_CONFIGS.items()):
        yield f"dq D{d} causal", compile_for(flash_bwd_hopper._dq_ws_kernel, dict(
            CAUSAL=True, HEAD_DIM=d, BLOCK_N=block_n, STAGES=stages, CONSUMER_REGS=regs,
            num_warps=4), descriptors=_backward_descriptors("_dq_ws_kernel", d))


def main() -> None:
    for d in sorted(flash_fwd_hopper.HOPPER_CONFIGS):
        for causal in (True, False):
            for fix in (True, False):
                code = forward_sass(d, causal, fix)
                loops = [len(loop) for loop in tile_loops(code)]
                print(f"fwd D{d} causal={causal} fix={fix}: {counts(code)}, loops {loops}",
                      flush=True)
    for name, compiled in backward_builds():
        print(f"{name}: {counts(instructions(cuobjdump(compiled, '-sass')))}", flush=True)


if __name__ == "__main__":
    main()

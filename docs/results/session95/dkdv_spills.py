"""Spills of the Gluon dK/dV's sm_90a SASS at its table entries, causal and not, with head grouping
as launched (``GROUP_PROGRAMS``, 128) and without (0, as session 94's ``mask_sass.py`` built it).

Run (Triton 3.9 and its ptxas-blackwell 13.4; or Triton 3.6 with ``TRITON_PTXAS_PATH`` at CUDA
13's ptxas): ``PYTHONPATH=$PWD:$PWD/tests python docs/results/session95/dkdv_spills.py``.
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "session77"))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "session94"))
from fwd_loop_sass import instructions  # noqa: E402
from mask_sass import counts  # noqa: E402

from benchmarks.compile_targets import compile_for, cuobjdump  # noqa: E402
from hf_stable_attn.kernels import flash_bwd_hopper  # noqa: E402
from test_sm90_compiles import _backward_descriptors  # noqa: E402


def main() -> None:
    for d, (stages, regs, tile_m) in sorted(flash_bwd_hopper.HOPPER_CONFIGS.items()):
        for causal in (True, False):
            for group in (flash_bwd_hopper.GROUP_PROGRAMS, 0):
                compiled = compile_for(flash_bwd_hopper._dkdv_ws_kernel, dict(
                    CAUSAL=causal, HEAD_DIM=d, STAGES=stages, TILE_M=tile_m,
                    CONSUMER_REGS=regs, GROUP_PROGRAMS=group, num_warps=4),
                    descriptors=_backward_descriptors("_dkdv_ws_kernel", d))
                code = instructions(cuobjdump(compiled, "-sass"))
                print(f"dkdv D{d} causal={causal} GROUP_PROGRAMS={group}: {counts(code)}",
                      flush=True)


if __name__ == "__main__":
    main()

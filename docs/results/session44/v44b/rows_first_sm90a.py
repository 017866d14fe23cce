"""v44b on the CPU: head dim 256's dK/dV compiled for sm_90a with the scores transposed (as
shipped) and rows first (``v44b_rows_first_dkdv.patch``): registers, spill stores, shared memory
and the layouts Triton picked for the two kinds of products (warps per CTA, instruction shape),
compiled as head dim 256 launches it (``group`` and ``splits`` as runtime ints, v43b).
Apply the patch first (``git apply``), then, from the repository root:
PYTHONPATH=$PWD python docs/results/session44/v44b/rows_first_sm90a.py (output in
rows_first_sm90a.log; session 44)."""
import importlib.util
import re

from hf_stable_attn.kernels import flash_bwd
from tests.test_sm90_compiles import CAUSAL_FLAGS, compile_sm90

spec = importlib.util.spec_from_file_location(
    "regs_sm90a", "docs/results/session44/maxnreg/regs_sm90a.py")
regs_sm90a = importlib.util.module_from_spec(spec)
spec.loader.exec_module(regs_sm90a)
MMA = re.compile(r"#mma\d* = #ttg.nvidia_mma<\{[^}]*warpsPerCTA = \[(\d+), (\d+)\], "
                 r"instrShape = \[(\d+), (\d+), (\d+)\]")

# (BLOCK_M, BLOCK_N, warps, stages, TMA, rows first)
CASES = [(64, 64, 8, 2, True, False), (64, 64, 8, 2, False, False),
         (64, 64, 8, 2, True, True), (128, 64, 8, 1, False, True),
         (128, 64, 8, 1, True, True), (128, 64, 8, 2, True, True)]
for bm, bn, w, st, tma, rows_first in CASES:
    cx = dict(CAUSAL_FLAGS, BLOCK_D=256, BLOCK_M=bm, BLOCK_N=bn, USE_TMA=tma,
              ROWS_FIRST=rows_first)
    compiled = compile_sm90(flash_bwd._dkdv_launch.kernel_for(256), cx, w, st)
    registers, spills = regs_sm90a.ptxas_info(compiled.asm["ptx"])
    layouts = [f"warps [{a}, {b}] instr [{m}, {n}, {k}]"
               for a, b, m, n, k in MMA.findall(compiled.asm["ttgir"])]
    print((bm, bn, w, st, tma), "rows first" if rows_first else "transposed", "registers",
          registers, "spill bytes", spills, "shared", compiled.metadata.shared, "; ".join(layouts),
          flush=True)

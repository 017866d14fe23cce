"""Registers and spill stores of head dim 256's forward and dQ table entries compiled for sm_90a
on the CPU with ``group`` specialized to 1 (an MHA launch) and as a runtime int (v43b's question
for the other two kernels; session 44), with ``maxnreg/regs_sm90a.py``'s helpers. Run from the
repository root: PYTHONPATH=$PWD python docs/results/session44/d256_fwd_dq_specialization.py
(output in the .log beside it)."""
import importlib.util

from hf_stable_attn.kernels._common import tile_config
from tests.test_sm90_compiles import CAUSAL_FLAGS

spec = importlib.util.spec_from_file_location(
    "regs_sm90a", "docs/results/session44/maxnreg/regs_sm90a.py")
regs_sm90a = importlib.util.module_from_spec(spec)
spec.loader.exec_module(regs_sm90a)

for name, launch, _, extra in regs_sm90a.KERNELS[:2]:  # the forward and the dQ
    for bm, bn, w, s, tma in map(tile_config, launch.table[256]):
        for ones in (("group",), ()):
            cx = dict(CAUSAL_FLAGS, BLOCK_D=256, BLOCK_M=bm, BLOCK_N=bn, USE_TMA=tma, **extra)
            k = regs_sm90a.compile_capped(launch.kernel_for(256), cx, w, s, None, ones)
            regs, spills = regs_sm90a.ptxas_info(k.asm["ptx"])
            print(name, (bm, bn, w, s, tma), "group specialized" if ones else "group runtime",
                  "registers", regs, "spill bytes", spills, flush=True)

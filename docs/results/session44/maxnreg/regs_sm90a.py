"""Registers, spill stores, shared memory and programs per SM (bounded by registers, not
rounded to the allocation unit, shared memory and warps) of the D64 table entries (forward, dQ,
dK/dV) compiled for sm_90a on the CPU, as a causal MHA launch specializes them (``group`` and
``splits`` equal to 1), with no register cap and with ``maxnreg`` 168 and 128. Run from the
repository root: PYTHONPATH=$PWD python docs/results/session44/maxnreg/regs_sm90a.py (session
44, v44a; output in regs_sm90a.log)."""
import os
import re
import subprocess
import tempfile

from hf_stable_attn.kernels import flash_bwd, flash_fwd
from hf_stable_attn.kernels._common import tile_config
from tests.test_sm90_compiles import CAUSAL_FLAGS, compile_sm90

BIN = os.path.dirname(__import__("triton").__file__) + "/backends/nvidia/bin/"
HEAD_DIM = 64


def compile_capped(kernel, constexprs, warps, stages, maxnreg, ones):
    """``compile_sm90`` with the int arguments ``ones`` specialized to 1 and a register cap."""
    options = {"maxnreg": maxnreg} if maxnreg else {}
    return compile_sm90(kernel, {**constexprs, **dict.fromkeys(ones, 1)}, warps, stages,
                        **options)


def ptxas_info(ptx):
    with tempfile.NamedTemporaryFile(suffix=".ptx", delete=False, mode="w") as f:
        f.write(ptx)
    err = subprocess.run([BIN + "ptxas-blackwell", "-v", "--gpu-name", "sm_90a", "-o",
                          f.name + ".cubin", f.name], capture_output=True, text=True).stderr
    return (int(re.search(r"Used (\d+) registers", err).group(1)),
            int(re.search(r"(\d+) bytes spill stores", err).group(1)))


KERNELS = (
    ("fwd", flash_fwd._fwd_launch, ("group",), dict(STABILIZE=True, SHIFT_SINGLE=False,
                                                   RETURN_SHIFT=False, HAS_SINKS=False)),
    ("dq", flash_bwd._dq_launch, ("group",), dict(ROWSUM_P_DP=False)),
    ("dkdv", flash_bwd._dkdv_launch, ("group", "splits"), {}),
)


def main():
    for name, launch, ones, extra in KERNELS:
        for bm, bn, w, s, tma in map(tile_config, launch.table[HEAD_DIM]):
            for cap in (None, 168, 128):
                cx = dict(CAUSAL_FLAGS, BLOCK_D=HEAD_DIM, BLOCK_M=bm, BLOCK_N=bn, USE_TMA=tma,
                          **extra)
                k = compile_capped(launch.kernel_for(HEAD_DIM), cx, w, s, cap, ones)
                regs, spills = ptxas_info(k.asm["ptx"])
                shared = k.metadata.shared
                per_sm = min(65536 // (regs * w * 32), 233472 // (shared + 1024), 64 // w)
                print(name, (bm, bn, w, s, tma), "maxnreg", cap, "registers", regs, "spill bytes",
                      spills, "shared", shared, "programs/SM <=", per_sm, flush=True)


if __name__ == "__main__":
    main()

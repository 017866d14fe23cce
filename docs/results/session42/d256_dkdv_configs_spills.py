"""Spills of D256 dK/dV configs with 32 keys per program (sm_90a, CPU)."""
import os, sys, subprocess, tempfile
sys.path.insert(0, os.getcwd() + "/tests")
import test_sm90_compiles as t
from hf_stable_attn.kernels import flash_bwd
BIN = os.path.dirname(__import__("triton").__file__) + "/backends/nvidia/bin/"
for bm, bn, w, st, tma in [(32, 32, 4, 2, False), (64, 32, 4, 2, False), (64, 32, 8, 2, False), (32, 32, 4, 3, False), (64, 64, 8, 2, True), (32, 64, 8, 2, True)]:
    c = dict(t.CAUSAL_FLAGS, BLOCK_D=256, BLOCK_M=bm, BLOCK_N=bn, USE_TMA=tma)
    k = t.compile_sm90(flash_bwd._dkdv_launch.kernel, c, w, st)
    f = tempfile.NamedTemporaryFile(suffix=".ptx", delete=False, mode="w"); f.write(k.asm["ptx"]); f.close()
    out = subprocess.run([BIN + "ptxas-blackwell", "-v", "--gpu-name", "sm_90a", "-o", f.name + ".cubin", f.name], capture_output=True, text=True)
    info = " ".join(l.split("info    :")[-1].strip() for l in out.stderr.splitlines() if "registers" in l or "spill" in l)
    hgmma = subprocess.run([BIN + "cuobjdump", "-sass", f.name + ".cubin"], capture_output=True, text=True).stdout
    print((bm, bn, w, st, tma), info, "HGMMA", hgmma.count("HGMMA"), "HMMA", hgmma.count("HMMA"), flush=True)

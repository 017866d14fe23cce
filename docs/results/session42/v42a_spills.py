"""Spills of the dK/dV at head dim 256 (sm_90a, CPU): the package against v42a, the row-major
variant. Setup: ``cp -r kernels .variants/s42/krow`` and apply ``v42a_d256_dkdv_row_major.patch``
there (``patch -p0 -d .variants/s42/krow`` after the paths are adjusted, or by hand), then
``python docs/results/session42/v42a_spills.py 256`` from the repository root."""
import importlib, os, sys, subprocess, tempfile
sys.path.insert(0, os.getcwd() + "/tests"); sys.path.insert(0, os.getcwd() + "/.variants/s42")
import test_sm90_compiles as t
from hf_stable_attn.kernels._common import tile_config
BIN = os.path.dirname(__import__("triton").__file__) + "/backends/nvidia/bin/"
mods = {"main": importlib.import_module("hf_stable_attn.kernels.flash_bwd"), "row": importlib.import_module("krow.flash_bwd")}
hd = int(sys.argv[1]) if len(sys.argv) > 1 else 256
causal = dict(t.CAUSAL_FLAGS)
for cfg in map(tile_config, mods["main"]._dkdv_launch.table[hd]):
    bm, bn, w, st, tma = cfg
    for name, m in mods.items():
        c = dict(causal, BLOCK_D=hd, BLOCK_M=bm, BLOCK_N=bn, USE_TMA=tma)
        k = t.compile_sm90(m._dkdv_launch.kernel, c, w, st)
        f = tempfile.NamedTemporaryFile(suffix=".ptx", delete=False, mode="w"); f.write(k.asm["ptx"]); f.close()
        out = subprocess.run([BIN + "ptxas-blackwell", "-v", "--gpu-name", "sm_90a", "-o", f.name + ".cubin", f.name], capture_output=True, text=True)
        info = " ".join(l.split("info    :")[-1].strip() for l in out.stderr.splitlines() if "registers" in l or "spill" in l)
        print(hd, cfg, name, info, flush=True)

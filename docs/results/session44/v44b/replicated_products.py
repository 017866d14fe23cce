"""Which of the Triton tables' entries (head dims 64, 128 and 256, causal) have a product whose
layout covers more rows or columns than its tile, i.e. warpgroups computing the same elements,
read from the TTGIR compiled for sm_90a on the CPU. Columns: head dim, kernel, entry, then the
replicated products as (tile, warps per CTA, instruction N, row factor, column factor). Run from
the repository root: PYTHONPATH=$PWD python docs/results/session44/v44b/replicated_products.py
(output in replicated_products.log; session 44)."""
import importlib.util
import re

from hf_stable_attn.kernels._common import tile_config
from tests.test_sm90_compiles import CAUSAL_FLAGS, compile_sm90

spec = importlib.util.spec_from_file_location(
    "regs_sm90a", "docs/results/session44/maxnreg/regs_sm90a.py")
regs_sm90a = importlib.util.module_from_spec(spec)
spec.loader.exec_module(regs_sm90a)

MMA = re.compile(r"^(#mma\d*) = #ttg.nvidia_mma<\{[^}]*warpsPerCTA = \[(\d+), (\d+)\], "
                 r"instrShape = \[(\d+), (\d+), (\d+)\]", re.M)
DOT = re.compile(r"warp_group_dot .*-> tensor<(\d+)x(\d+)xf32, (#mma\d*)>")
for hd in (64, 128, 256):
    for name, launch, _, extra in regs_sm90a.KERNELS:
        for bm, bn, w, s, tma in map(tile_config, launch.table[hd]):
            cx = dict(CAUSAL_FLAGS, BLOCK_D=hd, BLOCK_M=bm, BLOCK_N=bn, USE_TMA=tma, **extra)
            ttgir = compile_sm90(launch.kernel_for(hd), cx, w, s).asm["ttgir"]
            mmas = {m[0]: tuple(map(int, m[1:])) for m in MMA.findall(ttgir)}
            found = set()
            for m, n, lay in DOT.findall(ttgir):
                wm, wn, im, inn, ik = mmas[lay]
                rep_m = wm * 16 / int(m) if wm * 16 > int(m) else 1
                rep_n = wn * inn / int(n) if wn * inn > int(n) else 1
                found.add((f"{m}x{n}", f"[{wm},{wn}]", inn, rep_m, rep_n))
            bad = [f for f in found if f[3] > 1 or f[4] > 1]
            print(hd, name, (bm, bn, w, s, tma), "REPLICATED " + str(bad) if bad else "ok",
                  flush=True)

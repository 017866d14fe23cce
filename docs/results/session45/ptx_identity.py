"""Session 45: a hash of the sm_90a PTX of the dQ and dK/dV kernels (debug line info left out)
at every table entry with causal flags and at each head dim's first entry with every feature flag
on, {case: hash} into argv[1]; argv[2] "i/n" computes every n-th case from the i-th. Run from the
repository root on the tree before and after a source-only refactor: equal hashes mean the same
code (Triton 3.9, the CPU machine; see README.md)."""
import hashlib, json, re, sys
sys.path.insert(0, "tests")
from hf_stable_attn.kernels import flash_bwd
from hf_stable_attn.kernels._common import tile_config
from test_sm90_compiles import CAUSAL_FLAGS, compile_sm90

FEATURES = dict(IS_VARLEN=True, HAS_WL=True, HAS_WR=True, HAS_SOFTCAP=True, HAS_DROPOUT=True,
                HAS_KPM=True, DOT_FP32=False, EVEN_D=False)
cases = []
for name, launch in (("dq", flash_bwd._dq_launch), ("dkdv", flash_bwd._dkdv_launch)):
    for hd in (64, 128, 256):
        for i, cfg in enumerate(map(tile_config, launch.table[hd])):
            cases.append((name, launch, hd, cfg, "causal", CAUSAL_FLAGS))
            if i == 0:
                cases.append((name, launch, hd, cfg, "features", FEATURES))
i, n = map(int, sys.argv[2].split("/"))
out = {}
for name, launch, hd, cfg, fl, flags in cases[i::n]:
    bm, bn, w, st, tma = cfg
    cx = dict(flags, BLOCK_D=hd, BLOCK_M=bm, BLOCK_N=bn, USE_TMA=tma)
    if name == "dq":
        cx["ROWSUM_P_DP"] = hd == 64
    else:
        cx["ROWS_FIRST_MIN_M"] = flash_bwd._ROWS_FIRST_MIN_M.get(hd, 0)
    ptx = compile_sm90(launch.kernel_for(hd), cx, w, st).asm["ptx"]
    kept = []
    for line in ptx.splitlines():
        if re.match(r"\s*\.section", line):
            break
        if re.match(r"\s*(\.loc|\.file)\b", line) or re.match(r"^\$L__tmp\d+:$", line):
            continue
        kept.append(line.split("//")[0].rstrip())
    body = "\n".join(kept)
    key = f"{name}-d{hd}-{'x'.join(map(str, cfg))}-{fl}"
    out[key] = hashlib.sha256(body.encode()).hexdigest()[:16]
    print(key, out[key], flush=True)
json.dump(out, open(sys.argv[1], "w"), indent=1)

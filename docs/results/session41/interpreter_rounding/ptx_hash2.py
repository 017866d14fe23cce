import hashlib, os, sys, re
sys.path.insert(0, os.getcwd()); sys.path.insert(0, os.getcwd() + "/tests")
import hf_stable_attn  # noqa
import test_sm90_compiles as t
from hf_stable_attn.kernels import flash_bwd, flash_fwd
def h(c):
    ptx = c.asm["ptx"].split(".section\t.debug")[0]
    ptx = "\n".join(l for l in ptx.splitlines() if not re.match(r"\s*(\.loc|\.file|//|\$L__tmp\d+:)", l))
    return hashlib.sha1(ptx.encode()).hexdigest()[:12]
flags = dict(t.CAUSAL_FLAGS, HAS_WL=True, HAS_SOFTCAP=True, HAS_DROPOUT=True, HAS_KPM=True, EVEN_D=False)
for name, launch in (("fwd", flash_fwd._fwd_launch), ("dq", flash_bwd._dq_launch), ("dkdv", flash_bwd._dkdv_launch)):
    for dt in ("*bf16", "*fp16"):
        ptrs = {n: dt for n in ("Q", "K", "V", "O", "DO", "DQ", "DK", "DV")}
        cs = dict(flags, BLOCK_D=64, BLOCK_M=64, BLOCK_N=64, USE_TMA=False)
        if name == "fwd":
            cs.update(STABILIZE=True, SHIFT_SINGLE=False, RETURN_SHIFT=True, HAS_SINKS=True)
        if name == "dq":
            cs.update(ROWSUM_P_DP=True)
        print(name, dt, h(t.compile_sm90(launch.kernel, cs, 4, 2, pointers=ptrs)))
print("sum", h(t.compile_sm90(flash_bwd._sum_partials_kernel, dict(SPLITS=4, BLOCK=1024), 4, 1, pointers={"P": "*fp32", "OUT": "*bf16"})))

"""sm_90 PTX of every Triton kernel config the sm90 compile test builds (plus the group-split
and partial-sum kernels where reachable), hashed: run before and after a change that must not
alter the GPU code."""
import hashlib, os, sys, re
sys.path.insert(0, os.getcwd()); sys.path.insert(0, os.getcwd() + "/tests")
import hf_stable_attn  # noqa
import test_sm90_compiles as t
from hf_stable_attn.kernels import flash_bwd, flash_fwd
out = {}
for p in t.TRITON_CASES:
    launch, head_dim, config = p.values
    block_m, block_n, warps, stages, tma = config
    for dtype_flag in ("bf16",):
        constexprs = dict(t.CAUSAL_FLAGS, BLOCK_D=head_dim, BLOCK_M=block_m, BLOCK_N=block_n, USE_TMA=tma)
        if launch is flash_fwd._fwd_launch:
            constexprs.update(STABILIZE=True, SHIFT_SINGLE=False, RETURN_SHIFT=False, HAS_SINKS=head_dim == 64)
        if launch is flash_bwd._dq_launch:
            constexprs.update(ROWSUM_P_DP=head_dim == 64)
        c = t.compile_sm90(launch.kernel, constexprs, warps, stages)
        ptx = c.asm["ptx"].split(".section\t.debug")[0]
        ptx = "\n".join(l for l in ptx.splitlines()
                        if not re.match(r"\s*(\.loc|\.file|//|\$L__tmp\d+:)", l))
        out[p.id] = hashlib.sha1(ptx.encode()).hexdigest()[:12]
for k, v in out.items():
    print(k, v)

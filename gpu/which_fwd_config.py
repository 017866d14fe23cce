"""Which tile config the autotuner picks for the forward, D128 not causal, S 4096 (GPU only).

Run it in several fresh processes to see whether the pick is stable (docs/kernel_notes.md, v10d):
``for i in 1 2 3; do PYTHONPATH=$PWD python gpu/which_fwd_config.py; done``.
"""

import torch
import triton

from hf_stable_attn.kernels import flash_fwd
from hf_stable_attn.shift_rule import shift_params
from hf_stable_attn.testing import fix_kwargs, launch_kwargs

q, k, v = (torch.randn(4, 4096, 16, 128, device="cuda", dtype=torch.bfloat16) for _ in range(3))
kw = launch_kwargs(4096, 4096, 128)
for stabilize in (True, False):
    fix = fix_kwargs(shift_params(torch.bfloat16, stabilize=stabilize, beta=4.0))

    def call():
        return flash_fwd.flash_attn_fwd(q, k, v, **kw, **fix)

    call()  # the first call per key autotunes and records its pick
    picked = list(flash_fwd._fwd_launch.chosen.values())[-1]
    ms = triton.testing.do_bench(call, return_mode="median")
    print(f"stabilize {stabilize}: ms {ms:.3f} {picked}")

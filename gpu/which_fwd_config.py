"""Which tile config the autotuner picks for the forward, D128 not causal, S 4096 (GPU only).

Run it in several fresh processes to see whether the pick is stable (docs/kernel_notes.md, v10d):
``for i in 1 2 3; do PYTHONPATH=$PWD python gpu/which_fwd_config.py; done``.
"""

import torch
import triton

from hf_stable_attn.kernels import flash_fwd

q, k, v = (torch.randn(4, 4096, 16, 128, device="cuda", dtype=torch.bfloat16) for _ in range(3))
kw = dict(cu_seqlens_q=None, cu_seqlens_k=None, max_seqlen_q=4096, max_seqlen_k=4096,
          softmax_scale=128 ** -0.5, causal=False, window_left=-1, window_right=-1, softcap=0.0,
          dropout_p=0.0, seed=0, beta=4.0, tie_window=2.0 ** -9, min_gap=2.0 ** -7, max_gap=64.0)
for stabilize in (True, False):
    def call():
        return flash_fwd.flash_attn_fwd(q, k, v, **kw, stabilize=stabilize)

    call()  # the first call per key autotunes and records its pick
    picked = list(flash_fwd._fwd_launch.chosen.values())[-1]
    ms = triton.testing.do_bench(call, return_mode="median")
    print(f"stabilize {stabilize}: ms {ms:.3f} {picked}")

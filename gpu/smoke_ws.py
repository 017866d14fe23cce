import torch
from hf_stable_attn.kernels._common import tma_ready
from hf_stable_attn.kernels.flash_fwd_hopper import flash_attn_fwd_hopper
from hf_stable_attn.shift_rule import shift_params
from hf_stable_attn.testing import fix_kwargs
q = torch.randn(1, 2048, 2, 128, device="cuda", dtype=torch.bfloat16)
assert tma_ready(2048, q)
out, lse = flash_attn_fwd_hopper(q, q, q, softmax_scale=128**-0.5, causal=False, **fix_kwargs(shift_params(q.dtype)))
torch.cuda.synchronize()
ref = torch.nn.functional.scaled_dot_product_attention(*(x.transpose(1, 2) for x in (q, q, q))).transpose(1, 2)
print("smoke ok, max diff vs sdpa", (out.float() - ref.float()).abs().max().item())

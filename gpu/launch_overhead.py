"""Host (CPU) time per call of our attention at shapes too small to keep the GPU busy, so the
time is launch overhead: the Triton launchers, the custom op, the flash-attn interface, and
SDPA for comparison; a decode step's attention through the Transformers interface (ours against
transformers' SDPA function, and ours with a padding mask); then cProfiles of that decode call
and of the forward launcher (GPU only).

Run: ``PYTHONPATH=$PWD python gpu/launch_overhead.py > launch_overhead.txt``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

import hf_stable_attn
from hf_stable_attn import kernels
from hf_stable_attn.integration import stable_flash_attention_forward
from hf_stable_attn.shift_rule import shift_params
from hf_stable_attn.testing import fix_kwargs, launch_kwargs
from transformers import GPT2Config, GPT2LMHeadModel
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from host_timing import host_profile, host_us  # gpu/ is the script directory

N = 300


def interface_functions() -> dict:
    """Transformers attention functions by name, each with the first attention module of a
    two-layer GPT-2 built for it on the GPU."""
    functions = {"stable_flash": stable_flash_attention_forward, "sdpa": sdpa_attention_forward}
    out = {}
    for name, fn in functions.items():
        config = GPT2Config(n_layer=2, n_embd=768, n_head=12)
        model = GPT2LMHeadModel._from_config(config, attn_implementation=name)
        out[name] = (fn, model.transformer.h[0].attn.cuda().eval())
    return out


def main() -> None:
    print(torch.cuda.get_device_name(), torch.__version__)
    shapes = {"decode (8 x 1 query, 256 keys, 12 heads, d 64)": ((8, 1, 12, 64), (8, 256, 12, 64)),
              "train-like (1 x 128, 4 heads, d 64)": ((1, 128, 4, 64), (1, 128, 4, 64))}
    for label, (qs, ks) in shapes.items():
        q = torch.randn(qs, device="cuda", dtype=torch.bfloat16)
        k = torch.randn(ks, device="cuda", dtype=torch.bfloat16)
        v = torch.randn(ks, device="cuda", dtype=torch.bfloat16)
        causal = qs[1] > 1
        kw = launch_kwargs(qs[1], ks[1], qs[-1], causal=causal)
        fix = fix_kwargs(shift_params(torch.bfloat16))
        out, lse = kernels.flash_attn_fwd(q, k, v, **kw, **fix)
        rows = {
            "kernels.flash_attn_fwd (launcher)": lambda: kernels.flash_attn_fwd(q, k, v, **kw, **fix),
            "kernels.flash_attn_bwd (launcher)": lambda: kernels.flash_attn_bwd(out, q, k, v, out, lse, **kw),
            "flash_attn_func, no grad": lambda: hf_stable_attn.flash_attn_func(q, k, v, causal=causal),
            "sdpa, no grad": lambda: F.scaled_dot_product_attention(
                q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=causal),
        }
        qg, kg, vg = (t.clone().requires_grad_() for t in (q, k, v))

        def ours_train():
            hf_stable_attn.flash_attn_func(qg, kg, vg, causal=causal).sum().backward()

        def sdpa_train():
            F.scaled_dot_product_attention(qg.transpose(1, 2), kg.transpose(1, 2),
                                           vg.transpose(1, 2), is_causal=causal).sum().backward()

        rows["flash_attn_func fwd+bwd"] = ours_train
        rows["sdpa fwd+bwd"] = sdpa_train
        print(f"\n== {label}: host microseconds per call")
        with torch.no_grad():
            for name, fn in rows.items():
                if "bwd" in name and "launcher" not in name:
                    continue
                print(f"  {name:40s} {host_us(fn):8.1f}")
        for name in ("flash_attn_func fwd+bwd", "sdpa fwd+bwd"):
            print(f"  {name:40s} {host_us(rows[name]):8.1f}")

    print("\n== one decode step's attention through the Transformers interface (a GPT-2 layer's "
          "module; q (8, 12, 1, 64), k/v (8, 12, 256, 64)): host microseconds per call")
    layer_attention = interface_functions()
    qd = torch.randn(8, 12, 1, 64, device="cuda", dtype=torch.bfloat16)
    kd, vd = (torch.randn(8, 12, 256, 64, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    with torch.no_grad():
        for name, (fn, module) in layer_attention.items():
            print(f"  {name:40s} {host_us(lambda: fn(module, qd, kd, vd, None)):8.1f}")
        fn, module = layer_attention["stable_flash"]
        padded = torch.ones(8, 256, device="cuda", dtype=torch.bool)
        padded[1, :40] = False  # a left-padded prompt
        label = "stable_flash, 2D padding mask"
        print(f"  {label:40s} {host_us(lambda: fn(module, qd, kd, vd, padded)):8.1f}")
        text = host_profile(lambda: fn(module, qd, kd, vd, None), N)
    print(f"\n== cProfile of {N} stable_flash decode calls through the interface\n{text}")

    text = host_profile(lambda: kernels.flash_attn_fwd(q, k, v, **kw, **fix), N)
    print(f"\n== cProfile of {N} forward launcher calls (train-like shape)\n{text}")

if __name__ == "__main__":
    main()

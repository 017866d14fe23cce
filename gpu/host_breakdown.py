"""Where the host time of one training call goes (GPU only): our attention's forward with grad,
its backward, the launchers alone, and SDPA, at a shape too small to keep the GPU busy; then the
same with the autograd engine's device threads off (backward in the calling thread), and a
cProfile of that backward.

Run: ``PYTHONPATH=$PWD python gpu/host_breakdown.py > host_breakdown.txt``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

import hf_stable_attn
from hf_stable_attn import kernels
from host_timing import host_profile, host_us  # gpu/ is the script directory

N = 300


def main() -> None:
    print(torch.cuda.get_device_name(), torch.__version__)
    shape = (1, 128, 4, 64)
    q, k, v = (torch.randn(shape, device="cuda", dtype=torch.bfloat16, requires_grad=True)
               for _ in range(3))
    dout = torch.randn(shape, device="cuda", dtype=torch.bfloat16)
    dout_t = dout.transpose(1, 2)
    kw = dict(cu_seqlens_q=None, cu_seqlens_k=None, max_seqlen_q=128, max_seqlen_k=128,
              softmax_scale=0.125, causal=True, window_left=-1, window_right=-1, softcap=0.0,
              dropout_p=0.0, seed=0)
    fix = dict(stabilize=True, beta=2.0, tie_window=2.0 ** -9, min_gap=2.0 ** -7, max_gap=64.0)
    qd, kd, vd = (t.detach() for t in (q, k, v))
    out_d, lse_d = kernels.flash_attn_fwd(qd, kd, vd, **kw, **fix)

    def ours_fwd():
        return hf_stable_attn.flash_attn_func(q, k, v, causal=True)

    def ours_train():
        torch.autograd.backward(ours_fwd(), dout)

    def sdpa_fwd():
        return F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2),
                                              v.transpose(1, 2), is_causal=True)

    def sdpa_train():
        torch.autograd.backward(sdpa_fwd(), dout_t)

    rows = {
        "launchers fwd + bwd (no autograd)": lambda: kernels.flash_attn_bwd(
            dout, qd, kd, vd, *kernels.flash_attn_fwd(qd, kd, vd, **kw, **fix), **kw),
        "flash_attn_func forward (grad on)": ours_fwd,
        "flash_attn_func forward + backward": ours_train,
        "sdpa forward (grad on)": sdpa_fwd,
        "sdpa forward + backward": sdpa_train,
    }
    for threads in (True, False):
        torch.autograd.set_multithreading_enabled(threads)
        print(f"\n== autograd device threads {'on' if threads else 'off'}: host us per call")
        for name, fn in rows.items():
            print(f"  {name:40s} {host_us(fn):8.1f}")
    del out_d, lse_d

    # device threads still off: the backward runs in this thread, where cProfile sees it
    text = host_profile(ours_train, N, 30)
    print(f"\n== cProfile of {N} forward + backward calls (threads off)\n{text}")

if __name__ == "__main__":
    main()

"""Does Triton's automatic warp specialization (``tl.range(..., warp_specialize=True)``) give
correct attention on this GPU? A minimal flash-attention forward (TMA descriptors for Q, K, V;
no mask, no fix), with and without it, against ``scaled_dot_product_attention``, and each
config's median time (``triton.testing.do_bench``).

On an H200 with triton 3.6 the warp-specialized kernel returned NaN in every config while the
same kernel without it matched SDPA (docs/results/gpu_tests_v8/warp_specialize_check.log;
docs/kernel_notes.md, v8a). Rerun it on a newer Triton before trying warp specialization in our
kernels.

Run: ``python gpu/warp_specialize_check.py`` (GPU only; prints one JSON line per config).
"""

from __future__ import annotations

import json

import torch
import triton
import triton.language as tl
import triton.testing

from hf_stable_attn.kernels._common import tma_ready

LOG2E = 1.4426950408889634
CONFIGS = [(128, 128, 4, 3), (128, 64, 4, 3), (64, 64, 4, 3)]  # BLOCK_M, BLOCK_N, warps, stages


@triton.jit
def _attention(Q, K, V, O, N, scale, BM: tl.constexpr, BN: tl.constexpr, D: tl.constexpr,
               WS: tl.constexpr):
    """O = softmax(Q K^T * scale / log2(e)) V for (BH, N, D) bf16 tensors, N a multiple of BM."""
    pid = tl.program_id(0)
    bh = tl.program_id(1)
    kd = tl.make_tensor_descriptor(K + bh * N * D, shape=[N, D], strides=[D, 1],
                                   block_shape=[BN, D])
    vd = tl.make_tensor_descriptor(V + bh * N * D, shape=[N, D], strides=[D, 1],
                                   block_shape=[BN, D])
    qd = tl.make_tensor_descriptor(Q + bh * N * D, shape=[N, D], strides=[D, 1],
                                   block_shape=[BM, D])
    q = qd.load([pid * BM, 0])
    m = tl.full([BM], float("-inf"), tl.float32)
    l = tl.zeros([BM], tl.float32)
    acc = tl.zeros([BM, D], tl.float32)
    for s in tl.range(0, N, BN, warp_specialize=WS):
        k = kd.load([s, 0])
        qk = tl.dot(q, tl.trans(k))
        m_new = tl.maximum(m, tl.max(qk, 1) * scale)
        p = tl.exp2(qk * scale - m_new[:, None])
        alpha = tl.exp2(m - m_new)
        l = l * alpha + tl.sum(p, 1)
        v = vd.load([s, 0])
        acc = tl.dot(p.to(tl.bfloat16), v, acc * alpha[:, None])
        m = m_new
    offs = pid * BM + tl.arange(0, BM)
    tl.store(O + bh * N * D + offs[:, None] * D + tl.arange(0, D)[None, :],
             (acc / l[:, None]).to(tl.bfloat16))


def main() -> None:
    torch.manual_seed(0)
    bh, n, d = 16, 2048, 64
    q, k, v = (torch.randn(bh, n, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    expected = torch.nn.functional.scaled_dot_product_attention(q, k, v).float()
    tma_ready(n, q)  # installs the scratch allocator the device-side descriptors need
    for bm, bn, warps, stages in CONFIGS:
        for ws in (False, True):
            out = torch.empty_like(q)
            record = dict(triton=triton.__version__, cfg=(bm, bn, warps, stages), ws=ws)
            try:
                def run(out=out, bm=bm, bn=bn, warps=warps, stages=stages, ws=ws):
                    _attention[(n // bm, bh)](q, k, v, out, n, d ** -0.5 * LOG2E, BM=bm, BN=bn,
                                              D=d, WS=ws, num_warps=warps, num_stages=stages)
                run()
                torch.cuda.synchronize()
                record["max_abs_error"] = (out.float() - expected).abs().max().item()
                record["ms"] = triton.testing.do_bench(run, return_mode="median")
            except Exception as exc:  # noqa: BLE001  (a config the compiler refuses is a result)
                record["error"] = f"{type(exc).__name__}: {str(exc)[:200]}"
            print(json.dumps(record), flush=True)


if __name__ == "__main__":
    main()

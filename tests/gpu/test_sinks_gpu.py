"""Attention sinks (``s_aux``) around the GPU kernels against float64 (``pytest -m gpu``).

The forward kernels fold one logit per query head into ``(out, lse)`` in their epilogue
(``hf_stable_attn.sinks``); the backward kernels run unchanged on the folded pair. This checks
output and gradients (the sinks' included) under the flash rule on the routes a CUDA call takes:
the Triton kernels (odd head dims and lengths, rows that see no key, a sliding window as
gpt-oss's) and, on Hopper, the Gluon kernels (dense D64 and D128 calls of 2048 rows, which the
Gluon forward takes, and the Gluon backward where its routes cover them). The CPU runs of the same rule are ``tests/test_sinks.py`` and
``tests/test_kernel_interpret.py``.
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import pytest
import torch
from test_sinks import check_against_oracle

from hf_stable_attn import flash_attn_func
from hf_stable_attn.testing import attention_oracle

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]

CASES = [  # (B, Sq, Sk, Hq, Hk, D, causal, window_left)
    (2, 113, 203, 4, 2, 64, True, -1),
    (1, 300, 129, 4, 1, 80, True, -1),  # Sq > Sk: the first 171 rows see no key
    (2, 1000, 1000, 8, 1, 64, True, 127),  # gpt-oss's 128-key window layers
    (1, 2048, 2048, 4, 4, 128, True, -1),  # the Gluon forward on Hopper
    (1, 2048, 2048, 8, 1, 64, False, -1),
]


@pytest.mark.parametrize("case", CASES, ids=str)
def test_sinks_on_the_gpu_meet_the_flash_rule(case):
    b, sq, sk, hq, hk, d, causal, left = case
    g = torch.Generator(device="cuda").manual_seed(sq * 7 + d)

    def draw(*shape, scale=1.0):
        return (scale * torch.randn(*shape, generator=g, device="cuda")).to(torch.bfloat16)

    q, k, v, dout = draw(b, sq, hq, d), draw(b, sk, hk, d), draw(b, sk, hk, d), draw(b, sq, hq, d)
    sinks = draw(hq, scale=2.0)
    ours = [t.clone().requires_grad_() for t in (q, k, v, sinks)]
    out = flash_attn_func(*ours[:3], causal=causal, window_size=(left, -1), s_aux=ours[3],
                          backend="triton")
    assert torch.isfinite(out).all()
    check_against_oracle(ours, out, dout, lambda q, k, v, s, dtype: attention_oracle(
        q, k, v, causal=causal, window_left=left, sinks=s, compute_dtype=dtype),
        (q, k, v, sinks))

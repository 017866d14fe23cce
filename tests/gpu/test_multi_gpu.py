"""Several GPUs in one process: kernel calls on a GPU other than the current one, and a model
spread over two GPUs (``device_map``), launch where their tensors are (``_common.on_device_of``).

Run on a machine with two or more GPUs: ``pytest -m gpu tests/gpu/test_multi_gpu.py``; skipped
on fewer.
"""

import os
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import pytest
import torch
from model_zoo import left_padded_batch, tiny_model

import hf_stable_attn
from hf_stable_attn.testing import attention_oracle, check_flash_rule

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two CUDA GPUs"),
]


@pytest.mark.parametrize("seqlen", [300, 2048])  # pointer loads; TMA loads (from 2048 tokens)
def test_kernels_run_on_the_tensors_gpu_not_the_current_one(seqlen):
    torch.cuda.set_device(0)
    torch.manual_seed(seqlen)
    q, k, v = (torch.randn(2, seqlen, h, 64, device="cuda:1", dtype=torch.bfloat16)
               for h in (4, 2, 2))
    leaves = [t.clone().requires_grad_() for t in (q, k, v)]
    out = hf_stable_attn.flash_attn_func(*leaves, causal=True, backend="triton")
    dout = torch.randn_like(out)
    out.backward(dout)
    assert torch.cuda.current_device() == 0
    assert out.device == torch.device("cuda:1")

    def oracle(dtype):
        inputs = [t.detach().to(dtype).requires_grad_() for t in (q, k, v)]
        o = attention_oracle(*inputs, causal=True, compute_dtype=dtype)
        o.backward(dout.to(dtype))
        return o.detach(), [t.grad for t in inputs]

    exact, exact_grads = oracle(torch.float64)
    plain, plain_grads = oracle(torch.bfloat16)
    check_flash_rule("out", out.detach(), plain, exact, 2.0, slack=1e-4)
    for name, leaf, pl, ex in zip(("dq", "dk", "dv"), leaves, plain_grads, exact_grads):
        check_flash_rule(name, leaf.grad, pl, ex, 3.0, slack=1e-4)


def _split_over_two_gpus(model):
    """Half the decoder layers on GPU 0 (with the embeddings), half and the head on GPU 1."""
    from accelerate import dispatch_model

    layers = len(model.model.layers)
    device_map = {"model.embed_tokens": 0, "model.rotary_emb": 0, "model.norm": 1, "lm_head": 1}
    device_map.update({f"model.layers.{i}": int(i >= layers // 2) for i in range(layers)})
    return dispatch_model(model, device_map=device_map)


def test_a_model_split_over_two_gpus_matches_sdpa():
    torch.cuda.set_device(0)
    ids, mask = left_padded_batch(seed=5, lengths=(96, 64, 128))
    ids, mask = ids.cuda(0), mask.cuda(0)
    logits = {}
    for impl in ("stable_flash", "sdpa"):
        model = _split_over_two_gpus(tiny_model("llama", impl, dtype=torch.bfloat16).eval())
        assert {p.device.index for p in model.parameters()} == {0, 1}
        with torch.no_grad():
            logits[impl] = model(input_ids=ids, attention_mask=mask).logits.float()
        if impl == "stable_flash":
            generated = model.generate(ids, attention_mask=mask, max_new_tokens=8,
                                       do_sample=False)
            assert generated.shape == (3, 128 + 8)
    valid = mask.bool()
    ours, peer = logits["stable_flash"][valid], logits["sdpa"][valid]
    assert torch.isfinite(ours).all()
    assert (ours - peer).abs().max() < 0.05 * peer.abs().max()

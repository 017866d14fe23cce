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
from hf_stable_attn.testing import check_flash_rule, oracle_with_grads

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two CUDA GPUs"),
]


def _on_gpu1_from_gpu0(seqlen, hq, hk, head_dim, causal, seed):
    """A fwd+bwd through ``flash_attn_func`` on tensors of GPU 1 with GPU 0 current: returns
    the leaves (with grads), the output and the output's gradient."""
    torch.cuda.set_device(0)
    torch.manual_seed(seed)
    q, k, v = (torch.randn(2, seqlen, h, head_dim, device="cuda:1", dtype=torch.bfloat16)
               for h in (hq, hk, hk))
    leaves = [t.clone().requires_grad_() for t in (q, k, v)]
    out = hf_stable_attn.flash_attn_func(*leaves, causal=causal, backend="triton")
    dout = torch.randn_like(out)
    out.backward(dout)
    assert torch.cuda.current_device() == 0
    assert out.device == torch.device("cuda:1")
    return leaves, out.detach(), dout


def _meets_the_float64_rule(leaves, out, dout, causal):
    exact, exact_grads = oracle_with_grads(*leaves, dout, torch.float64, causal=causal)
    plain, plain_grads = oracle_with_grads(*leaves, dout, torch.bfloat16, causal=causal)
    check_flash_rule("out", out, plain, exact, 2.0, slack=1e-4)
    for name, leaf, pl, ex in zip(("dq", "dk", "dv"), leaves, plain_grads, exact_grads):
        check_flash_rule(name, leaf.grad, pl, ex, 3.0, slack=1e-4)


@pytest.mark.parametrize("seqlen", [300, 2048])  # pointer loads; TMA loads (from 2048 tokens)
def test_kernels_run_on_the_tensors_gpu_not_the_current_one(seqlen):
    leaves, out, dout = _on_gpu1_from_gpu0(seqlen, 4, 2, 64, True, seed=seqlen)
    _meets_the_float64_rule(leaves, out, dout, True)


@pytest.mark.skipif(torch.cuda.device_count() < 2 or torch.cuda.get_device_capability(1) != (9, 0),
                    reason="needs an sm_90 GPU as GPU 1")
@pytest.mark.parametrize("head_dim, causal", [(128, False), (128, True), (64, False)])
def test_the_gluon_kernels_run_on_the_tensors_gpu_not_the_current_one(head_dim, causal):
    """The Gluon forward, dK/dV and (D128) dQ, which their routes (``FASTER``) pick at 2048
    rows for these shapes, on GPU 1's tensors."""
    from hf_stable_attn.kernels import LAUNCHES, flash_bwd_hopper, flash_fwd_hopper

    for launch in LAUNCHES.values():
        launch.last = None
    leaves, out, dout = _on_gpu1_from_gpu0(2048, 4, 2, head_dim, causal, seed=head_dim + causal)
    assert LAUNCHES["fwd"].last == flash_fwd_hopper.tile_record(head_dim)
    assert LAUNCHES["dkdv"].last == flash_bwd_hopper.tile_record(head_dim)
    if head_dim == 128:
        assert LAUNCHES["dq"].last == flash_bwd_hopper.dq_tile_record(head_dim)
    _meets_the_float64_rule(leaves, out, dout, causal)


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

"""Every kernel launch passes ``_common.COMPILE_OPTIONS`` (FP fusion pinned on: Triton 3.10 turns
it off by default). The launchers run on CPU tensors here with their kernels replaced by a
stand-in (``kernel_stand_in``), so the GPU-only launches (the Gluon kernels) are checked too."""

from __future__ import annotations

import pytest
import torch

from hf_stable_attn.kernels import _common, flash_bwd, flash_bwd_hopper, flash_fwd_hopper
from kernel_stand_in import KernelStandIn


def passed_options(kwargs: dict) -> bool:
    return all(kwargs.get(name) == value for name, value in _common.COMPILE_OPTIONS.items())


def test_fp_fusion_is_pinned_on():
    assert _common.COMPILE_OPTIONS["enable_fp_fusion"] is True


def test_tiled_launches_pass_the_options(monkeypatch):
    kernel = KernelStandIn()
    launch = _common.TiledLaunch(kernel, {64: [(64, 64, 4, 2)]})
    monkeypatch.setattr(_common, "specialization", lambda args: ())
    launch.launch(lambda meta: (1,), ("key",), (torch.zeros(1),), {},
                  _common.tile_config((64, 64, 4, 2)))
    assert passed_options(kernel.kwargs)


def test_the_partials_sum_passes_the_options(monkeypatch):
    kernel = KernelStandIn()
    monkeypatch.setattr(flash_bwd, "_sum_partials_kernel", kernel)
    flash_bwd.sum_partials(torch.zeros(2, 3), torch.bfloat16)
    assert passed_options(kernel.kwargs)


@pytest.mark.parametrize("head_dim", [64, 128])
def test_the_gluon_launches_pass_the_options(monkeypatch, head_dim):
    kernels = {name: KernelStandIn() for name in ("fwd", "dkdv", "dq")}
    monkeypatch.setattr(flash_fwd_hopper, "_fwd_ws_kernel", kernels["fwd"])
    monkeypatch.setattr(flash_bwd_hopper, "_dkdv_ws_kernel", kernels["dkdv"])
    monkeypatch.setattr(flash_bwd_hopper, "_dq_ws_kernel", kernels["dq"])
    q = torch.zeros(1, 256, 2, head_dim, dtype=torch.bfloat16)
    lse = torch.zeros(1, 2, 256)
    flash_fwd_hopper.flash_attn_fwd_hopper(q, q, q, softmax_scale=1.0, causal=True,
                                           stabilize=True, beta=2.0, tie_window=0.0,
                                           min_gap=0.0, max_gap=1.0)
    partials = torch.zeros(1, *q.shape)
    flash_bwd_hopper.dkdv_hopper(q, q, q, q, lse, lse, partials, partials, softmax_scale=1.0,
                                 causal=True)
    flash_bwd_hopper.dq_hopper(q, q, q, q, q, lse, lse, q, softmax_scale=1.0, causal=True)
    assert all(passed_options(k.kwargs) for k in kernels.values())

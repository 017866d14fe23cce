"""What the Gluon dK/dV launcher (``kernels/flash_bwd_hopper.dkdv_hopper``) passes its kernel, on
the CPU with the kernel stood in: ``lse`` and ``delta`` through TMA descriptors, over a padded
copy where their rows are not a multiple of 4 (TMA's 16-byte strides). The kernel itself runs
only on an sm_90 GPU (``tests/gpu/test_hopper_backward.py``)."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("triton.experimental.gluon.nvidia.hopper")
from hf_stable_attn.kernels import _hopper_ring, flash_bwd_hopper  # noqa: E402
from kernel_stand_in import KernelStandIn  # noqa: E402


def _launch_vectors(monkeypatch, seqlen: int, head_dim: int = 64):
    """The (LSE, DELTA) descriptors of a dK/dV launch over ``seqlen`` query rows, with the
    ``lse`` and ``delta`` it was given."""
    kernel = KernelStandIn(flash_bwd_hopper._dkdv_ws_kernel.arg_names)
    monkeypatch.setattr(flash_bwd_hopper, "_dkdv_ws_kernel", kernel)
    q = torch.zeros(2, seqlen, 3, head_dim, dtype=torch.bfloat16)
    lse, delta = torch.randn(2, 2, 3, seqlen).unbind(0)
    partials = torch.zeros(1, *q.shape)
    flash_bwd_hopper.dkdv_hopper(q, q, q, q, lse, delta, partials, partials, softmax_scale=1.0,
                                 causal=True)
    return (kernel.arg("LSE"), kernel.arg("DELTA")), (lse, delta)


def test_lse_and_delta_are_read_in_place_where_their_rows_fit_tma(monkeypatch):
    descriptors, vectors = _launch_vectors(monkeypatch, 256)
    tile_m = flash_bwd_hopper.HOPPER_CONFIGS[64][2]
    for desc, x in zip(descriptors, vectors):
        assert desc.base is x
        assert list(desc.block_shape) == [1, 1, tile_m]


@pytest.mark.parametrize("seqlen", [257, 258, 259])
def test_rows_not_a_multiple_of_4_are_read_from_a_padded_copy(monkeypatch, seqlen):
    descriptors, vectors = _launch_vectors(monkeypatch, seqlen)
    padded = -(-seqlen // 4) * 4
    for desc, x in zip(descriptors, vectors):
        assert desc.base is not x
        assert desc.base.shape == x.shape  # values past the rows read as zeros
        assert desc.base.stride() == (3 * padded, padded, 1)
        assert torch.equal(desc.base, x)


def test_a_misaligned_vector_is_copied():
    x = torch.randn(4 * 64 + 1)[1:].view(1, 4, 64)
    assert x.data_ptr() % 16 != 0
    rows = _hopper_ring.vector_rows(x)
    assert rows.data_ptr() % 16 == 0 and torch.equal(rows, x)

"""Which forward and dK/dV calls go to the Gluon kernels (``kernels/flash_fwd_hopper.covers``,
``kernels/flash_bwd_hopper.routes``), on the CPU: the kernels themselves run only on an sm_90 GPU
(``tests/gpu/test_hopper_forward.py``, ``tests/gpu/test_hopper_backward.py``)."""

from __future__ import annotations

import pytest
import torch

from hf_stable_attn.kernels import flash_bwd_hopper, flash_fwd_hopper
from kernel_stand_in import KernelStandIn

COVERED = dict(heads_kv=2, stabilize=True, varlen=False, causal=True, window_left=-1,
               window_right=0, has_softcap=False, dropout_p=0.0, key_padding_mask=None,
               shift_single=False, return_shift=False, tma_ok=True)


@pytest.fixture
def sm90(monkeypatch):
    monkeypatch.setattr(flash_fwd_hopper, "_is_sm90", lambda index: True)
    monkeypatch.setattr(flash_fwd_hopper, "ENABLED", True)


def _q(head_dim=128, seqlen=128):
    return torch.empty(1, seqlen, 2, head_dim, dtype=torch.bfloat16)


def test_a_dense_causal_or_unmasked_call_is_covered(sm90):
    assert flash_fwd_hopper.covers(_q(), **COVERED)
    assert flash_fwd_hopper.covers(_q(), **{**COVERED, "stabilize": False})
    assert flash_fwd_hopper.covers(_q(64, 4096), **{**COVERED, "causal": False, "window_right": -1})


@pytest.mark.parametrize("seqlen", [1, 127])
def test_fewer_query_rows_than_a_tile_take_the_triton_forward(sm90, seqlen):
    """Decoding steps and short chunks (against a long cache: TMA-ready)."""
    assert not flash_fwd_hopper.covers(_q(seqlen=seqlen), **COVERED)


@pytest.mark.parametrize("stabilize, seqlen, causal, gluon", [
    (True, 2047, False, False), (True, 2048, False, True), (True, 4095, True, False),
    (True, 4096, True, True), (True, 8192, True, True),
    (False, 2047, False, False), (False, 2048, False, True), (False, 4095, True, False),
    (False, 4096, True, True),
])
@pytest.mark.parametrize("heads_kv", [1, 2])
def test_head_dim_64_takes_the_gluon_forward_from_its_least_rows(
        sm90, stabilize, seqlen, causal, gluon, heads_kv):
    """Where its three consumers measured faster than the Triton forward (kernel_notes v22a,
    v22b, session 34), GQA (one KV head) and MHA (two) alike: session 99 measured the Gluon
    launch faster at D64 causal MHA S 4096 with the fix too, which sessions 64-98 left on the
    Triton forward below 8192 rows."""
    call = {**COVERED, "heads_kv": heads_kv, "stabilize": stabilize, "causal": causal,
            "window_right": 0 if causal else -1}
    assert flash_fwd_hopper.covers(_q(64, seqlen), **call) == gluon


@pytest.mark.parametrize("change", [
    {"tma_ok": False}, {"varlen": True}, {"causal": False, "window_right": 0},
    {"window_left": 16}, {"has_softcap": True}, {"dropout_p": 0.1},
    {"key_padding_mask": torch.ones(1, 128, dtype=torch.bool)}, {"shift_single": True},
    {"return_shift": True},
], ids=lambda c: next(iter(c)))
def test_every_feature_the_kernel_lacks_takes_the_triton_forward(sm90, change):
    assert not flash_fwd_hopper.covers(_q(), **{**COVERED, **change})


@pytest.mark.parametrize("head_dim", [32, 80, 96, 256])
def test_other_head_dims_take_the_triton_forward(sm90, head_dim):
    assert not flash_fwd_hopper.covers(_q(head_dim), **COVERED)


@pytest.mark.parametrize("head_dim, rows, warps", [(128, 128, 12), (64, 192, 16)])
def test_the_record_marks_the_gluon_kernel(head_dim, rows, warps):
    """Its tile: 64 query rows per consumer warpgroup (two at D128, three at D64), whose
    warps and the loader's warpgroup it counts."""
    block_n, stages, _, _, _ = flash_fwd_hopper.HOPPER_CONFIGS[head_dim]
    assert flash_fwd_hopper.tile_record(head_dim) == (rows, block_n, warps, stages, True)


def test_a_launch_has_a_program_per_tile_or_at_most_one_per_sm(monkeypatch):
    """2 x 8 heads of 2100 rows (33 parts of 64 rows) in 3-part tiles: 11 tiles a column, 176
    in all; with the 8 heads of a KV group stacked, 2 columns of 33 x 8 parts, 88 tiles each."""
    gpu = torch.device("cuda", 0)
    for sms, persistent_programs in ((16, 16), (132, 132), (200, 176)):
        monkeypatch.setattr(flash_fwd_hopper, "sm_count", lambda device, sms=sms: sms)
        assert flash_fwd_hopper.launch_shape(2, 2100, 8, False, 3, gpu) == (176, 11, 16)
        assert flash_fwd_hopper.launch_shape(2, 2100, 8, True, 3, gpu) == (
            persistent_programs, 11, 16)
        assert flash_fwd_hopper.launch_shape(2, 2100, 8, False, 3, gpu, stack=8) == (
            176, 88, 2)


@pytest.mark.parametrize("causal, heads_kv, consumers, stack", [
    (True, 2, 3, 4), (True, 8, 3, 1), (False, 2, 3, 1), (True, 2, 2, 1)])
def test_a_kv_groups_heads_are_stacked_where_a_causal_tile_spans_part_of_a_key_tile(
        causal, heads_kv, consumers, stack):
    """Stacked: causal, GQA (8 query heads on 2 KV heads), and tiles of three 64-row parts
    against 128-key tiles (two parts make one key tile). Wherever the heads lie in memory: the
    loader reads each part's rows through the (B, S, H, D) descriptor."""
    assert flash_fwd_hopper.stacked_heads(causal, 8 // heads_kv, consumers, 128) == stack


@pytest.mark.parametrize("head_dim, causal, stacked, stabilize, below", [
    (64, False, False, True, 16384), (64, False, False, False, 16384),
    (128, False, False, True, 16384), (128, False, False, False, 16384),
    (128, True, False, True, 8192), (128, True, False, False, 32768),
    (64, True, True, True, 16384), (64, True, True, False, 16384),
    (64, True, False, True, 0), (64, True, False, False, 0)])
def test_persistent_launches_where_measured_faster(head_dim, causal, stacked, stabilize, below):
    """Without a causal mask below 16384 rows, with the fix and without (session 100); with one
    at D128 below 8192 with the fix and 32768 without, and below 16384 at D64 where a tile stacks
    a KV group's heads; never for other D64 causal tiles (MHA's)."""
    for rows in [r for r in (2048, 4096, below - 1, below, 2 * below) if r > 0]:
        expected = 0 < rows < below
        assert flash_fwd_hopper.persistent_launch(head_dim, causal, rows, stacked,
                                                  stabilize) == expected


def _forward_launch(monkeypatch, head_dim, heads_kv, seqlen, causal=True, stabilize=True,
                    config=None, heads_adjacent=True) -> KernelStandIn:
    """The Gluon forward's launch (grid, arguments, compile-time switches) for 16 query heads on
    ``heads_kv`` KV heads, on a stand-in kernel and a 4-SM GPU; q's heads adjacent in memory
    (B, S, H, D) or not (a (B, H, S, D) tensor's transpose)."""
    kernel = KernelStandIn(flash_fwd_hopper._fwd_ws_kernel.arg_names)
    monkeypatch.setattr(flash_fwd_hopper, "_fwd_ws_kernel", kernel)
    monkeypatch.setattr(flash_fwd_hopper, "sm_count", lambda device: 4)
    q = torch.zeros(1, seqlen, 16, head_dim, dtype=torch.bfloat16)
    if not heads_adjacent:
        q = torch.zeros(1, 16, seqlen, head_dim, dtype=torch.bfloat16).transpose(1, 2)
    k = torch.zeros(1, seqlen, heads_kv, head_dim, dtype=torch.bfloat16)
    flash_fwd_hopper.flash_attn_fwd_hopper(q, k, k, softmax_scale=1.0, causal=causal,
                                           stabilize=stabilize, beta=2.0, tie_window=0.0,
                                           min_gap=0.0, max_gap=1.0, config=config)
    return kernel


@pytest.mark.parametrize("head_dim, heads_kv, seqlen, adjacent, persistent", [
    (128, 16, 2048, True, True), (64, 2, 4096, True, True), (64, 8, 8192, True, True),
    (64, 2, 4096, False, True), (64, 16, 4096, True, False), (128, 16, 8192, True, False)])
def test_a_persistent_causal_launch_gets_a_zeroed_counter(monkeypatch, head_dim, heads_kv,
                                                          seqlen, adjacent, persistent):
    """Its programs take their tiles from ``QUEUE[0]`` and hand them to their consumers through
    one slot each after it; other launches pass a placeholder. (At D64 only tiles that stack a
    KV group's heads launch persistent, wherever the heads lie in memory: Q's descriptor
    carries its strides.)"""
    kernel = _forward_launch(monkeypatch, head_dim, heads_kv, seqlen, heads_adjacent=adjacent)
    q_desc = kernel.arg("Q")
    row, head = (16 * head_dim, head_dim) if adjacent else (head_dim, seqlen * head_dim)
    assert q_desc.strides == [16 * seqlen * head_dim, row, head, 1]
    assert q_desc.block_shape == [1, 64, 1, head_dim]
    queue = kernel.arg("QUEUE")
    consumers = flash_fwd_hopper.HOPPER_CONFIGS[head_dim][3]
    assert (kernel.grid == (4,)) == persistent
    if persistent:
        assert queue.dtype == torch.int32 and queue.shape == (1 + 4 * consumers,)
        assert not queue.any()
    else:
        assert queue.dtype == torch.float32  # the lse, unread


@pytest.mark.parametrize("head_dim, heads_kv, causal, stabilize, config, pingpong", [
    (64, 2, True, True, None, False), (64, 4, True, True, None, False),
    (64, 8, True, True, None, True), (64, 2, True, False, None, True),
    (64, 16, True, True, None, True),
    (64, 2, False, True, None, True), (128, 2, True, True, None, False),
    (64, 2, True, True, (128, 2, 160, 3, True), True)])
def test_stacked_heads_launch_without_ping_pong_with_the_fix(
        monkeypatch, head_dim, heads_kv, causal, stabilize, config, pingpong):
    """The table's ping-pong is off with the fix where 3 or more of a KV group's heads are
    stacked (D64 causal GQA 4:1 and 8:1); with two stacked, without the fix, for MHA, without a
    mask and with an explicit ``config`` the launch keeps it (D128's table has none)."""
    kernel = _forward_launch(monkeypatch, head_dim, heads_kv, 4096, causal=causal,
                             stabilize=stabilize, config=config)
    assert kernel.kwargs["PINGPONG"] is pingpong
    stacked = kernel.arg("stack") > 1
    assert stacked == (head_dim == 64 and causal and heads_kv < 16)


BWD_COVERED = dict(varlen=False, window_left=-1, window_right=-1, causal=True,
                   has_softcap=False, dropout_p=0.0, key_padding_mask=None, tma_ok=True)


def _kv(q, heads=None):
    """An empty K or V for ``q`` (B, S, H, D): ``heads`` KV heads, ``q``'s by default (MHA)."""
    return torch.empty(*q.shape[:2], heads or q.shape[2], q.shape[3], dtype=q.dtype)


def _bwd_routes(q, heads_kv=None, **features):
    """``flash_bwd_hopper.routes`` of ``q`` with ``heads_kv`` KV heads (MHA by default)."""
    return flash_bwd_hopper.routes(q, _kv(q, heads_kv), **features)


def test_a_dense_head_dim_128_backward_takes_the_gluon_dkdv(sm90):
    assert _bwd_routes(_q(), **BWD_COVERED)[1]
    assert _bwd_routes(_q(), **{**BWD_COVERED, "causal": False})[1]
    assert _bwd_routes(_q(), 1, **BWD_COVERED)[1]


def test_the_dq_kernel_follows_its_own_routes(sm90, monkeypatch):
    monkeypatch.setattr(flash_bwd_hopper, "DQ_FASTER", {(64, True)})
    assert _bwd_routes(_q(64), **BWD_COVERED)[0]
    assert not _bwd_routes(_q(), **BWD_COVERED)[0]
    assert not _bwd_routes(_q(64), **{**BWD_COVERED, "causal": False})[0]


@pytest.mark.parametrize("heads_kv, seqlen, causal, gluon", [
    (2, 128, False, True), (2, 2048, False, True), (2, 1024, True, False), (2, 2048, True, False),
    (2, 4095, True, False), (2, 4096, True, True), (1, 128, False, True), (1, 2047, True, False),
    (1, 2048, True, True), (1, 8192, True, True),
])
def test_head_dim_64_takes_the_gluon_dkdv_causal_from_4096_rows_or_2048_with_gqa(
        sm90, heads_kv, seqlen, causal, gluon):
    """Measured faster not causal at any length (kernel_notes v20c), causal MHA from 4096 rows
    under Triton 3.6 once the Triton dK/dV read lse and delta through descriptors (session 63)
    and under 3.9 once this kernel did too (v96a; session 97), GQA from 2048 (v96a, session
    96); its dQ stays Triton."""
    call = {**BWD_COVERED, "causal": causal}
    assert _bwd_routes(_q(64, seqlen), heads_kv, **call) == (False, gluon)


@pytest.mark.parametrize("change", [
    {"tma_ok": False}, {"varlen": True}, {"causal": False, "window_right": 0},
    {"window_left": 16}, {"has_softcap": True}, {"dropout_p": 0.1},
    {"key_padding_mask": torch.ones(1, 128, dtype=torch.bool)},
], ids=lambda c: next(iter(c)))
def test_every_feature_the_dkdv_kernel_lacks_takes_the_triton_one(sm90, change):
    assert _bwd_routes(_q(), **{**BWD_COVERED, **change}) == (False, False)


@pytest.mark.parametrize("gluon, covered", [
    (lambda q, **f: flash_fwd_hopper.covers(q, **f), COVERED),
    (lambda q, **f: any(_bwd_routes(q, **f)), BWD_COVERED),
], ids=["forward", "backward"])
def test_other_gpus_and_the_switch_take_the_triton_kernels(monkeypatch, gluon, covered):
    """The Gluon kernels follow the forward module's GPU test and HF_STABLE_ATTN_GLUON."""
    monkeypatch.setattr(flash_fwd_hopper, "_is_sm90", lambda index: False)
    assert not gluon(_q(), **covered)
    monkeypatch.setattr(flash_fwd_hopper, "_is_sm90", lambda index: True)
    monkeypatch.setattr(flash_fwd_hopper, "ENABLED", False)
    assert not gluon(_q(), **covered)


@pytest.mark.parametrize("hip, capability, expected", [
    (None, (9, 0), True), (None, (9, 4), False), (None, (10, 0), False), (None, (8, 0), False),
    ("6.4", (9, 0), False)], ids=["H100", "sm94", "B200", "A100", "ROCm-gfx90a"])
def test_the_gluon_kernels_need_an_nvidia_hopper(monkeypatch, hip, capability, expected):
    """Compute capability 9.0 under CUDA; ROCm reports AMD's gfx90a as 9.0 too."""
    monkeypatch.setattr(torch.version, "hip", hip)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda index=None: capability)
    flash_fwd_hopper._is_sm90.cache_clear()
    try:
        assert flash_fwd_hopper._is_sm90(0) == expected
    finally:
        flash_fwd_hopper._is_sm90.cache_clear()


@pytest.mark.parametrize("programs, causal, expected", [
    (128, False, 2),   # GQA 8:1, B 4, 2 KV heads, 2048 tokens: one wave needs 2 splits
    (256, False, 1),   # the same at 4096 tokens: a wave already
    (128, True, 4),    # causal: 8 programs per SM would need 8 splits, at most 4 are taken
    (512, True, 4),    # causal at 8192 tokens: 4 splits reach 8 per SM
    (2048, True, 1),   # enough programs unsplit
])
def test_the_gluon_dkdv_splits_groups_by_its_own_rule(programs, causal, expected):
    """One program per SM: without a causal mask one wave, with one 8 programs per SM but at
    most 4 splits (``flash_bwd_hopper.PROGRAMS_PER_SM``, ``MOST_SPLITS``; H100, 132 SMs)."""
    from hf_stable_attn.kernels import flash_bwd

    assert flash_bwd.group_splits(programs, 8, 132, flash_bwd_hopper.PROGRAMS_PER_SM[causal],
                                  flash_bwd_hopper.MOST_SPLITS) == expected

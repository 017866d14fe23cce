"""The Triton kernels on a CUDA GPU against float64 (``pytest -m gpu``).

The flash-attention acceptance rule: the kernel's error against a float64 oracle may be at most
2x (forward) / 3x (dQ, dK, dV) the error of the same attention in plain PyTorch in the input
dtype, plus a small slack. The sweep covers head dims {32, 40, 64, 80, 96, 111, 128, 160, 192,
256} x (Sq, Sk) pairs, rotating MHA/MQA/GQA, bf16/fp16, causal, window and dropout over the grid
so every feature meets several head dims and lengths without the full product's compile time.
Set HF_STABLE_ATTN_AUTOTUNE=0 for quicker compiles (one config per head dim).
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys

import pytest
import torch

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]

if torch.cuda.is_available():
    from hf_stable_attn.kernels import LAUNCHES, flash_attn_bwd, flash_attn_fwd, flash_fwd
    from hf_stable_attn.kernels._common import AUTOTUNE, TMA_MIN_SEQLEN, tma_ready

from hf_stable_attn.shift_rule import row_shift, shift_params  # noqa: E402
from hf_stable_attn.testing import (  # noqa: E402
    check_flash_rule, fix_kwargs, launch_kwargs, near_tie_inputs, oracle_with_grads,
)

HEAD_DIMS = [32, 40, 64, 80, 96, 111, 128, 160, 192, 256]
SEQ_PAIRS = [(113, 203), (128, 217), (1023, 1024), (1024, 1023), (2048, 2048)]
HEADS = [(4, 4), (4, 1), (6, 2)]  # MHA, MQA, GQA
DTYPES = [torch.bfloat16, torch.float16]


def _sweep():
    cases = []
    for i, (d, (sq, sk)) in enumerate(itertools.product(HEAD_DIMS, SEQ_PAIRS)):
        hq, hk = HEADS[i % 3]
        dtype = DTYPES[(i // 3) % 2]
        causal = i % 2 == 1
        window = (37, 11) if i % 5 == 2 else (-1, -1)
        dropout = 0.17 if i % 7 == 4 else 0.0
        batch = 1 if sq * sk > 1_000_000 else 2
        cases.append(pytest.param(batch, sq, sk, hq, hk, d, dtype, causal, window, dropout,
                                  id=f"d{d}-{sq}x{sk}-h{hq}:{hk}-{str(dtype)[6:]}"
                                     f"{'-causal' if causal else ''}"
                                     f"{'-win' if window[0] >= 0 else ''}"
                                     f"{'-drop' if dropout else ''}"))
    return cases


def _masking(q, k, **kw):
    """Launcher keywords for dense q/k; packed calls pass cu_seqlens_q/k and max_seqlen_q/k."""
    return launch_kwargs(q.shape[1], k.shape[1], q.shape[-1], **kw)


def _fwd(q, k, v, m, params=None, return_shift=False):
    params = params or shift_params(q.dtype)
    return flash_attn_fwd(q, k, v, **m, **fix_kwargs(params), return_shift=return_shift)


def _check_against_float64(q, k, v, m, name):
    out, lse = _fwd(q, k, v, m)
    assert torch.isfinite(out).all(), f"{name}: non-finite output"
    dout = torch.randn_like(q)
    dq, dk, dv = flash_attn_bwd(dout, q, k, v, out, lse, **m, deterministic=True)

    exact, exact_g = oracle_with_grads(q, k, v, dout, torch.float64, **m)
    plain, plain_g = oracle_with_grads(q, k, v, dout, q.dtype, **m)
    check_flash_rule(f"{name} out", out, plain, exact, 2.0, slack=1e-4)
    for g, got, pl, ex in zip(("dq", "dk", "dv"), (dq, dk, dv), plain_g, exact_g):
        check_flash_rule(f"{name} {g}", got, pl, ex, 3.0, slack=1e-4)
    return out, lse, dout


@pytest.mark.parametrize("batch,sq,sk,hq,hk,d,dtype,causal,window,dropout", _sweep())
def test_sweep_against_float64(batch, sq, sk, hq, hk, d, dtype, causal, window, dropout):
    torch.manual_seed(sq * 7 + d)
    q = torch.randn(batch, sq, hq, d, device="cuda", dtype=dtype)
    k = torch.randn(batch, sk, hk, d, device="cuda", dtype=dtype)
    v = torch.randn(batch, sk, hk, d, device="cuda", dtype=dtype)
    m = _masking(q, k, causal=causal, window_left=window[0], window_right=window[1],
                 dropout_p=dropout, seed=1234 + d)
    _check_against_float64(q, k, v, m, "dense")


@pytest.mark.parametrize("d,dtype", [(64, torch.bfloat16), (111, torch.float16), (128, torch.bfloat16)])
@pytest.mark.parametrize("causal", [False, True])
def test_varlen_random_padding(d, dtype, causal):
    torch.manual_seed(d)
    lens_q = torch.randint(1, 300, (5,)).tolist()
    lens_k = [lq + int(torch.randint(0, 80, ())) for lq in lens_q]
    cu_q = torch.tensor([0] + list(itertools.accumulate(lens_q)), dtype=torch.int32, device="cuda")
    cu_k = torch.tensor([0] + list(itertools.accumulate(lens_k)), dtype=torch.int32, device="cuda")
    q = torch.randn(sum(lens_q), 6, d, device="cuda", dtype=dtype)
    k = torch.randn(sum(lens_k), 2, d, device="cuda", dtype=dtype)
    v = torch.randn(sum(lens_k), 2, d, device="cuda", dtype=dtype)
    m = _masking(q, k, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, max_seqlen_q=max(lens_q),
                 max_seqlen_k=max(lens_k), causal=causal, dropout_p=0.1 if causal else 0.0, seed=5)
    _check_against_float64(q, k, v, m, "varlen")


@pytest.mark.parametrize("sk", [300, 2048], ids=["pointer-loads", "tma"])
def test_key_padding_mask_against_float64(sk):
    """A (B, Sk) key padding mask (what a compiled model's padded batches and static caches
    use): left padding, a hole with an unfilled tail, and decoding rows, against float64."""
    torch.manual_seed(sk)
    q = torch.randn(3, 64, 4, 64, device="cuda", dtype=torch.bfloat16)
    k, v = (torch.randn(3, sk, 2, 64, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    mask = torch.ones(3, sk, dtype=torch.bool, device="cuda")
    mask[0, : sk // 3] = False
    mask[1, 10:90] = False
    mask[1, sk - 40:] = False
    _check_against_float64(q, k, v, _masking(q, k, causal=True, key_padding_mask=mask),
                           f"key padding sk={sk}")
    decode = q[:, -1:].contiguous()
    _check_against_float64(decode, k, v, _masking(decode, k, causal=True, key_padding_mask=mask),
                           f"key padding decode sk={sk}")


@pytest.mark.parametrize("sq,sk,causal", [(1, 3000, True), (1, 1500, False), (5, 1100, False)],
                         ids=["causal", "no-mask-from-1024", "chunk-no-mask-from-1024"])
@pytest.mark.parametrize("d", [64, 128])
def test_decode_step_against_float64(sq, sk, causal, d):
    """Decoding steps (one query row, or a short chunk) against long caches, GQA 4:1: each on
    the Triton forward's TMA configs (too few rows for the Gluon one), which calls without a
    mask take from 1024 keys (``TMA_MIN_SEQLEN_UNMASKED``): TMA-ready, and launched as the
    table's first entry (a TMA one at D64 and D128) where autotuning is off, as in the suite."""
    torch.manual_seed(sk + d)
    q = torch.randn(2, sq, 8, d, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(2, sk, 2, d, device="cuda", dtype=torch.bfloat16)
    v = torch.randn_like(k)
    assert tma_ready(max(sq, sk), k, v, windowed=causal)
    LAUNCHES["fwd"].last = None
    _check_against_float64(q, k, v, _masking(q, k, causal=causal), "decode")
    assert LAUNCHES["fwd"].last[4] or AUTOTUNE, "expected a TMA config of the Triton forward"


@pytest.mark.parametrize("d", [64, 128])
@pytest.mark.parametrize("window_left", [-1, 300], ids=["causal", "causal-window"])
def test_tma_backward_with_partial_tiles_and_a_window(d, window_left, monkeypatch):
    """The Triton dQ and dK/dV on their TMA entries (Gluon's kernels off) enter a range of
    tiles only where it holds one (``_common.runs_range``): a causal call with partial last
    tiles, bottom-right aligned (the dK/dV's rows past the causal band), and with a left window
    (the dQ's keys before it), against float64."""
    if flash_fwd.flash_fwd_hopper is not None:
        monkeypatch.setattr(flash_fwd.flash_fwd_hopper, "ENABLED", False)
    torch.manual_seed(d + window_left)
    q = torch.randn(1, TMA_MIN_SEQLEN + 77, 4, d, device="cuda", dtype=torch.bfloat16)
    k, v = (torch.randn(1, TMA_MIN_SEQLEN + 141, 2, d, device="cuda", dtype=torch.bfloat16)
            for _ in range(2))
    assert tma_ready(k.shape[1], q, k, v)
    LAUNCHES["dq"].last = LAUNCHES["dkdv"].last = None
    _check_against_float64(q, k, v, _masking(q, k, causal=True, window_left=window_left),
                           f"tma window={window_left}")
    assert AUTOTUNE or (LAUNCHES["dq"].last[4] and LAUNCHES["dkdv"].last[4]), \
        "expected the TMA entries (the tables' first at head dims 64 and 128)"


def test_softcap():
    torch.manual_seed(0)
    q = torch.randn(2, 300, 8, 64, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(2, 300, 8, 64, device="cuda", dtype=torch.bfloat16) * 3
    v = torch.randn_like(k)
    _check_against_float64(q, k, v, _masking(q, k, causal=True, softcap=5.0), "softcap")


def test_fully_masked_rows_are_zero_not_nan():
    torch.manual_seed(0)
    q = torch.randn(1, 300, 4, 64, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(1, 100, 4, 64, device="cuda", dtype=torch.bfloat16)
    v = torch.randn_like(k)
    m = _masking(q, k, causal=True)
    out, lse = _fwd(q, k, v, m)
    assert (out[:, :200] == 0).all() and torch.isinf(lse[:, :, :200]).all()
    dq, dk, dv = flash_attn_bwd(torch.randn_like(q), q, k, v, out, lse, **m, deterministic=True)
    assert torch.isfinite(dq).all() and torch.isfinite(dk).all() and torch.isfinite(dv).all()
    assert (dq[:, :200] == 0).all()


def test_backward_is_deterministic():
    torch.manual_seed(0)
    q = torch.randn(2, 1000, 8, 128, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(2, 1000, 2, 128, device="cuda", dtype=torch.bfloat16)
    v = torch.randn_like(k)
    m = _masking(q, k, causal=True, dropout_p=0.1, seed=3)
    out, lse = _fwd(q, k, v, m)
    dout = torch.randn_like(q)
    first = flash_attn_bwd(dout, q, k, v, out, lse, **m, deterministic=True)
    for _ in range(3):
        again = flash_attn_bwd(dout, q, k, v, out, lse, **m, deterministic=True)
        assert all(torch.equal(a, b) for a, b in zip(first, again))


@pytest.mark.parametrize("shape,opts", [
    ((2, 1024, 12, 12, 64), dict(causal=True, dropout_p=0.1)),  # a GPT-2 training call
    ((1, 2048, 8, 1, 64), dict(softcap=30.0)),  # TMA loads, group split
    ((2, 333, 6, 2, 96), dict(window_left=50, window_right=7)),
], ids=["gpt2-dropout", "mqa-softcap-tma", "gqa-window-odd"])
def test_planned_calls_give_the_full_paths_bits(shape, opts):
    """A call with an earlier call's signature launches that call's plan (``_prepared``): its
    outputs and gradients equal the full path's bit for bit, also with another dropout seed."""
    from hf_stable_attn.kernels import _prepared, clear_plans

    batch, seqlen, hq, hk, d = shape
    gen = torch.Generator(device="cuda").manual_seed(seqlen)
    q, dout = (torch.randn(batch, seqlen, hq, d, device="cuda", dtype=torch.bfloat16,
                           generator=gen) for _ in range(2))
    k, v = (torch.randn(batch, seqlen, hk, d, device="cuda", dtype=torch.bfloat16,
                        generator=gen) for _ in range(2))

    def call(seed):
        m = _masking(q, k, **opts, seed=seed)
        out, lse = _fwd(q, k, v, m)
        return (out, lse, *flash_attn_bwd(dout, q, k, v, out, lse, **m))

    full = call(seed=11)
    assert _prepared._PLANS, "no plan was made"
    assert all(torch.equal(a, b) for a, b in zip(full, call(seed=11)))
    call(seed=2**40 + 5)  # the plan for 64-bit seeds
    planned = call(seed=2**40 + 7)
    clear_plans()
    assert all(torch.equal(a, b) for a, b in zip(planned, call(seed=2**40 + 7)))


def test_dropout_seeds_share_the_compiled_kernels():
    """Training draws a new dropout seed per call; a seed divisible by 16 must not compile (or
    load) a second variant of any of the three kernels (``_common.seeded_jit``)."""
    from hf_stable_attn.kernels import flash_bwd, flash_fwd

    kernels = (flash_fwd._fwd_kernel, flash_bwd._dq_kernel, flash_bwd._dkdv_kernel)
    device = torch.cuda.current_device()
    torch.manual_seed(0)
    q, k, v, dout = (torch.randn(1, 300, 2, 64, device="cuda", dtype=torch.bfloat16)
                     for _ in range(4))

    def train_call(seed):
        m = _masking(q, k, causal=True, dropout_p=0.1, seed=seed)
        out, lse = _fwd(q, k, v, m)
        return out, flash_attn_bwd(dout, q, k, v, out, lse, **m, deterministic=True)

    first = train_call(2**40 + 17)
    compiled = [len(kernel.device_caches[device][0]) for kernel in kernels]
    again = train_call(2**40 + 32)
    assert [len(kernel.device_caches[device][0]) for kernel in kernels] == compiled
    assert not torch.equal(first[0], again[0]), "different seeds must drop different entries"


# One training call (forward and backward) in a fresh process, autotuning on; prints, per kernel,
# whether its launcher timed configs and which ones it picked.
_AUTOTUNE_CHILD = """
import json, torch
from hf_stable_attn.kernels import LAUNCHES, flash_attn_bwd, flash_attn_fwd
from hf_stable_attn.shift_rule import shift_params
from hf_stable_attn.testing import fix_kwargs, launch_kwargs
q, k, v, dout = (torch.randn(2, 2048, 4, 64, device="cuda", dtype=torch.bfloat16) for _ in range(4))
m = launch_kwargs(2048, 2048, 64, causal=True)
out, lse = flash_attn_fwd(q, k, v, **m, **fix_kwargs(shift_params(q.dtype)))
flash_attn_bwd(dout, q, k, v, out, lse, **m, deterministic=True)
torch.cuda.synchronize()
print(json.dumps({name: [bool(launch.timings), sorted(map(str, launch.chosen.values()))]
                  for name, launch in LAUNCHES.items()}))
"""


def test_autotuning_is_kept_on_disk(tmp_path):
    """A second process finds the first one's picks in Triton's cache directory and launches the
    same configs without timing them; HF_STABLE_ATTN_AUTOTUNE_CACHE=0 times them. (The Triton
    forward's: on an H100 this call's forward would otherwise take the untuned Gluon kernel.)"""

    def child(cache: str) -> dict:
        env = {**os.environ, "TRITON_CACHE_DIR": str(tmp_path), "HF_STABLE_ATTN_AUTOTUNE": "1",
               "HF_STABLE_ATTN_AUTOTUNE_CACHE": cache, "HF_STABLE_ATTN_GLUON": "0"}
        done = subprocess.run([sys.executable, "-c", _AUTOTUNE_CHILD], env=env, text=True,
                              capture_output=True)
        assert done.returncode == 0, done.stderr[-2000:]
        return json.loads(done.stdout.strip().splitlines()[-1])

    first, second, uncached = child("1"), child("1"), child("0")
    for name in first:
        assert first[name][0] and uncached[name][0], f"{name}: the first process must time configs"
        assert not second[name][0], f"{name}: the second process timed configs again"
        assert second[name][1] == first[name][1], f"{name}: the cached pick differs"


@pytest.mark.parametrize("positions", [(3, 9), (5, 200), (2, 130, 700)], ids=["one-tile", "two-tiles", "three-tiles"])
def test_structural_no_p_rounds_to_one(positions):
    """Repeated maxima inside one tile and across tiles: with the fix no P that reaches P @ V
    rounds to 1.0 on a tied row; without it the maximum rounds to exactly 1.0."""
    torch.manual_seed(21)
    d, sq, sk = 64, 256, 1024
    u = torch.randn(d, device="cuda")
    q = (0.3 * torch.randn(1, sq, 1, d, device="cuda") + u).to(torch.bfloat16)
    k = (0.3 * torch.randn(1, sk, 1, d, device="cuda")).to(torch.bfloat16)
    for j in positions:
        k[0, j, 0] = (3 * u).to(torch.bfloat16)
    v = torch.randn(1, sk, 1, d, device="cuda").to(torch.bfloat16)
    m = _masking(q, k)
    s = (q[0, :, 0].float() @ k[0, :, 0].float().T) * m["softmax_scale"]
    top = s.topk(2, -1).values
    assert (top[:, 0] == top[:, 1]).all(), "construction must tie"

    def p_max(shift):
        return torch.exp(s - shift[0, 0][:, None]).to(torch.bfloat16).float().max(-1).values

    _, _, shift = _fwd(q, k, v, m, return_shift=True)
    assert (p_max(shift) < 1.0).all()
    _, _, plain = _fwd(q, k, v, m, shift_params(q.dtype, stabilize=False), return_shift=True)
    assert (p_max(plain) == 1.0).all()


@pytest.mark.parametrize("sk", [1008, 4096], ids=["pointer-loads", "tma-loads"])
def test_tie_decisions_match_the_shift_rule(sk):
    """Rows whose top two scores (in different key tiles) lie a few bf16 steps apart, some inside
    the tie window and some outside: every row's shift equals ``shift_rule.row_shift`` of its
    top two scores. Both lengths, since from ``TMA_MIN_SEQLEN_UNMASKED`` (1024 keys without a
    mask) on other tile configs run."""
    # Drawn on the CPU: the fractions below were checked for these seeds.
    q, k, v = (t.cuda() for t in near_tie_inputs(64, 512, sk, seed=sk))
    m = _masking(q, k)
    params = shift_params(q.dtype)
    s = (q[0, :, 0].float() @ k[0, :, 0].float().T) * m["softmax_scale"]
    top = s.topk(2, -1).values
    gap = top[:, 0] - top[:, 1]
    tied = gap <= params.tie_window
    assert tied.any() and (~tied).any(), "construction must give tied and untied rows"

    _, _, shift = _fwd(q, k, v, m, return_shift=True)
    expected = row_shift(top[:, 0], top[:, 1], params)
    clear = (gap - params.tie_window).abs() > 1e-4  # fp32 summation order decides the rest
    assert clear.float().mean() > 0.9
    got = shift[0, 0]
    assert torch.allclose(got[clear], expected[clear], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_group_split_partials_are_the_in_order_fp32_sum_rounded_to_nearest(dtype):
    from hf_stable_attn.kernels import flash_bwd

    partials = torch.randn(4, 3, 1000, 2, 64, device="cuda")
    out = flash_bwd.sum_partials(partials, dtype)
    expected = partials[0].clone()
    for partial in partials[1:]:
        expected += partial
    assert torch.equal(out, expected.to(dtype))

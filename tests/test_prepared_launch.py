"""Prepared launches (``kernels/_prepared.py``), with stand-in kernels on the CPU: a call that
hits a plan hands the compiled kernels exactly the grid and arguments that the launchers' full
path hands them for the same inputs, and calls that differ in anything the plan fixed take the
full path."""

import pytest
import torch
from triton.tools.tensor_descriptor import TensorDescriptor

from hf_stable_attn.kernels import _common, _prepared, flash_bwd, flash_fwd
from hf_stable_attn.shift_rule import shift_params
from hf_stable_attn.testing import fix_kwargs, launch_kwargs

FIX = fix_kwargs(shift_params(torch.bfloat16))


class _Recorder:
    """Stands in for a ``@triton.jit`` kernel and for the kernel it compiles: every launch of
    the compiled one is recorded as ``(grid, positional arguments)``."""

    def __init__(self):
        self.compiled_launches = []

    def __getitem__(self, grid):
        def launch(*args, **kwargs):
            if kwargs:  # the JIT path: compiles (here: returns the stand-in)
                return self
            self.compiled_launches.append((grid, args))
        return launch


@pytest.fixture
def recorders(monkeypatch):
    """The three Triton kernels replaced by recorders, launched as on a GPU that is not a
    Hopper (no interpreter, no autotuning, no Gluon routes), with full-path calls counted;
    plans start empty."""
    monkeypatch.setattr(_common, "INTERPRET", False)
    monkeypatch.setattr(_common, "AUTOTUNE", False)
    monkeypatch.setattr(_prepared, "ENABLED", True)
    monkeypatch.setattr(flash_bwd, "sum_partials", lambda p, dtype: p.sum(0).to(dtype))
    if flash_fwd.flash_fwd_hopper is not None:  # no Hopper GPU here: the Gluon routes are off
        monkeypatch.setattr(flash_fwd.flash_fwd_hopper, "_is_sm90", lambda index: False)
    full_paths = []
    monkeypatch.setattr(flash_fwd, "check_grid", lambda *a: full_paths.append("fwd"))
    monkeypatch.setattr(flash_bwd, "check_grid", lambda *a: full_paths.append("bwd"))
    launches = {"fwd": flash_fwd._fwd_launch, "dq": flash_bwd._dq_launch,
                "dkdv": flash_bwd._dkdv_launch}
    kernels = {}
    for name, launch in launches.items():
        kernels[name] = _Recorder()
        monkeypatch.setattr(launch, "kernel", kernels[name])
        monkeypatch.setattr(launch, "compiled", {})
    _prepared.clear_plans()
    yield kernels, full_paths
    _prepared.clear_plans()


def _same_launch(planned, full, inputs):
    """Equal grids and arguments; tensors: the caller's ``inputs`` by identity, the launchers'
    own allocations by shape, strides and dtype, and the same pattern of repeated tensors."""
    (grid_a, args_a), (grid_b, args_b) = planned, full
    assert grid_a == grid_b and len(args_a) == len(args_b)
    firsts_a, firsts_b = {}, {}
    for i, (a, b) in enumerate(zip(args_a, args_b)):
        if isinstance(a, TensorDescriptor):  # a TMA config's, made per call from its tensor
            assert isinstance(b, TensorDescriptor), f"argument {i}"
            if any(a.base is t for t in inputs) or any(b.base is t for t in inputs):
                assert a.base is b.base, f"argument {i}"
            else:  # over the launcher's own allocation (delta)
                assert a.base.dtype == b.base.dtype, f"argument {i}"
            assert (a.shape, a.strides, a.block_shape) == (b.shape, b.strides, b.block_shape)
        elif isinstance(a, torch.Tensor):
            assert isinstance(b, torch.Tensor)
            if any(a is t for t in inputs) or any(b is t for t in inputs):
                assert a is b, f"argument {i}"
            else:
                assert (a.shape, a.stride(), a.dtype) == (b.shape, b.stride(), b.dtype), f"argument {i}"
            assert firsts_a.setdefault(id(a), i) == firsts_b.setdefault(id(b), i), f"argument {i}"
        else:
            assert type(a) is type(b) and a == b, f"argument {i}: {a!r} != {b!r}"


def _inputs(batch, seqlen, heads, kv_heads, head_dim, seed):
    gen = torch.Generator().manual_seed(seed)
    q = torch.randn(batch, seqlen, heads, head_dim, generator=gen, dtype=torch.bfloat16)
    k, v = (torch.randn(batch, seqlen, kv_heads, head_dim, generator=gen, dtype=torch.bfloat16)
            for _ in range(2))
    return q, k, v


CASES = {
    "causal": dict(shape=(2, 96, 4, 4, 64), causal=True),
    "gqa-window-softcap": dict(shape=(1, 80, 8, 2, 32), window_left=16, softcap=20.0),
    "dropout": dict(shape=(2, 64, 2, 2, 64), dropout_p=0.1, causal=True),
    "tma": dict(shape=(1, _common.TMA_MIN_SEQLEN, 2, 1, 64), causal=True),
}


def _tma_on_this_cpu(monkeypatch, case):
    """For the "tma" case, ``tma_ready`` as on a Hopper GPU: the TMA configs launch."""
    if case == "tma":
        monkeypatch.setattr(_common, "has_tma", lambda device: True)


def _descriptors(args) -> list:
    """``(tensor, box)`` of each TMA descriptor among a launch's arguments."""
    return [(a.base, a.block_shape) for a in args if isinstance(a, TensorDescriptor)]


@pytest.mark.parametrize("case", CASES, ids=list(CASES))
def test_a_planned_forward_launches_what_the_full_path_would(recorders, monkeypatch, case):
    kernels, full_paths = recorders
    _tma_on_this_cpu(monkeypatch, case)
    shape, opts = CASES[case]["shape"], {k: v for k, v in CASES[case].items() if k != "shape"}
    dropout = bool(opts.get("dropout_p"))
    kw = launch_kwargs(shape[1], shape[1], shape[-1], **opts, seed=1234567 if dropout else 0)
    flash_fwd.flash_attn_fwd(*_inputs(*shape, seed=0), **kw, **FIX)  # makes the plan
    q, k, v = _inputs(*shape, seed=1)
    kw["seed"] = 7654321 if dropout else 0  # Triton specializes both seeds alike
    flash_fwd.flash_attn_fwd(q, k, v, **kw, **FIX)
    assert full_paths == ["fwd"]
    _prepared.clear_plans()
    flash_fwd.flash_attn_fwd(q, k, v, **kw, **FIX)
    assert full_paths == ["fwd", "fwd"]
    planned, full = kernels["fwd"].compiled_launches[-2:]
    _same_launch(planned, full, (q, k, v))
    block_n = flash_fwd._fwd_launch.last[1]
    assert _descriptors(planned[1]) == ([(k, [1, block_n, 1, 64]), (v, [1, block_n, 1, 64])]
                                        if case == "tma" else [])
    if dropout:  # the plan was made with another seed: this call's reached the kernel
        assert kw["seed"] in [a for a in planned[1] if type(a) is int]


@pytest.mark.parametrize("vector_tma", [False, True], ids=["lse-pointers", "lse-descriptors"])
@pytest.mark.parametrize("case", CASES, ids=list(CASES))
def test_a_planned_backward_launches_what_the_full_path_would(recorders, monkeypatch, case,
                                                               vector_tma):
    """With ``vector_tma`` (``flash_bwd._VECTOR_TMA``, Triton before 3.9) a TMA config of the
    dK/dV reads lse and delta through descriptors too, box (1, 1, BLOCK_M)."""
    kernels, full_paths = recorders
    _tma_on_this_cpu(monkeypatch, case)
    monkeypatch.setattr(flash_bwd, "_VECTOR_TMA", vector_tma)
    # many SMs: the group split (fp32 partials summed afterwards) for the GQA case
    monkeypatch.setattr(flash_bwd, "sm_count", lambda device: 10_000)
    shape, opts = CASES[case]["shape"], {k: v for k, v in CASES[case].items() if k != "shape"}
    dropout = bool(opts.get("dropout_p"))
    kw = launch_kwargs(shape[1], shape[1], shape[-1], **opts, seed=1234567 if dropout else 0)

    def backward(seed):
        q, k, v = _inputs(*shape, seed=seed)
        out, dout = torch.randn_like(q), torch.randn_like(q)
        lse = torch.randn(shape[0], shape[2], shape[1])
        return (dout, q, k, v, out, lse)

    flash_bwd.flash_attn_bwd(*backward(0), **kw)
    tensors = backward(1)
    kw["seed"] = 7654321 if dropout else 0
    grads = flash_bwd.flash_attn_bwd(*tensors, **kw)
    assert full_paths == ["bwd"]
    _prepared.clear_plans()
    full_grads = flash_bwd.flash_attn_bwd(*tensors, **kw)
    assert full_paths == ["bwd", "bwd"]
    dout, q, k, v = tensors[:4]
    streamed = {"dq": ((k, 1), (v, 1)), "dkdv": ((q, 0), (dout, 0))}  # box rows: BLOCK_N, _M
    for name, launch in (("dq", flash_bwd._dq_launch), ("dkdv", flash_bwd._dkdv_launch)):
        planned, full = kernels[name].compiled_launches[-2:]
        _same_launch(planned, full, tensors)
        expected = [(t, [1, launch.last[rows], 1, 64]) for t, rows in streamed[name]]
        got = _descriptors(planned[1])
        if name == "dkdv" and case == "tma" and vector_tma:
            (lse, lse_box), (delta, delta_box) = got[2:]
            assert lse is tensors[5] and delta.shape == lse.shape and delta is not lse
            assert lse_box == delta_box == [1, 1, launch.last[0]]
            got = got[:2]
        assert got == (expected if case == "tma" else [])
    for g, h in zip(grads, full_grads):
        assert (g.shape, g.stride(), g.dtype) == (h.shape, h.stride(), h.dtype)


def test_calls_that_differ_in_what_a_plan_fixed_take_the_full_path(recorders):
    _, full_paths = recorders
    q, k, v = _inputs(1, 64, 2, 2, 64, seed=0)
    kw = launch_kwargs(64, 64, 64, causal=True)
    calls = [
        (q, k, v, kw, FIX),
        (q, k, v, {**kw, "causal": False}, FIX),  # an option
        (q, k, v, kw, {**FIX, "beta": 4.0}),  # a constant of the fix
        (q[:, :48], k[:, :48], v[:, :48], launch_kwargs(48, 48, 64, causal=True), FIX),  # shape
        (q.half(), k.half(), v.half(), kw, FIX),  # dtype
        (q[:, :63], k[:, :63], v[:, :63], launch_kwargs(63, 63, 64, causal=True), FIX),
        (q.flatten()[4:4 + 63 * 128].view(1, 63, 2, 64), k[:, :63], v[:, :63],  # misaligned
         launch_kwargs(63, 63, 64, causal=True), FIX),
        (q, k, v, {**kw, "dropout_p": 0.1, "seed": 2**40}, FIX),  # a 64-bit seed
    ]
    for q_, k_, v_, kw_, fix_ in calls:
        flash_fwd.flash_attn_fwd(q_, k_, v_, **kw_, **fix_)
    assert len(full_paths) == len(calls)
    for q_, k_, v_, kw_, fix_ in calls:  # each again: its own plan
        flash_fwd.flash_attn_fwd(q_, k_, v_, **kw_, **fix_)
    assert len(full_paths) == len(calls)


def test_masks_sinks_and_strided_heads_are_not_planned(recorders):
    _, full_paths = recorders
    q, k, v = _inputs(1, 64, 2, 2, 64, seed=0)
    kw = launch_kwargs(64, 64, 64)
    mask = torch.ones(1, 64, dtype=torch.bool)
    sinks = torch.zeros(2)
    strided = torch.randn(1, 64, 2, 128, dtype=torch.bfloat16)[..., ::2]
    for _ in range(2):
        flash_fwd.flash_attn_fwd(q, k, v, **{**kw, "key_padding_mask": mask}, **FIX)
        flash_fwd.flash_attn_fwd(q, k, v, **kw, **FIX, sinks=sinks)
        flash_fwd.flash_attn_fwd(strided, k, v, **kw, **FIX)
    assert len(full_paths) == 6


def test_no_plans_without_compiled_kernels(monkeypatch):
    """Under the interpreter (and with plans off) every call takes the full path."""
    monkeypatch.setattr(_common, "INTERPRET", True)
    assert not _prepared.active()
    monkeypatch.setattr(_common, "INTERPRET", False)
    monkeypatch.setattr(_prepared, "ENABLED", False)
    assert not _prepared.active()

"""Every kernel the package launches on a Hopper GPU compiles for sm_90 with the installed
Triton, on the CPU: the three Triton kernels at each tile config of their head-dim 64, 128 and
256 tables (what the tuner picks from on an H100 or H200; 256 is Gemma's), and the Gluon kernels
at every config their tables ship (``flash_fwd_hopper.HOPPER_CONFIGS``,
``flash_bwd_hopper.HOPPER_CONFIGS`` and ``DQ_CONFIGS``), causal or not, the Gluon forward with
the fix on and off.

Only a GPU run calls these kernels, and the GPU machine's Triton (3.6) is older than the one a
fresh install gets (3.9 here), whose Gluon, an experimental dialect, removed the TMA load the
kernels were written with. Without this test a Triton upgrade would first fail on a user's
Hopper GPU. Compiling needs no GPU: Triton lowers to PTX and runs its bundled ptxas. (Whether
the compiled kernels compute the right thing is the GPU suite's job, ``tests/gpu``.)
"""

from __future__ import annotations

import pytest

gluon_runtime = pytest.importorskip("triton.experimental.gluon._runtime")
from triton import compile as triton_compile  # noqa: E402
from triton.backends.compiler import GPUTarget  # noqa: E402
from triton.compiler import ASTSource  # noqa: E402

from hf_stable_attn.kernels import (  # noqa: E402
    flash_bwd, flash_bwd_hopper, flash_fwd, flash_fwd_hopper,
)
from hf_stable_attn.kernels._common import (  # noqa: E402
    COMPILE_OPTIONS, INTERPRET, tile_config,
)

pytestmark = pytest.mark.skipif(INTERPRET, reason="the kernels' GPU code is not traced under "
                                                  "TRITON_INTERPRET=1")

SM90 = GPUTarget("cuda", 90, 32)
FLOATS = {"softmax_scale", "qk_scale", "softcap", "dropout_p", "drop_scale", "beta", "tie_window",
          "min_gap", "max_gap"}
# Pointer arguments that are not the bf16 inputs and outputs.
POINTERS = {"LSE": "*fp32", "SHIFT": "*fp32", "DELTA": "*fp32", "P_DP": "*fp32", "CU_Q": "*i32",
            "CU_K": "*i32", "KPM": "*u8"}


def compile_sm90(kernel, constexprs: dict, num_warps: int = 4, num_stages: int = 1,
                 pointers: dict | None = None, **options):
    """``kernel`` (a Triton or Gluon JIT function) compiled for sm_90 with bf16 tensors (other
    types from ``POINTERS`` and ``pointers``), int32 scalars (the dropout seed int64) and
    16-divisible strides, as a launch on contiguous tensors specializes it, with the options
    every launch passes (``COMPILE_OPTIONS``) and ``options`` (e.g. ``maxnreg``). An int
    argument named in ``constexprs`` compiles as that constant (as Triton specializes 1)."""
    types = {**POINTERS, **(pointers or {})}
    signature, attrs = {}, {}
    for i, param in enumerate(kernel.params):
        name = param.name
        if name in constexprs:
            signature[name] = "constexpr"
        elif name.isupper():
            signature[name] = types.get(name, "*bf16")
            attrs[(i,)] = [["tt.divisibility", 16]]
        elif name in FLOATS:
            signature[name] = "fp32"
        else:
            signature[name] = "i64" if name == "seed" else "i32"
            if name.startswith("stride") and name != "stride_lh":
                attrs[(i,)] = [["tt.divisibility", 16]]
    gluon = isinstance(kernel, gluon_runtime.GluonJITFunction)
    source = (gluon_runtime.GluonASTSource if gluon else ASTSource)(kernel, signature, constexprs,
                                                                     attrs)
    return triton_compile(source, target=SM90,
                          options=dict(num_warps=num_warps, num_stages=num_stages,
                                       **COMPILE_OPTIONS, **options))


# A causal call without dropout, softcap or padding (what training a decoder runs).
CAUSAL_FLAGS = dict(IS_VARLEN=False, HAS_WL=False, HAS_WR=True, HAS_SOFTCAP=False,
                    HAS_DROPOUT=False, HAS_KPM=False, DOT_FP32=False, EVEN_D=True)
TRITON_CASES = [
    pytest.param(launch, head_dim, config, id=f"{name}-d{head_dim}-{'x'.join(map(str, config))}")
    for name, launch in (("fwd", flash_fwd._fwd_launch), ("dq", flash_bwd._dq_launch),
                         ("dkdv", flash_bwd._dkdv_launch))
    for head_dim in (64, 128, 256)
    for config in map(tile_config, launch.table[head_dim])
]


@pytest.mark.parametrize("launch, head_dim, config", TRITON_CASES)
def test_the_triton_kernels_compile(launch, head_dim, config):
    block_m, block_n, warps, stages, tma = config
    constexprs = dict(CAUSAL_FLAGS, BLOCK_D=head_dim, BLOCK_M=block_m, BLOCK_N=block_n,
                      USE_TMA=tma)
    if launch is flash_fwd._fwd_launch:
        # Attention sinks folded in at D64 (gpt-oss's head dim), the plain epilogue at D128.
        constexprs.update(STABILIZE=True, SHIFT_SINGLE=False, RETURN_SHIFT=False,
                          HAS_SINKS=head_dim == 64)
    if launch is flash_bwd._dq_launch:  # the row sums of P * dP, as attention sinks take them
        constexprs.update(ROWSUM_P_DP=head_dim == 64)
    if launch is flash_bwd._dkdv_launch:  # head dim 256's 128-row tiles: the scores rows first
        constexprs.update(ROWS_FIRST_MIN_M=flash_bwd._ROWS_FIRST_MIN_M.get(head_dim, 0))
    compiled = compile_sm90(launch.kernel_for(head_dim), constexprs, warps, stages)
    assert compiled.metadata.num_warps == warps


@pytest.mark.parametrize("persistent", [False, True], ids=["per-tile", "persistent"])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("stabilize", [True, False], ids=["fix", "nofix"])
@pytest.mark.parametrize("head_dim", sorted(flash_fwd_hopper.HOPPER_CONFIGS))
def test_the_gluon_forward_compiles(head_dim, stabilize, causal, persistent):
    block_n, stages, regs, consumers, pingpong = flash_fwd_hopper.HOPPER_CONFIGS[head_dim]
    compiled = compile_sm90(flash_fwd_hopper._fwd_ws_kernel, dict(
        CAUSAL=causal, STABILIZE=stabilize, HEAD_DIM=head_dim, BLOCK_N=block_n, STAGES=stages,
        CONSUMER_REGS=regs, CONSUMERS=consumers, PINGPONG=pingpong, PERSISTENT=persistent,
        num_warps=4))
    assert compiled.metadata.num_warps == 4 * (consumers + 1)  # the consumers and the loader's


@pytest.mark.parametrize("split", [False, True], ids=["bf16-dkdv", "fp32-partials"])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("head_dim", sorted(flash_bwd_hopper.HOPPER_CONFIGS))
def test_the_gluon_dkdv_compiles(head_dim, causal, split):
    stages, regs, tile_m = flash_bwd_hopper.HOPPER_CONFIGS[head_dim]
    partials = {"DK": "*fp32", "DV": "*fp32"} if split else None
    compiled = compile_sm90(flash_bwd_hopper._dkdv_ws_kernel, dict(
        CAUSAL=causal, HEAD_DIM=head_dim, STAGES=stages, TILE_M=tile_m, CONSUMER_REGS=regs,
        num_warps=4), pointers=partials)
    assert compiled.metadata.num_warps == 12


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("head_dim", sorted(flash_bwd_hopper.DQ_CONFIGS))
def test_the_gluon_dq_compiles(head_dim, causal):
    block_n, stages, regs = flash_bwd_hopper.DQ_CONFIGS[head_dim]
    compiled = compile_sm90(flash_bwd_hopper._dq_ws_kernel, dict(
        CAUSAL=causal, HEAD_DIM=head_dim, BLOCK_N=block_n, STAGES=stages, CONSUMER_REGS=regs,
        num_warps=4))
    assert compiled.metadata.num_warps == 12

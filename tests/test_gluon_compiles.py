"""The Gluon Hopper kernels compile for sm_90 with the installed Triton, on the CPU: every config
their tables ship (``flash_fwd_hopper.HOPPER_CONFIGS``, ``flash_bwd_hopper.HOPPER_CONFIGS`` and
``DQ_CONFIGS``), causal or not, the forward with the fix on and off.

Gluon is an experimental dialect whose API moves between Triton releases (3.9 removed the TMA
load the kernels were written with), and only a GPU run calls these kernels, so without this
test a Triton upgrade would first fail on a user's Hopper GPU. Compiling needs no GPU: Triton
lowers to PTX and runs its bundled ptxas. (Whether the compiled kernels compute the right thing
is the GPU suite's job: ``tests/gpu/test_hopper_forward.py``, ``test_hopper_backward.py``.)
"""

from __future__ import annotations

import pytest

gluon_runtime = pytest.importorskip("triton.experimental.gluon._runtime")
from triton import compile as triton_compile  # noqa: E402
from triton.backends.compiler import GPUTarget  # noqa: E402

from hf_stable_attn.kernels import flash_bwd_hopper, flash_fwd_hopper  # noqa: E402

SM90 = GPUTarget("cuda", 90, 32)
FLOATS = {"qk_scale", "softmax_scale", "beta", "tie_window", "min_gap", "max_gap"}
# fp32 tensors; the rest are the bf16 inputs and outputs (DK/DV fp32 when a GQA group is split).
FP32_POINTERS = {"LSE", "DELTA"}


def compile_sm90(kernel, constexprs: dict, fp32: frozenset = frozenset()):
    """``kernel`` compiled for sm_90 with bf16 tensors (``fp32`` names fp32 ones), int32 scalars
    and 16-divisible strides, as a launch on contiguous tensors specializes it."""
    signature, attrs = {}, {}
    for i, param in enumerate(kernel.params):
        name = param.name
        if name in constexprs:
            signature[name] = "constexpr"
        elif name.isupper():
            signature[name] = "*fp32" if name in FP32_POINTERS | fp32 else "*bf16"
            attrs[(i,)] = [["tt.divisibility", 16]]
        elif name in FLOATS:
            signature[name] = "fp32"
        else:
            signature[name] = "i32"
            if name.startswith("stride") and name != "stride_lh":
                attrs[(i,)] = [["tt.divisibility", 16]]
    source = gluon_runtime.GluonASTSource(kernel, signature, constexprs, attrs)
    return triton_compile(source, target=SM90, options=dict(num_warps=4, num_stages=1))


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("stabilize", [True, False], ids=["fix", "nofix"])
@pytest.mark.parametrize("head_dim", sorted(flash_fwd_hopper.HOPPER_CONFIGS))
def test_the_forward_compiles(head_dim, stabilize, causal):
    block_n, stages, regs, consumers = flash_fwd_hopper.HOPPER_CONFIGS[head_dim]
    compiled = compile_sm90(flash_fwd_hopper._fwd_ws_kernel, dict(
        CAUSAL=causal, STABILIZE=stabilize, HEAD_DIM=head_dim, BLOCK_N=block_n, STAGES=stages,
        CONSUMER_REGS=regs, CONSUMERS=consumers, num_warps=4))
    assert compiled.metadata.num_warps == 4 * (consumers + 1)  # the consumers and the loader's


@pytest.mark.parametrize("split", [False, True], ids=["bf16-dkdv", "fp32-partials"])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("head_dim", sorted(flash_bwd_hopper.HOPPER_CONFIGS))
def test_the_dkdv_compiles(head_dim, causal, split):
    stages, regs, tile_m = flash_bwd_hopper.HOPPER_CONFIGS[head_dim]
    compiled = compile_sm90(flash_bwd_hopper._dkdv_ws_kernel, dict(
        CAUSAL=causal, HEAD_DIM=head_dim, STAGES=stages, TILE_M=tile_m, CONSUMER_REGS=regs,
        num_warps=4), fp32=frozenset({"DK", "DV"}) if split else frozenset())
    assert compiled.asm["cubin"]


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("head_dim", sorted(flash_bwd_hopper.DQ_CONFIGS))
def test_the_dq_compiles(head_dim, causal):
    block_n, stages, regs = flash_bwd_hopper.DQ_CONFIGS[head_dim]
    compiled = compile_sm90(flash_bwd_hopper._dq_ws_kernel, dict(
        CAUSAL=causal, HEAD_DIM=head_dim, BLOCK_N=block_n, STAGES=stages, CONSUMER_REGS=regs,
        num_warps=4))
    assert compiled.asm["cubin"]

"""Every kernel the package launches on a Hopper GPU compiles for sm_90 with the installed
Triton, on the CPU: the three Triton kernels at each tile config of their head-dim 64, 128 and
256 tables (what the tuner picks from on an H100 or H200; 256 is Gemma's), and the Gluon kernels
at every config their tables ship (``flash_fwd_hopper.HOPPER_CONFIGS``,
``flash_bwd_hopper.HOPPER_CONFIGS`` and ``DQ_CONFIGS``), causal or not, the Gluon forward with
the fix on and off (and without ping-pong, as its D64 causal GQA launches that stack 3 or more
heads run). The Gluon kernels' TMA descriptor arguments take the boxes their launchers pass
(read from a launch on CPU tensors with the kernel stood in), the Triton kernels' those of
their launchers' ``descriptor_slots``.

Only a GPU run calls these kernels, and the GPU machine's Triton (3.6) is older than the one a
fresh install gets (3.9 here), whose Gluon, an experimental dialect, removed the TMA load the
kernels were written with. Without this test a Triton upgrade would first fail on a user's
Hopper GPU. Compiling needs no GPU: Triton lowers to PTX and runs its bundled ptxas. (Whether
the compiled kernels compute the right thing is the GPU suite's job, ``tests/gpu``.)
"""

from __future__ import annotations

import re

import pytest

pytest.importorskip("triton.experimental.gluon._runtime")
import torch  # noqa: E402
from triton.experimental.gluon.nvidia.hopper import TensorDescriptor  # noqa: E402

from benchmarks.compile_targets import (  # noqa: E402
    compile_for, programs_per_sm, resource_use, training_constexprs,
)
from hf_stable_attn.kernels import LAUNCHES, flash_bwd_hopper, flash_fwd_hopper  # noqa: E402
from hf_stable_attn.kernels._common import INTERPRET, register_cap, tile_config  # noqa: E402
from kernel_stand_in import KernelStandIn  # noqa: E402

pytestmark = pytest.mark.skipif(INTERPRET, reason="the kernels' GPU code is not traced under "
                                                  "TRITON_INTERPRET=1")


def _descriptors(module, kernel_name: str, launch) -> dict[str, TensorDescriptor]:
    """Each host TMA descriptor that ``launch`` (a call of ``module``'s launcher on CPU tensors)
    passes to ``module.<kernel_name>``, stood in, by argument name: what the compiled kernel's
    descriptor arguments must be."""
    stand_in = KernelStandIn(getattr(module, kernel_name).arg_names)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(module, kernel_name, stand_in)
        launch()
    return {name: arg for name, arg in zip(stand_in.arg_names, stand_in.args)
            if isinstance(arg, TensorDescriptor)}


def _tensors(head_dim: int, *shapes) -> list[torch.Tensor]:
    return [torch.zeros(*shape, head_dim, dtype=torch.bfloat16) for shape in shapes]


def _forward_descriptors(head_dim: int) -> dict[str, TensorDescriptor]:
    """``_descriptors`` of the Gluon forward at its table's config for ``head_dim``."""
    q, k = _tensors(head_dim, (1, 256, 4), (1, 256, 2))
    return _descriptors(flash_fwd_hopper, "_fwd_ws_kernel", lambda: (
        flash_fwd_hopper.flash_attn_fwd_hopper(
            q, k, k, softmax_scale=1.0, causal=False, stabilize=True, beta=2.0, tie_window=0.0,
            min_gap=0.0, max_gap=1.0, persistent=False)))


def _backward_descriptors(kernel_name: str, head_dim: int) -> dict[str, TensorDescriptor]:
    """``_descriptors`` of the Gluon dQ or dK/dV kernel at its table's config."""
    q, k = _tensors(head_dim, (1, 256, 4), (1, 256, 2))
    lse = torch.zeros(1, 4, 256)
    launches = {
        "_dq_ws_kernel": lambda: flash_bwd_hopper.dq_hopper(
            q, k, k, q, q, lse, lse, q, softmax_scale=1.0, causal=False),
        "_dkdv_ws_kernel": lambda: flash_bwd_hopper.dkdv_hopper(
            q, k, k, q, lse, lse, k[None], k[None], softmax_scale=1.0, causal=False),
    }
    return _descriptors(flash_bwd_hopper, kernel_name, launches[kernel_name])


def _config_id(config) -> str:
    """``64x64x4x2xTrue`` (with ``xr96`` where the entry caps registers)."""
    *tiles, cap = config
    return "x".join(map(str, tiles)) + (f"xr{cap}" if cap else "")


TRITON_CASES = [
    pytest.param(part, head_dim, config, id=f"{part}-d{head_dim}-{_config_id(config)}")
    for part, launch in LAUNCHES.items()
    for head_dim in (16, 32, 64, 128, 256)
    for config in map(tile_config, launch.table[head_dim])
]
CAPPED_CASES = [case for case in TRITON_CASES if case.values[2][5]]


@pytest.mark.parametrize("part, head_dim, config", TRITON_CASES)
def test_the_triton_kernels_compile(part, head_dim, config):
    _, _, warps, stages, _, _ = config
    # A training call (head dim 256's dK/dV with its 128-row tiles' scores rows first), with
    # attention sinks folded in at D64 (gpt-oss's head dim): in the forward's epilogue, and as
    # the dQ's row sums of P * dP.
    constexprs = training_constexprs(part, head_dim, config)
    if part == "fwd":
        constexprs.update(HAS_SINKS=head_dim == 64)
    if part == "dq":
        constexprs.update(ROWSUM_P_DP=head_dim == 64)
    compiled = compile_for(LAUNCHES[part].kernel_for(head_dim), constexprs, warps, stages,
                           **register_cap(config))
    assert compiled.metadata.num_warps == warps
    # TMA configs read the dense layout through the launcher's descriptors: none is made on
    # the device (``tensormap.replace`` writes one).
    assert "tensormap.replace" not in compiled.asm["ptx"]


DKDV_TMA_CASES = [case for case in TRITON_CASES
                  if case.values[0] == "dkdv" and case.values[2][4] and case.values[1] < 256]


@pytest.mark.parametrize("vector_tma", [False, True], ids=["lse-pointers", "lse-descriptors"])
@pytest.mark.parametrize("part, head_dim, config", DKDV_TMA_CASES)
def test_the_dkdv_reads_lse_and_delta_through_descriptors_where_told(part, head_dim, config,
                                                                     vector_tma):
    """``VECTOR_TMA`` (``flash_bwd._VECTOR_TMA``: Triton before 3.9) takes each query tile's
    lse and delta with a bulk copy through the launcher's descriptors: no element-wise
    ``cp.async`` is left (the pointer build copies them with it), none made on the device."""
    constexprs = {**training_constexprs(part, head_dim, config), "VECTOR_TMA": vector_tma}
    compiled = compile_for(LAUNCHES[part].kernel_for(head_dim), constexprs, config[2], config[3],
                           **register_cap(config))
    ptx = compiled.asm["ptx"]
    assert "tensormap.replace" not in ptx
    assert (re.search(r"cp\.async\.c[ag]\.", ptx) is None) == vector_tma


@pytest.mark.parametrize("part, head_dim, config", CAPPED_CASES)
def test_a_register_cap_fits_more_programs_per_sm(part, head_dim, config):
    """A table entry's register cap is there to fit more of its programs on an SM at once
    (the tables' comments): it must, at the training call's specialization."""
    kernel, warps, stages = LAUNCHES[part].kernel_for(head_dim), config[2], config[3]
    constexprs = training_constexprs(part, head_dim, config)
    capped = compile_for(kernel, constexprs, warps, stages, **register_cap(config))
    free = compile_for(kernel, constexprs, warps, stages)
    assert resource_use(capped)["registers"] <= config[5]
    # Shared memory leaves room for as many programs as the cap does, and uncapped fewer fit.
    fits = 65536 // (config[5] * 32 * warps)
    assert programs_per_sm(capped, warps) == fits > programs_per_sm(free, warps)


@pytest.mark.parametrize("part", sorted(LAUNCHES))
def test_the_triton_kernels_make_their_descriptors_for_packed_sequences(part):
    """Packed sequences (``IS_VARLEN``) at a TMA config: the kernel makes a descriptor per
    sequence and head on the device (``_common.DEVICE_DESCRIPTORS``)."""
    config = next(c for c in map(tile_config, LAUNCHES[part].table[64]) if c[4])
    constexprs = {**training_constexprs(part, 64, config), "IS_VARLEN": True}
    compiled = compile_for(LAUNCHES[part].kernel_for(64), constexprs, config[2], config[3])
    assert "tensormap.replace" in compiled.asm["ptx"]


@pytest.mark.parametrize("persistent", [False, True], ids=["per-tile", "persistent"])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("stabilize", [True, False], ids=["fix", "nofix"])
@pytest.mark.parametrize("head_dim", sorted(flash_fwd_hopper.HOPPER_CONFIGS))
def test_the_gluon_forward_compiles(head_dim, stabilize, causal, persistent):
    block_n, stages, regs, consumers, pingpong = flash_fwd_hopper.HOPPER_CONFIGS[head_dim]
    compiled = compile_for(flash_fwd_hopper._fwd_ws_kernel, dict(
        CAUSAL=causal, STABILIZE=stabilize, HEAD_DIM=head_dim, BLOCK_N=block_n, STAGES=stages,
        CONSUMER_REGS=regs, CONSUMERS=consumers, PINGPONG=pingpong, PERSISTENT=persistent,
        num_warps=4), descriptors=_forward_descriptors(head_dim))
    assert compiled.metadata.num_warps == 4 * (consumers + 1)  # the consumers and the loader's
    # Persistent causal launches take their tiles from a counter (``_next_unit``), only they.
    assert ("atom.global.add.u32" in compiled.asm["ptx"]) == (persistent and causal)


@pytest.mark.parametrize("persistent", [False, True], ids=["per-tile", "persistent"])
def test_the_gluon_forward_compiles_without_ping_pong_for_stacked_heads(persistent):
    """The launch ``flash_attn_fwd_hopper`` makes for D64 causal GQA with the fix where a tile
    stacks 3 or more heads: the table's config with ping-pong off."""
    block_n, stages, regs, consumers, pingpong = flash_fwd_hopper.HOPPER_CONFIGS[64]
    assert pingpong  # else the table's own build above covers this one
    compiled = compile_for(flash_fwd_hopper._fwd_ws_kernel, dict(
        CAUSAL=True, STABILIZE=True, HEAD_DIM=64, BLOCK_N=block_n, STAGES=stages,
        CONSUMER_REGS=regs, CONSUMERS=consumers, PINGPONG=False, PERSISTENT=persistent,
        num_warps=4), descriptors=_forward_descriptors(64))
    assert compiled.metadata.num_warps == 4 * (consumers + 1)


@pytest.mark.parametrize("split", [False, True], ids=["bf16-dkdv", "fp32-partials"])
@pytest.mark.parametrize("causal,grouped",
                         [(False, 0), (True, 0), (True, flash_bwd_hopper.GROUP_PROGRAMS)],
                         ids=["full", "causal", "causal-grouped"])
@pytest.mark.parametrize("head_dim", sorted(flash_bwd_hopper.HOPPER_CONFIGS))
def test_the_gluon_dkdv_compiles(head_dim, causal, grouped, split):
    stages, regs, tile_m = flash_bwd_hopper.HOPPER_CONFIGS[head_dim]
    partials = {"DK": "*fp32", "DV": "*fp32"} if split else None
    compiled = compile_for(flash_bwd_hopper._dkdv_ws_kernel, dict(
        CAUSAL=causal, HEAD_DIM=head_dim, STAGES=stages, TILE_M=tile_m, CONSUMER_REGS=regs,
        GROUP_PROGRAMS=grouped, num_warps=4), pointers=partials,
        descriptors=_backward_descriptors("_dkdv_ws_kernel", head_dim))
    assert compiled.metadata.num_warps == 12


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("head_dim", sorted(flash_bwd_hopper.DQ_CONFIGS))
def test_the_gluon_dq_compiles(head_dim, causal):
    block_n, stages, regs = flash_bwd_hopper.DQ_CONFIGS[head_dim]
    compiled = compile_for(flash_bwd_hopper._dq_ws_kernel, dict(
        CAUSAL=causal, HEAD_DIM=head_dim, BLOCK_N=block_n, STAGES=stages, CONSUMER_REGS=regs,
        num_warps=4), descriptors=_backward_descriptors("_dq_ws_kernel", head_dim))
    assert compiled.metadata.num_warps == 12

"""Our kernels compiled for an NVIDIA GPU on a machine without one: Triton lowers them to PTX and
runs its bundled ptxas, so what a GPU of that compute capability would load can be built (and
its shared memory read) anywhere. The compile tests (``tests/test_sm90_compiles.py``,
``tests/test_other_gpus_compile.py``) and ``benchmarks.shared_memory_fit`` build with this.
"""

from __future__ import annotations

import re
import subprocess
import tempfile

import torch
from triton import compile as triton_compile
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

from hf_stable_attn.kernels import LAUNCHES, _common, flash_bwd
from hf_stable_attn.kernels._common import COMPILE_OPTIONS, register_cap, tile_config
from hf_stable_attn.kernels._ptxas import triton_tool

try:
    from triton.experimental.gluon import _runtime as gluon_runtime
except ImportError:  # a Triton without Gluon: only Triton kernels to build
    gluon_runtime = None

# The most shared memory a block may use (bytes, CUDA's opt-in limit) per compute capability,
# from the CUDA C++ Programming Guide's table of technical specifications, with GPUs of each.
SHARED_PER_BLOCK = {80: 163 * 1024, 86: 99 * 1024, 89: 99 * 1024, 90: 227 * 1024,
                    100: 227 * 1024, 120: 99 * 1024}
GPUS = {80: "A100", 86: "A10, RTX 3090", 89: "L4, L40, RTX 4090", 90: "H100, H200",
        100: "B200", 120: "RTX 5090"}

FLOATS = {"softmax_scale", "qk_scale", "softcap", "dropout_p", "drop_scale", "beta", "tie_window",
          "min_gap", "max_gap"}
# Pointer arguments that are not the bf16 inputs and outputs.
POINTERS = {"LSE": "*fp32", "SHIFT": "*fp32", "DELTA": "*fp32", "P_DP": "*fp32", "CU_Q": "*i32",
            "CU_K": "*i32", "KPM": "*u8", "QUEUE": "*i32"}
# A causal call without dropout, softcap or padding (what training a decoder runs).
CAUSAL_FLAGS = dict(IS_VARLEN=False, HAS_WL=False, HAS_WR=True, HAS_SOFTCAP=False,
                    HAS_DROPOUT=False, HAS_KPM=False, DOT_FP32=False, EVEN_D=True)


def compile_for(kernel, constexprs: dict, num_warps: int = 4, num_stages: int = 1,
                pointers: dict | None = None, capability: int = 90,
                descriptors: dict | None = None, **options):
    """``kernel`` (a Triton or Gluon JIT function) compiled for compute capability
    ``capability`` (90: sm_90a) with bf16 tensors (other types from ``POINTERS`` and
    ``pointers``), int32 scalars (the dropout seed int64) and 16-divisible strides, as a launch
    on contiguous tensors specializes it, with the options every launch passes
    (``COMPILE_OPTIONS``) and ``options`` (e.g. ``maxnreg``). An int argument named in
    ``constexprs`` compiles as that constant (as Triton specializes 1). ``descriptors``: the
    Gluon kernels' host TMA descriptor arguments, name to the ``TensorDescriptor`` a launch
    passes (``descriptor_type``); a Triton kernel's are its launcher's
    (``triton_descriptors``)."""
    types = {**POINTERS, **(pointers or {})}
    gluon = gluon_runtime is not None and isinstance(kernel, gluon_runtime.GluonJITFunction)
    if gluon:
        descriptors = {name: descriptor_type(desc) for name, desc in (descriptors or {}).items()}
    else:
        descriptors = triton_descriptors(kernel, constexprs)
    signature, attrs = {}, {}
    for i, param in enumerate(kernel.params):
        name = param.name
        if name in constexprs:
            signature[name] = "constexpr"
        elif name in descriptors:
            signature[name] = descriptors[name]
        elif name.isupper():
            signature[name] = types.get(name, "*bf16")
            attrs[(i,)] = [["tt.divisibility", 16]]
        elif name in FLOATS:
            signature[name] = "fp32"
        else:
            signature[name] = "i64" if name == "seed" else "i32"
            if name.startswith("stride") and name != "stride_lh":
                attrs[(i,)] = [["tt.divisibility", 16]]
    source = (gluon_runtime.GluonASTSource if gluon else ASTSource)(kernel, signature, constexprs,
                                                                     attrs)
    return triton_compile(source, target=GPUTarget("cuda", capability, 32),
                          options=dict(num_warps=num_warps, num_stages=num_stages,
                                       **COMPILE_OPTIONS, **options))


def triton_descriptors(kernel, constexprs: dict) -> dict[str, str]:
    """The signature types of the ``_common.row_descriptor`` arguments that ``kernel`` (one of
    ``LAUNCHES``' Triton kernels) takes at compile-time arguments ``constexprs``: those of its
    launcher's ``descriptor_slots`` (a TMA config in the dense layout), name to type."""
    launch = next((launch for launch in LAUNCHES.values()
                   if kernel is launch.kernel or kernel in launch.variants.values()), None)
    if launch is None:
        return {}
    names = [param.name for param in kernel.params]
    return {names[index]: (f"tensordesc<bf16[1, {rows}, 1, {width}]>" if width is not None
                           else f"tensordesc<fp32[1, 1, {rows}]>")
            for index, rows, width in launch.descriptor_slots(constexprs)}


DESCRIPTOR_DTYPES = {torch.bfloat16: "bf16", torch.float16: "fp16", torch.float32: "fp32"}


def descriptor_type(desc) -> str:
    """The signature type of a Gluon kernel's host TMA descriptor argument ``desc`` (a
    ``TensorDescriptor``: its tensor's dtype, box and shared layout), as a launch types it."""
    block = ", ".join(map(str, desc.block_shape))
    return f"tensordesc<{DESCRIPTOR_DTYPES[desc.base.dtype]}[{block}],{desc.layout!r}>"


def cuobjdump(compiled, flag: str) -> str:
    """What ``cuobjdump`` (Triton's bundled one) prints with ``flag`` (``-res-usage``,
    ``-sass``) for the cubin of a kernel ``compile_for`` built."""
    with tempfile.NamedTemporaryFile(suffix=".cubin") as cubin:
        cubin.write(compiled.asm["cubin"])
        cubin.flush()
        return subprocess.run([triton_tool("cuobjdump"), flag, cubin.name],
                              capture_output=True, text=True, check=True).stdout


def resource_use(compiled) -> dict:
    """``registers`` and ``stack`` bytes (spills) per thread of a kernel ``compile_for`` built,
    as ``cuobjdump -res-usage`` reads its cubin, and its ``shared`` memory in bytes."""
    usage = dict(re.findall(r"\b(REG|STACK):(\d+)", cuobjdump(compiled, "-res-usage")))
    return dict(registers=int(usage["REG"]), stack=int(usage["STACK"]),
                shared=compiled.metadata.shared)


def occupancy(use: dict, num_warps: int) -> dict:
    """How many programs of ``num_warps`` warps with ``resource_use`` ``use`` one sm_90 SM holds
    at once as each resource bounds them (H100 and H200 SMs: 64K registers, allocated per warp 8
    a thread at a time; 228 KiB of shared memory, with the 1 KiB the runtime reserves per block;
    64 warps): ``registers``, ``shared`` and ``warps``."""
    registers = -(-use["registers"] // 8) * 8
    return dict(registers=65536 // (registers * 32 * num_warps),
                shared=(228 * 1024) // (use["shared"] + 1024), warps=64 // num_warps)


def programs_per_sm(compiled, num_warps: int) -> int:
    """How many programs of a kernel ``compile_for`` built for sm_90 fit one SM at once (the
    least of its ``occupancy`` bounds)."""
    return min(occupancy(resource_use(compiled), num_warps).values())


def training_constexprs(part: str, head_dim: int, config: tuple) -> dict:
    """The compile-time arguments of ``part``'s Triton kernel for a causal bf16 training call
    with the fix (no sinks, no return of the shift) at ``config`` (a ``tile_config`` tuple)."""
    block_m, block_n, _, _, tma, _ = config
    constexprs = dict(CAUSAL_FLAGS, BLOCK_D=head_dim, BLOCK_M=block_m, BLOCK_N=block_n,
                      USE_TMA=tma)
    if part == "fwd":
        constexprs.update(STABILIZE=True, SHIFT_SINGLE=False, RETURN_SHIFT=False,
                          HAS_SINKS=False, GROUP_PROGRAMS=_common.FWD_GROUP_PROGRAMS)
    elif part == "dq":
        constexprs.update(ROWSUM_P_DP=False, GROUP_PROGRAMS=_common.DQ_GROUP_PROGRAMS)
    else:
        constexprs.update(ROWS_FIRST_MIN_M=flash_bwd._ROWS_FIRST_MIN_M.get(head_dim, 0),
                          VECTOR_TMA=flash_bwd._VECTOR_TMA,
                          GROUP_PROGRAMS=_common.DKDV_GROUP_PROGRAMS)
    return constexprs


def entries_shared(capability: int, part: str, head_dim: int):
    """Yields ``(config, shared bytes)`` for each entry of ``part``'s table (``LAUNCHES``) at
    ``head_dim`` that a GPU of ``capability`` may run (TMA entries from 9.0, as
    ``_common.has_tma``), in table order, its kernel compiled for that GPU as
    ``training_constexprs`` sets it; lazily, so a caller that stops early compiles no more."""
    launch = LAUNCHES[part]
    for config in map(tile_config, launch.table[head_dim]):
        if config[4] and capability < 90:
            continue
        compiled = compile_for(launch.kernel_for(head_dim),
                               training_constexprs(part, head_dim, config), config[2],
                               config[3], capability=capability, **register_cap(config))
        yield config, compiled.metadata.shared

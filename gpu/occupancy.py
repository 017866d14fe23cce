"""How many programs of each table config fit on an SM, and does asking the driver for the
largest shared-memory carveout change that or the time? (GPU only.)

For each kernel part of ``benchmarks.tune_kernel`` (``fwd``, ``dkdv``, ``dq``) and each entry of
our tables at the tuner's five default shapes, this launches the config alone, reads the compiled
kernel's registers, spills and shared memory, asks the driver
(``cuOccupancyMaxActiveBlocksPerMultiprocessor``) how many of its programs fit on one SM, and
times it with ``triton.testing.do_bench`` twice: with the default carveout and with
``CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT`` = 100 (all of the unified L1/shared
memory as shared memory), alternating, two passes each.

Run: ``PYTHONPATH=$PWD python gpu/occupancy.py > occupancy.jsonl`` (one JSON line per config).
"""

from __future__ import annotations

import ctypes
import json
import os

os.environ["HF_STABLE_ATTN_AUTOTUNE"] = "0"

import torch  # noqa: E402
import triton  # noqa: E402

from benchmarks.tune_kernel import Runner, default_shapes, make_inputs, precompile  # noqa: E402

CARVEOUT_ATTRIBUTE = 9  # CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT
MAX_SHARED = 100  # CU_SHAREDMEM_CARVEOUT_MAX_SHARED
DEFAULT = -1  # CU_SHAREDMEM_CARVEOUT_DEFAULT

_cuda = ctypes.CDLL("libcuda.so.1")


def blocks_per_sm(kernel) -> int:
    """The driver's occupancy for a compiled Triton kernel at its launch shape."""
    count = ctypes.c_int(0)
    threads = kernel.metadata.num_warps * 32
    status = _cuda.cuOccupancyMaxActiveBlocksPerMultiprocessor(
        ctypes.byref(count), ctypes.c_void_p(kernel.function), threads,
        ctypes.c_size_t(kernel.metadata.shared))
    if status:
        raise RuntimeError(f"cuOccupancyMaxActiveBlocksPerMultiprocessor returned {status}")
    return count.value


def set_carveout(kernel, value: int) -> None:
    status = _cuda.cuFuncSetAttribute(ctypes.c_void_p(kernel.function), CARVEOUT_ATTRIBUTE, value)
    if status:
        raise RuntimeError(f"cuFuncSetAttribute returned {status}")


def launcher(runner: Runner, part: str):
    if part.startswith("fwd"):
        return runner.fwd_mod._fwd_launch
    return runner.bwd_mod._dkdv_launch if part == "dkdv" else runner.bwd_mod._dq_launch


def main() -> None:
    package, parts, jobs = "hf_stable_attn.kernels", ("fwd", "dkdv", "dq"), 16
    runner = Runner(package)
    shapes = default_shapes(16384, 2048)
    work = [(p, c, s) for s in shapes for p in parts for c in runner.table(p, s.head_dim)]
    precompile(package, work, jobs)  # Triton's disk cache, so the loop below mostly loads
    for shape in shapes:
        tensors = make_inputs(shape)
        for part in parts:
            for cfg in runner.table(part, shape.head_dim):
                launch = launcher(runner, part)
                launch.compiled.clear()  # so that the one entry after the call is this config
                fn = runner.call(part, cfg, shape, tensors)
                record = dict(part=part, cfg=cfg, head_dim=shape.head_dim, causal=shape.causal,
                              heads=(shape.heads_q, shape.heads_kv), seqlen=shape.seqlen)
                try:
                    fn()
                    torch.cuda.synchronize()
                    (kernel,) = launch.compiled.values()
                    record.update(regs=kernel.n_regs, spills=kernel.n_spills,
                                  shared=kernel.metadata.shared,
                                  blocks_default=blocks_per_sm(kernel))
                    times = {"default": [], "max_shared": []}
                    for _ in range(2):
                        for name, value in (("default", DEFAULT), ("max_shared", MAX_SHARED)):
                            set_carveout(kernel, value)
                            times[name].append(triton.testing.do_bench(fn, warmup=25, rep=100))
                    set_carveout(kernel, MAX_SHARED)
                    record["blocks_max_shared"] = blocks_per_sm(kernel)
                    set_carveout(kernel, DEFAULT)
                    record.update(ms=times)
                except Exception as exc:  # noqa: BLE001  (a config that fails is a result)
                    record["error"] = f"{type(exc).__name__}: {str(exc)[:200]}"
                finally:
                    fn.restore()
                print(json.dumps(record), flush=True)


if __name__ == "__main__":
    main()

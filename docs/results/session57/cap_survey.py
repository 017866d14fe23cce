"""Registers, stack bytes (spills) and programs per SM of the Triton kernels' D64 and D128 table
entries (forward with the fix, dQ, dK/dV; a causal MHA training call) compiled for sm_90a on
the CPU with Triton's ``ptxas-blackwell`` (CUDA 13's, as the GPU machine builds them), and,
where shared memory and warps leave room for one more program per SM, the same entry under the
register cap that would fit it. Run from the repository root under Triton 3.6:
PYTHONPATH=$PWD python docs/results/session57/cap_survey.py [HEAD_DIM ...] (default 64 128;
session 57, v57a; output in cap_survey.log, and for 16 32 256 in cap_survey_other_dims.log).
Entries already capped in the tables are compiled as listed."""
import os
import sys

from hf_stable_attn.kernels._ptxas import triton_tool

os.environ.setdefault("TRITON_PTXAS_PATH", triton_tool("ptxas-blackwell"))

from benchmarks.compile_targets import (  # noqa: E402
    compile_for, occupancy, resource_use, training_constexprs,
)
from hf_stable_attn.kernels import LAUNCHES  # noqa: E402
from hf_stable_attn.kernels._common import register_cap, tile_config  # noqa: E402

SPECIALIZED_TO_ONE = {"fwd": ("group",), "dq": ("group",), "dkdv": ("group", "splits")}


def describe(use: dict, warps: int) -> str:
    return (f"registers {use['registers']} stack {use['stack']} shared {use['shared']} "
            f"programs/SM {min(occupancy(use, warps).values())}")


def main(head_dims):
    for head_dim in head_dims:
        for part, launch in LAUNCHES.items():
            for config in map(tile_config, launch.table[head_dim]):
                warps, stages = config[2], config[3]
                constexprs = {**training_constexprs(part, head_dim, config),
                              **dict.fromkeys(SPECIALIZED_TO_ONE[part], 1)}
                kernel = launch.kernel_for(head_dim)
                compiled = compile_for(kernel, constexprs, warps, stages, **register_cap(config))
                use = resource_use(compiled)
                line = f"D{head_dim} {part} {config} {describe(use, warps)}"
                bounds = occupancy(use, warps)
                n = min(bounds.values())
                if not config[5] and min(bounds["shared"], bounds["warps"]) > n:
                    cap = 65536 // ((n + 1) * warps * 32) // 8 * 8
                    capped = compile_for(kernel, constexprs, warps, stages, maxnreg=cap)
                    line += f" | maxnreg {cap}: {describe(resource_use(capped), warps)}"
                print(line, flush=True)


if __name__ == "__main__":
    main([int(d) for d in sys.argv[1:]] or [64, 128])

"""Registers, spill bytes and programs per SM of the Triton kernels' D64 and D128 table entries
(forward with the fix, dQ, dK/dV; a causal MHA training call) compiled for sm_90a on the CPU
with ``ptxas-blackwell`` (CUDA 13's, as the GPU machine builds them), and where shared memory
and warps leave room for one more program per SM, the same entry under the register cap that
would fit it. Run from the repository root under Triton 3.6:
PYTHONPATH=$PWD python docs/results/session57/cap_survey.py (session 57, v57a; output in
cap_survey.log). Entries already capped in the tables are compiled as listed."""
import os
import re
import subprocess
import tempfile

from benchmarks.compile_targets import compile_for, config_options, training_constexprs
from hf_stable_attn.kernels import LAUNCHES
from hf_stable_attn.kernels._common import tile_config

BIN = os.path.dirname(__import__("triton").__file__) + "/backends/nvidia/bin/"
SPECIALIZED_TO_ONE = {"fwd": ("group",), "dq": ("group",), "dkdv": ("group", "splits")}


def ptxas_info(ptx: str) -> tuple[int, int]:
    """(registers, spill store bytes) of ``ptx`` built by ptxas-blackwell for sm_90a."""
    with tempfile.NamedTemporaryFile(suffix=".ptx", delete=False, mode="w") as f:
        f.write(ptx)
    err = subprocess.run([BIN + "ptxas-blackwell", "-v", "--gpu-name", "sm_90a", "-o",
                          f.name + ".cubin", f.name], capture_output=True, text=True).stderr
    return (int(re.search(r"Used (\d+) registers", err).group(1)),
            int(re.search(r"(\d+) bytes spill stores", err).group(1)))


def per_sm(registers: int, warps: int, shared: int) -> int:
    return min(65536 // ((registers + 7) // 8 * 8 * warps * 32), (228 * 1024) // (shared + 1024),
               64 // warps)


def main():
    for head_dim in (64, 128):
        for part, launch in LAUNCHES.items():
            for config in map(tile_config, launch.table[head_dim]):
                warps, stages = config[2], config[3]
                constexprs = {**training_constexprs(part, head_dim, config),
                              **dict.fromkeys(SPECIALIZED_TO_ONE[part], 1)}
                kernel = launch.kernel_for(head_dim)
                compiled = compile_for(kernel, constexprs, warps, stages, **config_options(config))
                regs, spills = ptxas_info(compiled.asm["ptx"])
                shared = compiled.metadata.shared
                n = per_sm(regs, warps, shared)
                line = (f"D{head_dim} {part} {config} registers {regs} spills {spills} shared "
                        f"{shared} programs/SM {n}")
                if not config[5] and per_sm(8, warps, shared) > n:  # room beyond registers
                    cap = 65536 // ((n + 1) * warps * 32) // 8 * 8
                    capped = compile_for(kernel, constexprs, warps, stages, maxnreg=cap)
                    regs, spills = ptxas_info(capped.asm["ptx"])
                    line += (f" | maxnreg {cap}: registers {regs} spills {spills} programs/SM "
                             f"{per_sm(regs, warps, shared)}")
                print(line, flush=True)


if __name__ == "__main__":
    main()

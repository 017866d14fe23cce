"""Session 86, CPU only: the Gluon forward (the table's D128 and D64 configs, one program per
tile, causal or not, fix on or off) built for sm_90a by the installed Triton, to compare the
Tritons that torch pins (3.7.1 for 2.12.1-2.13, 3.8.0 for 2.14) with one ptxas for both:

    TRITON_PTXAS_PATH=<ptxas> PYTHONPATH=$PWD <venv with that Triton>/bin/python \\
        docs/results/session86/fwd_loops_by_triton.py

Per build: registers and spilled bytes a thread (``resource_use``), instructions, the sizes of
its loops (``dkdv_sass_survey.loops``, longer than 200 instructions; innermost first), and the
opcode mix of the first (consumer 0's unmasked key-tile step)."""
import collections
import sys

import triton

from benchmarks.compile_targets import compile_for, resource_use
from hf_stable_attn.kernels import flash_fwd_hopper as H

sys.path.insert(0, "docs/results/session61")
from dkdv_sass_survey import loops, ptxas_release, sass_lines  # noqa: E402


def build(head_dim: int, stabilize: bool, causal: bool, persistent: bool = False):
    """The table's config for ``head_dim`` compiled for sm_90a, one program per tile (this
    session's builds) or ``persistent`` (session 87's ``fwd_routes_by_triton``)."""
    block_n, stages, regs, consumers, pingpong = H.HOPPER_CONFIGS[head_dim]
    return compile_for(H._fwd_ws_kernel, dict(
        CAUSAL=causal, STABILIZE=stabilize, HEAD_DIM=head_dim, BLOCK_N=block_n, STAGES=stages,
        CONSUMER_REGS=regs, CONSUMERS=consumers, PINGPONG=pingpong, PERSISTENT=persistent,
        num_warps=4), descriptors={"Q": 64, "K": block_n, "V": block_n})


def innermost(lines: list[tuple[int, str]]) -> list[tuple[int, int]]:
    """The (first, last) index of each innermost loop longer than 200 instructions, in order:
    the first is consumer 0's unmasked key-tile step."""
    spans = {s for s in loops(lines) if s[1] - s[0] + 1 > 200}
    return sorted(s for s in spans
                  if not any(o != s and s[0] <= o[0] and o[1] <= s[1] for o in spans))


def opcode(instruction: str) -> str:
    """The opcode of a SASS instruction, without its predicate and modifiers."""
    words = instruction.split()
    return words[1 if words[0].startswith("@") else 0].split(".")[0]


def main() -> None:
    print("triton", triton.__version__, ptxas_release())
    for head_dim in (128, 64):
        for causal in (True, False):
            for stabilize in (True, False):
                compiled = build(head_dim, stabilize, causal)
                lines = sass_lines(compiled)
                steps = innermost(lines)
                first, last = steps[0]
                mix = collections.Counter(opcode(op) for _, op in lines[first:last + 1])
                use = resource_use(compiled)
                print(f"D{head_dim} {'causal' if causal else 'full  '} "
                      f"{'fix  ' if stabilize else 'nofix'} regs {use['registers']} "
                      f"spill {use['stack']} total {len(lines)} "
                      f"loops {[b - a + 1 for a, b in steps]} "
                      f"first loop: {mix.most_common(14)}")


if __name__ == "__main__":
    main()

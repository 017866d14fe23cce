#!/usr/bin/env bash
# On the GPU machine: unpack the Triton that gpu/slim_triton.sh packed (carried as .t39) into
# /tmp/carried_triton and put it first on PYTHONPATH. Source it:
#   run(command="source gpu/carried_triton.sh && OUT=$OUT bash gpu/validate_kernel.sh",
#       carry=[".t39", ".gpu_carry"])
# Triton from 3.9 builds sm_90 with its newer ptxas, ptxas-blackwell, which does not travel in
# the same call (64 MiB): stage it first on the same warm machine,
#   run(command="mkdir -p /tmp/carried_ptxas && cp .t39b/ptxas-blackwell.xz /tmp/carried_ptxas/",
#       carry=[".t39b"])
# Without it, both ptxas names point at PyTorch's CUDA 13 ptxas (said below).
# TRITON_PACK names another copy of the pack, or its parts in order (split -n 2), which are
# joined here: when the repository and the pack together pass the 64 MiB a call carries, an
# earlier call on the same warm machine stages the first part (gpu/carried_triton_halves.sh
# does both steps, and unpacks in a subshell).
site=/tmp/carried_triton
mkdir -p "$site"
# shellcheck disable=SC2086  # the parts are separate words
cat ${TRITON_PACK:-.t39/triton.tar.xz} | tar -C "$site" -xJf - || return 1
bin="$site/triton/backends/nvidia/bin"
torch_ptxas="$(python3 -c 'import os, torch; print(os.path.join(os.path.dirname(torch.__file__), "bin", "ptxas"))')"
ln -sf "$torch_ptxas" "$bin/ptxas"
if [ -f /tmp/carried_ptxas/ptxas-blackwell.xz ]; then
    xz -dc /tmp/carried_ptxas/ptxas-blackwell.xz > "$bin/ptxas-blackwell" && chmod +x "$bin/ptxas-blackwell"
else
    echo "no ptxas-blackwell staged: Triton's sm_90 builds use PyTorch's ptxas"
    ln -sf "$torch_ptxas" "$bin/ptxas-blackwell"
fi
# The pack has no AMD backend, and the machine's own Triton declares one as an entry point: find
# backends in the package's folder instead.
export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}" TRITON_BACKENDS_IN_TREE=1
python3 -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__, triton.__file__)'
for p in "$bin"/ptxas*; do echo "$(basename "$p"): $("$p" --version | tail -n 1)"; done

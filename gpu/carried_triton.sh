#!/usr/bin/env bash
# On the GPU machine: unpack the Triton that gpu/slim_triton.sh packed (carried as .t39) into
# /tmp/carried_triton, give it PyTorch's ptxas, and put it first on PYTHONPATH. Source it:
#   run(command="source gpu/carried_triton.sh && OUT=$OUT bash gpu/validate_kernel.sh",
#       carry=[".t39", ".gpu_carry"])
site=/tmp/carried_triton
mkdir -p "$site"
tar -C "$site" -xJf .t39/triton.tar.xz || return 1
ptxas="$(python3 -c 'import os, torch; print(os.path.join(os.path.dirname(torch.__file__), "bin", "ptxas"))')"
ln -sf "$ptxas" "$site/triton/backends/nvidia/bin/ptxas"
# The pack has no AMD backend, and the machine's own Triton declares one as an entry point: find
# backends in the package's folder instead.
export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}" TRITON_BACKENDS_IN_TREE=1
python3 -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__, triton.__file__)'

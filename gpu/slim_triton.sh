#!/usr/bin/env bash
# On the CPU machine: pack a Triton release small enough to carry to the GPU machine (64 MiB a
# call, the repository included), to run the GPU suite under a Triton other than its own:
#   bash gpu/slim_triton.sh 3.9.0   # .t39/triton.tar.xz, .t39b/ptxas-blackwell.xz
# Dropped from the wheel: the AMD backend, CUPTI, FileCheck, the old ptxas (gpu/carried_triton.sh
# links PyTorch's CUDA 13 ptxas in its place), cuobjdump and nvdisasm (SASS dumps only), the
# plugin and instrumentation test libraries and the MLIR headers (building plugins); the two
# shared libraries lose their debug symbols (strip); xz -9e packs the rest (39.5 MB for 3.9.0,
# which must fit one call beside the repository's 18 MB). The newer ptxas that Triton from 3.9
# builds sm_90 with (ptxas-blackwell, 12 MB packed) goes to its own folder: it does not fit in
# the same call (gpu/carried_triton.sh says how).
set -euo pipefail
version="${1:?Triton version, e.g. 3.9.0}"
dest="${2:-.t39}"
work="$(mktemp -d)"
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
    --platform manylinux_2_27_x86_64 --platform manylinux_2_28_x86_64 -d "$work" "triton==$version"
(cd "$work" && unzip -q triton-*.whl)
nvidia="$work/triton/backends/nvidia"
rm -rf "$work/triton/backends/amd" "$nvidia/lib/cupti" "$nvidia/lib/cupti-blackwell" \
    "$nvidia/bin/ptxas" "$nvidia/bin/cuobjdump" "$nvidia/bin/nvdisasm" "$work/triton/FileCheck" \
    "$work/triton/instrumentation" "$work/triton/plugins" "$work/triton/include"
strip --strip-unneeded "$work/triton/_C/libtriton.so" "$work/triton/_C/libproton.so"
mkdir -p "$dest" "${dest}b"
if [ -f "$nvidia/bin/ptxas-blackwell" ]; then
    xz -T2 -6 -c "$nvidia/bin/ptxas-blackwell" > "${dest}b/ptxas-blackwell.xz"
    rm "$nvidia/bin/ptxas-blackwell"
fi
tar -C "$work" -cf - triton "triton-$version.dist-info" | xz -T2 -9e > "$dest/triton.tar.xz"
rm -rf "$work"
ls -l "$dest/triton.tar.xz" "${dest}b"

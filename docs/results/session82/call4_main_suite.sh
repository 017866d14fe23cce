#!/usr/bin/env bash
# Session 82, call 4, one H200, Triton 3.6: the whole GPU suite at main as shipped (v81b's
# kernels, 00fbf8b's code; session 81 ran it at v81a, whose D128 builds v81b's equal by SASS).
# Carry [".gpu_carry"].
set -uo pipefail
: "${OUT:?set OUT to the folder whose files come back}"
CUDA_VISIBLE_DEVICES=0 OUT=$OUT/suite TEST_TIMEOUT_S=420 bash gpu/validate_kernel.sh

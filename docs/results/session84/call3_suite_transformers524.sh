#!/usr/bin/env bash
# Session 84, call 3, one H200, Triton 3.6: the whole GPU suite (gpu/validate_kernel.sh) at main
# with Transformers 5.24.0, the release CI's CPU tests now install, instead of the machine's
# 5.17. The wheels (transformers 5.24.0 and what it requires, numpy left out: the machine's
# stays) are carried in .tf524 and installed into /tmp/tf524, first on PYTHONPATH; nothing of the
# machine's own environment is replaced. Carry [".gpu_carry", ".tf524"].
set -u
: "${OUT:?set OUT to the folder whose files come back}"
python3 -m pip install -q --no-deps --target /tmp/tf524 .tf524/*.whl > "$OUT/install.log" 2>&1
export PYTHONPATH=/tmp/tf524
python3 -c "import transformers, huggingface_hub, tokenizers; print('transformers', transformers.__version__, 'hub', huggingface_hub.__version__, 'tokenizers', tokenizers.__version__)" \
    | tee "$OUT/versions.txt"
OUT=$OUT TEST_TIMEOUT_S=${TEST_TIMEOUT_S:-420} bash gpu/validate_kernel.sh

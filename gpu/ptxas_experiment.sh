#!/usr/bin/env bash
# GPU: our kernels compiled by Triton's bundled ptxas against torch's (the one torch.compile
# points Triton at), per kernel, table configs (TMA), two passes (docs/kernel_notes.md, v10;
# run 16). Writes tune_kernel JSONs under $OUT:  OUT=/some/folder bash gpu/ptxas_experiment.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
export PYTHONPATH=$PWD
TORCH_PTXAS=$(python -c "import torch, pathlib; print(pathlib.Path(torch.__file__).parent / 'bin' / 'ptxas')")
for p in $TORCH_PTXAS /usr/local/cuda-13.0/bin/ptxas; do echo "$p: $($p --version | tail -1)"; done
python - <<'PY'
import os, torch
from torch.nn.attention.flex_attention import flex_attention
print("before flex compile:", os.environ.get("TRITON_PTXAS_PATH"))
q = torch.randn(1, 2, 256, 64, device="cuda", dtype=torch.bfloat16)
torch.compile(flex_attention, dynamic=False)(q, q, q)
print("after flex compile:", os.environ.get("TRITON_PTXAS_PATH"))
PY
TK="python -m benchmarks.tune_kernel --grid table --tma only"
for pass in 1 2; do
  $TK --parts fwd fwd_nofix dkdv dq --time-budget-s 100 --out $OUT/bundled_$pass.json 2>&1 | tail -21
  TRITON_PTXAS_PATH=$TORCH_PTXAS $TK --parts fwd fwd_nofix dkdv dq --time-budget-s 100 --out $OUT/torch_$pass.json 2>&1 | tail -21
done

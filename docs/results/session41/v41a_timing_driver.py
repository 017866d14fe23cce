"""v41a timing: gpu/hopper_fwd_ab.timing (package's forward against the base copy, same process,
interleaved rounds) on the Llama-1B attention shape and others (no bit-equality checks)."""
import json, sys, torch
out_path = sys.argv[1]; sys.argv = [sys.argv[0]]
from gpu.hopper_fwd_ab import load_base, timing
base = load_base(".variants/v41a/base_flash_fwd_hopper.py")
rows = []
for shape in [(2, 4096, 32, 8, 64, True, True), (2, 4096, 32, 8, 64, True, False),
              (2, 4096, 32, 32, 64, True, True), (2, 8192, 32, 4, 64, True, True),
              (8, 2048, 32, 8, 64, True, True), (4, 4096, 32, 4, 64, True, True),
              (4, 4096, 16, 2, 128, True, True)]:
    r = timing(base, shape, 5)
    rows.append(r)
    print(shape, {k: round(v, 1) for k, v in r["tflops"].items()}, r.get("triton_config"), flush=True)
json.dump(dict(gpu=torch.cuda.get_device_name(), torch=torch.__version__, rows=rows), open(out_path, "w"), indent=1)

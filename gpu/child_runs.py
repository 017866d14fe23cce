"""Fresh-process runs for the gpu/ scripts that compare processes (``e2e_autotune_spread.py``,
``e2e_slow_process.py``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys


def child_json(code: str, *args: str, env: dict[str, str] | None = None) -> dict:
    """Run ``python -c code *args`` in a fresh process (offline hub, plus ``env``): its last line
    of output parsed as JSON, or ``{"error": <end of its stderr>}`` when it fails."""
    done = subprocess.run([sys.executable, "-c", code, *args], text=True, capture_output=True,
                          env={**os.environ, "HF_HUB_OFFLINE": "1", **(env or {})})
    if done.returncode != 0:
        return {"error": done.stderr[-500:]}
    return json.loads(done.stdout.strip().splitlines()[-1])

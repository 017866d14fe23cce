"""Fresh-process runs for the gpu/ scripts that compare processes (``e2e_autotune_spread.py``,
``e2e_slow_process.py``, ``e2e_step_trace.py``, ``host_sensitivity.py``), and their rows."""

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


def keep_row(rows: list[dict], row: dict) -> None:
    """Print ``row`` as one JSON line (the run's progress) and append it to ``rows``."""
    print(json.dumps(row), flush=True)
    rows.append(row)


def save_rows(rows: list[dict], name: str) -> None:
    """``rows`` as indented JSON in ``$OUT/<name>`` (the working directory without ``OUT``)."""
    with open(os.path.join(os.environ.get("OUT", "."), name), "w") as f:
        json.dump(rows, f, indent=1)

"""The GPU's SM clock, power draw and clock-limit reasons while a benchmark times something.

A kernel timed in short windows and the same kernel run back to back can run at different
clocks: under a sustained load the card lowers its SM clock to stay within its power limit
("SW power cap"), the more so the more energy a kernel spends per unit of work (session 66,
docs/kernel_notes.md). ``ClockSampler`` runs
``nvidia-smi`` in a loop beside the timing and keeps every reading with the time nvidia-smi
stamped on it; ``window(spans)`` summarises the readings that fall inside the given spans of
``time.time()``.

    with ClockSampler(torch.device("cuda")) as clocks:
        t0 = time.time(); run(); t1 = time.time()
    clocks.window([(t0, t1)])  # {"sm_clock_mhz": ..., "power_w": ..., "power_capped": ...}

Where there is no NVIDIA GPU or no ``nvidia-smi``, the sampler does nothing and ``window``
returns ``None`` (said once in the log).
"""

from __future__ import annotations

import logging
import shutil
import statistics
import subprocess
import threading
from dataclasses import dataclass
from datetime import datetime

import torch

log = logging.getLogger(__name__)

# Bits of nvidia-smi's "clocks_event_reasons.active" (NVML's nvmlClocksEventReason*).
SW_POWER_CAP = 0x4
HW_SLOWDOWN = 0x8
SW_THERMAL = 0x20
HW_THERMAL = 0x40
HW_POWER_BRAKE = 0x80

# Each quantity's query fields, newest name first (older drivers know only the later ones).
FIELD_CHOICES = {
    "t": ("timestamp",),
    "sm_mhz": ("clocks.sm",),
    "power_w": ("power.draw.instant", "power.draw"),
    "temp_c": ("temperature.gpu",),
    "reasons": ("clocks_event_reasons.active", "clocks_throttle_reasons.active"),
}


@dataclass(frozen=True)
class Sample:
    """One reading: when (seconds since the epoch), SM clock (MHz), power (W), temperature (C)
    and the active clock-limit reasons (a bit mask, see the constants above); None where not
    reported."""
    t: float
    sm_mhz: float | None
    power_w: float | None
    temp_c: float | None
    reasons: int | None


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:  # "[N/A]", "[Not Supported]"
        return None


def parse_line(line: str) -> Sample | None:
    """A ``Sample`` from one line of ``--format=csv,noheader,nounits`` output with the fields in
    ``FIELD_CHOICES``' order (nvidia-smi's local time ``2026/11/30 04:10:11.123``, SM clock,
    power, temperature, reasons as hex); None for a line that is not that."""
    parts = [p.strip() for p in line.split(",")]
    if len(parts) != 5:
        return None
    stamp, sm, power, temp, reasons = parts
    try:
        t = datetime.strptime(stamp, "%Y/%m/%d %H:%M:%S.%f").timestamp()
    except ValueError:
        return None
    try:
        mask = int(reasons, 16)
    except ValueError:
        mask = None
    return Sample(t, _number(sm), _number(power), _number(temp), mask)


def summarize(samples: list[Sample]) -> dict | None:
    """Medians of the SM clock and power over ``samples``, the lowest clock, the highest
    temperature, and the share of samples with each limit reason active; None when empty."""
    if not samples:
        return None

    def values(name):
        return [v for v in (getattr(s, name) for s in samples) if v is not None]

    def share(bits):
        masks = values("reasons")
        return round(sum(1 for m in masks if m & bits) / len(masks), 3) if masks else None

    def median(name):
        got = values(name)
        return round(statistics.median(got), 1) if got else None

    clocks, temps = values("sm_mhz"), values("temp_c")
    return {
        "clock_samples": len(samples),
        "sm_clock_mhz": median("sm_mhz"),
        "sm_clock_min_mhz": min(clocks) if clocks else None,
        "power_w": median("power_w"),
        "temp_max_c": max(temps) if temps else None,
        "power_capped": share(SW_POWER_CAP | HW_POWER_BRAKE),
        "thermal_limited": share(SW_THERMAL | HW_THERMAL | HW_SLOWDOWN),
    }


def _query_fields(smi: str, gpu: str) -> list[str] | None:
    """The first field of each ``FIELD_CHOICES`` entry that this driver's nvidia-smi answers."""
    fields = []
    for choices in FIELD_CHOICES.values():
        for field in choices:
            probe = subprocess.run(
                [smi, f"--query-gpu={field}", "--format=csv,noheader", "-i", gpu],
                capture_output=True, text=True, timeout=30)
            if probe.returncode == 0:
                fields.append(field)
                break
        else:
            return None
    return fields


def smi_command(device: torch.device, period_ms: int) -> list[str] | None:
    """The ``nvidia-smi`` loop that reads ``device`` (by UUID, so ``CUDA_VISIBLE_DEVICES`` does
    not matter) every ``period_ms``; None where there is no such GPU or tool."""
    smi = shutil.which("nvidia-smi")
    if device.type != "cuda" or smi is None:
        return None
    uuid = getattr(torch.cuda.get_device_properties(device), "uuid", None)
    if uuid is None:
        return None
    gpu = f"GPU-{uuid}"
    fields = _query_fields(smi, gpu)
    if fields is None:
        return None
    line_buffered = ["stdbuf", "-oL"] if shutil.which("stdbuf") else []  # else lines come late
    return [*line_buffered, smi, f"--query-gpu={','.join(fields)}",
            "--format=csv,noheader,nounits", "-i", gpu, "-lms", str(period_ms)]


class ClockSampler:
    """Read the GPU's clocks and power every ``period_ms`` while the ``with`` block runs.

    ``command`` replaces the ``nvidia-smi`` loop (tests pass a script that prints lines in its
    format)."""

    def __init__(self, device: torch.device | None = None, period_ms: int = 20,
                 command: list[str] | None = None):
        self.command = command
        if command is None and device is not None:
            self.command = smi_command(device, period_ms)
        self.samples: list[Sample] = []
        self._proc: subprocess.Popen | None = None
        self._reader: threading.Thread | None = None

    def __enter__(self) -> "ClockSampler":
        if self.command is None:
            log.info("no nvidia-smi for this device: clocks and power are not recorded")
            return self
        self._proc = subprocess.Popen(self.command, stdout=subprocess.PIPE,
                                      stderr=subprocess.DEVNULL, text=True, bufsize=1)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        return self

    def _read(self) -> None:
        for line in self._proc.stdout:
            sample = parse_line(line)
            if sample is not None:
                self.samples.append(sample)

    def __exit__(self, *exc) -> None:
        if self._proc is None:
            return
        self._proc.terminate()
        try:
            self._proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        self._reader.join(timeout=10)
        self._proc = None

    def window(self, spans: list[tuple[float, float]]) -> dict | None:
        """``summarize`` over the readings taken inside any of ``spans`` (``time.time()``
        seconds); None where nothing was recorded."""
        if self.command is None:
            return None
        inside = [s for s in list(self.samples) if any(a <= s.t <= b for a, b in spans)]
        return summarize(inside)

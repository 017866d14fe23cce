"""The clock and power sampler beside the benchmarks (``benchmarks/gpu_clocks.py``), on the CPU:
its parser and summary, and the sampler's thread fed by a stand-in for ``nvidia-smi``."""

from __future__ import annotations

import sys
import time

import torch

from benchmarks import bench_attention, gpu_clocks

# Prints nvidia-smi's CSV lines (local time, SM MHz, W, C, reasons) every 2 ms: in even
# hundredths of a second 1700 MHz under the power cap, in odd ones 1980 MHz and no limit.
FAKE_SMI = r"""
import datetime, sys, time
while True:
    now = datetime.datetime.now()
    capped = int(now.timestamp() * 100) % 2 == 0
    clock, reasons = (1700, "0x0000000000000004") if capped else (1980, "0x0000000000000000")
    print(f"{now.strftime('%Y/%m/%d %H:%M:%S.%f')[:-3]}, {clock}, 650.5, 61, {reasons}",
          flush=True)
    time.sleep(0.002)
"""


def test_parse_line_reads_nvidia_smi_csv():
    s = gpu_clocks.parse_line("2026/11/30 04:10:11.123, 1755, 688.12, 64, 0x0000000000000004\n")
    assert s.sm_mhz == 1755 and s.power_w == 688.12 and s.temp_c == 64
    assert s.reasons == gpu_clocks.SW_POWER_CAP
    assert abs(s.t - time.mktime((2026, 11, 30, 4, 10, 11, 0, 0, -1)) - 0.123) < 1e-6
    na = gpu_clocks.parse_line("2026/11/30 04:10:11.123, 1755, [N/A], 64, [N/A]")
    assert na.power_w is None and na.reasons is None
    assert gpu_clocks.parse_line("Failed to initialize NVML") is None
    assert gpu_clocks.parse_line("not a time, 1, 2, 3, 0x0") is None


def test_summarize_medians_and_shares():
    samples = [gpu_clocks.Sample(float(i), mhz, w, 60 + i, reasons) for i, (mhz, w, reasons) in
               enumerate([(1980, 500, 0), (1700, 700, 0x4), (1800, 690, 0x4), (1900, None, 0x20)])]
    got = gpu_clocks.summarize(samples)
    assert got == {"clock_samples": 4, "sm_clock_mhz": 1850.0, "sm_clock_min_mhz": 1700,
                   "power_w": 690.0, "temp_max_c": 63, "power_capped": 0.5,
                   "thermal_limited": 0.25}
    assert gpu_clocks.summarize([]) is None


def test_sampler_windows_follow_the_stand_in():
    with gpu_clocks.ClockSampler(command=[sys.executable, "-c", FAKE_SMI]) as clocks:
        start = time.time()
        while not clocks.samples and time.time() - start < 30:  # the interpreter starting
            time.sleep(0.01)
        t0 = time.time()
        time.sleep(0.3)
        t1 = time.time()
        time.sleep(0.1)
    got = clocks.window([(t0, t1)])
    assert 40 <= got["clock_samples"] <= 160  # every 2 ms plus printing, over 0.3 s
    assert 0.3 <= got["power_capped"] <= 0.7 and got["sm_clock_min_mhz"] == 1700
    assert got["power_w"] == 650.5 and got["temp_max_c"] == 61
    assert clocks.window([(t1 + 10, t1 + 20)]) is None  # nothing read then
    assert clocks._proc is None  # the loop was stopped


def test_no_gpu_no_readings():
    with gpu_clocks.ClockSampler(torch.device("cpu")) as clocks:
        pass
    assert clocks.command is None and clocks.window([(0.0, time.time())]) is None


def test_attention_records_carry_the_clocks_of_their_rounds():
    shape = bench_attention.Shape("bf16", 16, 1, 2, 1, 16, causal=False)
    entries = [bench_attention.Entry({"impl": name, "mode": "fwd"},
                                     lambda: time.sleep(0.03)) for name in "ab"]
    args = bench_attention.parse_args(["--device", "cpu", "--rounds", "2", "--sustain-s", "0.2"])
    with gpu_clocks.ClockSampler(command=[sys.executable, "-c", FAKE_SMI]) as clocks:
        while not clocks.samples:
            time.sleep(0.01)
        bench_attention.time_in_rounds(entries, shape, torch.device("cpu"), args, clocks)
    for e in entries:  # 2 rounds x 3 calls x 30 ms each, then 2 rounds of 0.2 s
        for prefix in ("", "sustained_"):
            assert e.record[prefix + "clock_samples"] >= 40
            assert e.record[prefix + "power_w"] == 650.5
            assert e.record[prefix + "sm_clock_mhz"] in (1700, 1840, 1980)

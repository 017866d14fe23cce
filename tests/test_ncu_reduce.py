"""``gpu/ncu_reduce.py`` on exports in Nsight Compute's CSV formats (made here: no GPU, no ncu)."""

from __future__ import annotations

import csv
import json

from gpu import ncu_reduce

STALLED = "smsp__average_warps_issue_stalled_{}_per_issue_active.ratio"


def write_raw(path, kernels):
    """A ``--page raw --csv`` export: header, units row, one row per (name, us, stalls)."""
    names = ["ID", "Kernel Name", "gpu__time_duration.sum", *ncu_reduce.METRICS.values(),
             STALLED.format("wait"), STALLED.format("barrier"), STALLED.format("misc")]
    units = ["", "", "ms", *[""] * len(ncu_reduce.METRICS), "", "", ""]
    rows = [[str(i), name, str(ms), *["1,024"] * len(ncu_reduce.METRICS), *map(str, stalls)]
            for i, (name, ms, stalls) in enumerate(kernels)]
    with path.open("w", newline="") as f:
        csv.writer(f, quoting=csv.QUOTE_ALL).writerows([names, units, *rows])


def write_sass(path, name, lines):
    """A ``--page source --csv --print-source sass`` export of one kernel: (source, executed,
    samples, wait samples) per instruction."""
    header = ["Address", "Source", "Warp Stall Sampling (All Samples)", "Instructions Executed",
              "stall_wait", "stall_wait (Not Issued)"]
    rows = [[f"0x{i:x}", src, str(samples), str(executed), str(wait), "0"]
            for i, (src, executed, samples, wait) in enumerate(lines)]
    with path.open("w", newline="") as f:
        writer = csv.writer(f, quoting=csv.QUOTE_ALL)
        writer.writerow(["Kernel Name", name, ""])
        writer.writerows([header, *rows])


def test_kernels_with_times_in_microseconds_stalls_and_the_instruction_mix(tmp_path):
    write_raw(tmp_path / "d64_s2048_stable_flash.raw.csv",
              [("_fwd_kernel", 0.25, (1.5, 0.5, 0.001)), ("_dq_kernel", 0.5, (0.2, 2.0, 0.0))])
    write_sass(tmp_path / "d64_s2048_stable_flash.sass.csv", "_fwd_kernel", [
        ("HGMMA.64x64x16.F32.BF16 R24, gdesc[UR16], RZ, !UPT, gsb0", 10, 5, 1),
        ("WARPGROUP.DEPBAR.LE gsb0, 0x0", 10, 25, 0),
        ("@!P5 FMNMX R3, R24, R25, !PT", 30, 10, 9),
        ("FMNMX R2, R28, R3, !PT", 50, 10, 10),
    ])
    reports = ncu_reduce.reduce_dir(tmp_path)
    fwd, dq = reports["d64_s2048_stable_flash"]
    assert (fwd["name"], fwd["us"], dq["us"]) == ("_fwd_kernel", 250.0, 500.0)
    assert fwd["registers"] == 1024.0
    assert list(fwd["stalls"]) == ["wait", "barrier"]  # largest first, misc below 0.01 left out
    assert list(dq["stalls"]) == ["barrier", "wait"]
    assert fwd["mix"]["FMNMX"] == [0.8, 0.4]  # 80 of 100 executed, 20 of 50 samples
    assert fwd["stall_samples"] == {"wait": 0.4}
    assert (fwd["hgmma"], fwd["depbar"], fwd["code_instructions"]) == (1, 1, 4)
    assert "mix" not in dq  # the source page had only the forward


def test_command_line_writes_the_reports(tmp_path, capsys, monkeypatch):
    write_raw(tmp_path / "case_sdpa_cudnn.raw.csv", [("cudnn_fprop", 2.0, (0.5, 0.5, 0.5))])
    out = tmp_path / "summary.json"
    monkeypatch.setattr("sys.argv", ["ncu_reduce", str(tmp_path), str(out)])
    ncu_reduce.main()
    assert json.loads(out.read_text())["reports"]["case_sdpa_cudnn"][0]["us"] == 2000.0
    assert "cudnn_fprop" in capsys.readouterr().out

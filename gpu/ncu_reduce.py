"""Nsight Compute exports (``gpu/ncu_profile.sh``) reduced to what the kernel notes cite.

Per kernel of each ``<tag>_<impl>.raw.csv``: its GPU time, launch shape, instructions, issue and
pipe utilisation and warp stall reasons per issued instruction; and where the matching
``.sass.csv`` (ncu's source page) has the kernel, its instruction mix and the share of the warp
stall samples by opcode, with its ``HGMMA`` and ``WARPGROUP.DEPBAR`` counts (one wait per
``HGMMA`` is ptxas serializing the wgmma pipeline) and its code's length.

Run: ``python3 -m gpu.ncu_reduce DIR OUT.json`` (no GPU needed).
"""

from __future__ import annotations

import argparse
import collections
import csv
import json
import re
from pathlib import Path

# Report key -> ncu raw metric.
METRICS = {
    "grid": "launch__grid_size",
    "block": "launch__block_size",
    "registers": "launch__registers_per_thread",
    "programs_per_sm_by_registers": "launch__occupancy_limit_registers",
    "programs_per_sm_by_shared": "launch__occupancy_limit_shared_mem",
    "instructions": "smsp__inst_executed.sum",
    "issue_active_pct": "smsp__issue_active.avg.pct_of_peak_sustained_active",
    "warps_active_pct": "sm__warps_active.avg.pct_of_peak_sustained_active",
    "tensor_active_pct": "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active",
    "xu_pipe_pct": "sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active",
    "alu_pipe_pct": "sm__inst_executed_pipe_alu.avg.pct_of_peak_sustained_active",
    "fma_pipe_pct": "sm__inst_executed_pipe_fma.avg.pct_of_peak_sustained_active",
    "sm_clock_ghz": "sm__cycles_elapsed.avg.per_second",
    "l2_hit_pct": "lts__t_sector_hit_rate.pct",
    "shared_bank_conflicts": "l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum",
}
STALL = re.compile(r"^smsp__average_warps_issue_stalled_(\w+)_per_issue_active\.ratio$")
TO_US = {"ns": 1e-3, "us": 1.0, "ms": 1e3, "s": 1e6}  # the units row of the raw page


def number(text: str) -> float | None:
    """ncu's printed value (``8,192``, ``1.5``) as a float; None if empty or not a number."""
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return None


def raw_kernels(path: Path) -> list[dict]:
    """One dict per profiled kernel of a ``--page raw --csv`` export: name, ``us`` and
    ``METRICS``, and ``stalls`` (reason -> warps stalled per issued instruction, above 0.01)."""
    rows = list(csv.reader(path.open()))
    start = next(i for i, row in enumerate(rows) if row and row[0] == "ID")
    names, units = rows[start], rows[start + 1]
    unit = dict(zip(names, units))
    kernels = []
    for row in rows[start + 2:]:
        values = dict(zip(names, row))
        time = number(values["gpu__time_duration.sum"])
        kernel = {"name": values["Kernel Name"],
                  "us": round(time * TO_US[unit["gpu__time_duration.sum"]], 3)}
        kernel.update({key: number(values.get(metric, "")) for key, metric in METRICS.items()})
        stalls = {m.group(1): number(values[name]) for name in names if (m := STALL.match(name))}
        kernel["stalls"] = {reason: round(v, 3) for reason, v in
                            sorted(stalls.items(), key=lambda kv: -(kv[1] or 0)) if v and v > 0.01}
        kernels.append(kernel)
    return kernels


def opcode(source: str) -> str:
    """``FMNMX`` from a SASS line such as ``@!P5 FMNMX R3, R24, R25, !PT``."""
    match = re.match(r"\s*(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_]*)", source)
    return match.group(1) if match else "?"


def sass_kernels(path: Path) -> dict[str, dict]:
    """Kernel name -> instruction mix of a ``--page source --csv --print-source sass`` export:
    ``mix`` (opcode -> [share of instructions executed, share of stall samples], the 16 most
    executed), ``stall_samples`` (reason -> share of samples), ``hgmma`` and ``depbar``, and
    ``code_instructions`` (the kernel's SASS length, 16 bytes an instruction)."""
    blocks, current = {}, None
    for row in csv.reader(path.open()):
        if row and row[0] == "Kernel Name":
            current = blocks.setdefault(row[1], [])
        elif current is not None and row:
            current.append(row)
    out = {}
    for name, rows in blocks.items():
        header, body = rows[0], rows[1:]
        col = {n: i for i, n in enumerate(header)}
        executed, sampled = collections.Counter(), collections.Counter()
        reasons = collections.Counter()
        stall_cols = [n for n in header if n.startswith("stall_") and "Not Issued" not in n]
        hgmma = depbar = 0
        for row in body:
            source = row[col["Source"]]
            op = opcode(source)
            executed[op] += number(row[col["Instructions Executed"]]) or 0
            sampled[op] += number(row[col["Warp Stall Sampling (All Samples)"]]) or 0
            for reason in stall_cols:
                reasons[reason[6:]] += number(row[col[reason]]) or 0
            hgmma += op == "HGMMA"
            depbar += source.strip().startswith("WARPGROUP.DEPBAR")
        total_exec, total_samples = sum(executed.values()), sum(sampled.values())
        out[name] = {
            "mix": {op: [round(n / total_exec, 4), round(sampled[op] / total_samples, 4)]
                    for op, n in executed.most_common(16)},
            "stall_samples": {r: round(n / total_samples, 4) for r, n in reasons.most_common(10)},
            "hgmma": hgmma, "depbar": depbar, "code_instructions": len(body),
        }
    return out


def reduce_dir(folder: Path) -> dict[str, list[dict]]:
    """``<tag>_<impl>`` -> its kernels (``raw_kernels``, with ``sass_kernels``' fields merged
    in where the source page has the kernel)."""
    reports = {}
    for raw in sorted(folder.glob("*.raw.csv")):
        tag = raw.name[:-len(".raw.csv")]
        kernels = raw_kernels(raw)
        sass = folder / f"{tag}.sass.csv"
        if sass.exists():
            by_name = sass_kernels(sass)
            for kernel in kernels:
                kernel.update(by_name.get(kernel["name"], {}))
        reports[tag] = kernels
    return reports


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folder", type=Path)
    ap.add_argument("out", type=Path)
    args = ap.parse_args()
    reports = reduce_dir(args.folder)
    args.out.write_text(json.dumps({"reports": reports}, indent=1))
    for tag, kernels in reports.items():
        for k in kernels:
            top = ", ".join(f"{r} {v:.2f}" for r, v in list(k["stalls"].items())[:4])
            print(f"{tag:44s} {k['name'][:28]:28s} {k['us']:8.1f} us  regs {k['registers']:5.0f}"
                  f"  issue {k['issue_active_pct']:4.1f}%  tensor {k['tensor_active_pct']:4.1f}%"
                  f"  {k['instructions'] / 1e6:6.1f}M inst  {top}")


if __name__ == "__main__":
    main()

"""Compare runs from their metrics CSVs (recipes/training.py MetricsCSV): a summary table, JSON and a PNG.

    python recipes/plot_curves.py --png curves.png --json summary.json \
        runs/a/metrics.csv:stable_flash runs/b/metrics.csv:sdpa

For each run: steps, final loss, median tokens/s (the first log interval, which holds start-up, is
left out), peak GPU memory; for each run after the first: the largest |loss difference| from the
first run at the steps both logged.
"""

from __future__ import annotations

import argparse
import csv
import json
import statistics
from pathlib import Path


def read_run(path: str) -> dict[str, list[float]]:
    """Columns of a metrics CSV as float lists (empty cells -> nan)."""
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    if not rows:
        raise ValueError(f"{path} has no logged steps")
    return {k: [float(r[k]) if r[k] not in ("", "None") else float("nan") for r in rows] for k in rows[0]}


def summarize(runs: dict[str, dict[str, list[float]]]) -> dict[str, dict]:
    """Per-run summary numbers, and the loss gap to the first run."""
    first = next(iter(runs.values()))
    ref = dict(zip(first["step"], first["loss"], strict=True))
    out = {}
    for label, r in runs.items():
        rates = r["tokens_per_s"][1:] or r["tokens_per_s"]
        common = [(s, l) for s, l in zip(r["step"], r["loss"], strict=True) if s in ref]
        out[label] = {
            "steps": int(r["step"][-1]),
            "final_loss": r["loss"][-1],
            "median_tokens_per_s": statistics.median(rates),
            "peak_mem_gib": max(r["peak_mem_gib"]),
            "max_abs_loss_diff_vs_first": max((abs(l - ref[s]) for s, l in common), default=float("nan")),
            "wall_s": r["elapsed_s"][-1],
        }
    return out


def plot(runs: dict[str, dict[str, list[float]]], png: str):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax_loss, ax_rate) = plt.subplots(1, 2, figsize=(11, 4))
    for label, r in runs.items():
        ax_loss.plot(r["step"], r["loss"], marker="o", markersize=2, label=label)
        ax_rate.plot(r["step"][1:], r["tokens_per_s"][1:], marker="o", markersize=2, label=label)
    ax_loss.set(xlabel="optimizer step", ylabel="training loss", title="training loss")
    ax_rate.set(xlabel="optimizer step", ylabel="tokens / s", title="throughput")
    for ax in (ax_loss, ax_rate):
        ax.grid(alpha=0.3)
        ax.legend()
    fig.tight_layout()
    fig.savefig(png, dpi=110)


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", nargs="+", help="CSV:label pairs; the first is the reference")
    parser.add_argument("--png")
    parser.add_argument("--json")
    args = parser.parse_args(argv)
    runs = {}
    for spec in args.runs:
        path, _, label = spec.partition(":")
        runs[label or Path(path).stem] = read_run(path)
    summary = summarize(runs)
    if args.png:
        try:
            plot(runs, args.png)
        except ImportError:
            print("matplotlib is not installed: no PNG (the CSVs and the JSON hold the numbers)")
    if args.json:
        Path(args.json).write_text(json.dumps(summary, indent=1))
    print(f"{'run':<24}{'steps':>7}{'final loss':>12}{'tokens/s':>12}{'peak GiB':>10}{'|dloss| vs 1st':>16}")
    for label, s in summary.items():
        print(
            f"{label:<24}{s['steps']:>7}{s['final_loss']:>12.4f}{s['median_tokens_per_s']:>12.0f}"
            f"{s['peak_mem_gib']:>10.2f}{s['max_abs_loss_diff_vs_first']:>16.2e}"
        )
    return summary


if __name__ == "__main__":
    main()

"""The fix's cost on issue 4's target shapes, pooled over several runs: per run and shape the
ratio ``stable_flash_nofix`` / ``stable_flash`` of the ``do_bench`` medians and of the
back-to-back timings (``--sustain-s``), per shape the median of those ratios over the runs, then
the geometric mean and the worst case of those medians over the shapes. Each ratio stays
within one run (both calls interleaved in one process); several runs of a shape average over the
processes' compiles, tuner picks and the card's state, which a single stitched set does not.

    python -m benchmarks.fix_cost benchmarks/results/A-attention.json B-attention.json ...
"""

from __future__ import annotations

import argparse
import statistics

from benchmarks.make_tables import NOFIX, geomean, markdown_table, meets, target_ratio
from benchmarks.targets import TARGET_SET, bf16_shapes, target_key

FIELDS = (("medians", "tflops"), ("back to back", "tflops_sustained"))
LIMIT = 1.03


def run_ratios(paths: list[str]) -> dict[tuple, dict[str, list[float]]]:
    """``{shape_key: {field: [ratio per run]}}`` over the target shapes of ``paths`` that hold
    both of ours (``bf16``, ``fwd_bwd``)."""
    pooled: dict[tuple, dict[str, list[float]]] = {}
    for path in paths:
        for shape, by_impl in bf16_shapes(path).items():
            if target_key(shape) not in TARGET_SET:
                continue
            for _, field in FIELDS:  # None where either of ours is missing
                ratio = target_ratio(by_impl, NOFIX, field)
                if ratio is not None:
                    pooled.setdefault(shape, {}).setdefault(field, []).append(ratio)
    return pooled


def report(paths: list[str]) -> str:
    """Per shape the runs' ratios and their median; then geomean, worst and shapes above 3%."""
    pooled = run_ratios(paths)
    rows, medians = [], {field: [] for _, field in FIELDS}
    for shape in sorted(pooled):
        seqlen, head_dim, causal, hq, hkv, _ = shape
        cells = [str(seqlen), str(head_dim), "yes" if causal else "no", f"{hq}/{hkv}"]
        for _, field in FIELDS:
            ratios = pooled[shape].get(field, [])
            median = statistics.median(ratios) if ratios else None
            if median is not None:
                medians[field].append(median)
            cells.append(" ".join(f"{r:.3f}" for r in ratios) or "—")
            cells.append(f"{median:.3f}" if median is not None else "—")
        rows.append(cells)
    lines = [f"The fix's cost (nofix / fix) over {len(paths)} file(s), "
             f"{len(pooled)} of {len(TARGET_SET)} target shapes:", ""]
    lines += markdown_table(["S", "D", "causal", "Hq/Hkv", "runs", "median", "runs, back to back",
                             "median, back to back"], rows)
    summary = []
    for label, field in FIELDS:
        values = medians[field]
        if values:
            above = sum(not meets(v, LIMIT, False) for v in values)
            summary.append([label, f"{geomean(values):.4f}", f"{max(values):.3f}",
                            f"{above} of {len(values)}"])
    lines += ["", *markdown_table(["timings", "geomean of the medians", "worst",
                                   f"shapes above {LIMIT}"], summary)]
    return "\n".join(lines)


def main(argv=None) -> str:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("results", nargs="+", help="attention results JSON files")
    text = report(p.parse_args(argv).results)
    print(text)
    return text


if __name__ == "__main__":
    main()

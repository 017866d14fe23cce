"""Issue 4's targets over the runs that together cover its 32 shapes: each target shape taken
from one results file (the last one named that has it, so every ratio stays within one run),
a table of ours against each peer per shape with the targets it misses, and
``make_tables.target_summary`` over the stitched shapes, from the ``do_bench`` medians and,
where the runs have them, from the back-to-back timings (``--sustain-s``).

    python -m benchmarks.targets benchmarks/results/A-attention.json B-attention.json ...
"""

from __future__ import annotations

import argparse
import itertools
import json
from pathlib import Path

from benchmarks.make_tables import (
    NOFIX, OURS, TARGETS, has_sustained, markdown_table, meets, record_field, shape_rows,
    target_ratio, target_shapes, target_summary,
)

MODE = "fwd_bwd"
# (seqlen, head_dim, causal, query heads per KV head) of issue 4's 32 bf16 target shapes: its
# targets hold from seqlen 2k on, and its sweep ends at 16k.
TARGET_SET = tuple(itertools.product((2048, 4096, 8192, 16384), (64, 128), (False, True), (1, 8)))


def bf16_shapes(path: str) -> dict[tuple, dict[str, dict]]:
    """``{shape_key: {impl: record}}`` of the bf16 ``fwd_bwd`` records of one attention
    results file; a ValueError for any other benchmark's file."""
    data = json.loads(Path(path).read_text())
    if data.get("benchmark") != "attention":
        raise ValueError(f"{path}: not an attention sweep (benchmark={data.get('benchmark')!r})")
    return shape_rows(data["records"]).get(("bf16", MODE), {})


def stitch(paths: list[str]) -> tuple[list[dict], dict[tuple, str]]:
    """The ``fwd_bwd`` records of ``paths`` (attention results), one file per shape: a later
    file's records of a shape replace an earlier one's. Returns the records and, per shape key
    (``make_tables.SHAPE_KEYS``), the name of the file they came from."""
    chosen: dict[tuple, tuple[str, dict[str, dict]]] = {}
    for path in paths:
        for shape, by_impl in bf16_shapes(path).items():
            chosen[shape] = (Path(path).name, by_impl)
    records = [r for _, by_impl in chosen.values() for r in by_impl.values()]
    return records, {shape: name for shape, (name, _) in chosen.items()}


def _group(shape: tuple) -> int:
    seqlen, head_dim, causal, hq, hkv, batch = shape
    return hq // hkv


def target_key(shape: tuple) -> tuple:
    """A shape key's ``TARGET_SET`` entry: (seqlen, head_dim, causal, query heads per KV head)."""
    return shape[0], shape[1], shape[2], _group(shape)


def missing(records: list[dict]) -> list[tuple]:
    """``TARGET_SET`` entries that no record covers."""
    have = {target_key(s) for s in target_shapes(records, MODE)}
    return [t for t in TARGET_SET if t not in have]


def _misses(by_impl: dict[str, dict], field: str) -> list[str]:
    """The ``TARGETS`` labels this shape's ``field`` rates miss."""
    return [label for label, peer, target, higher in TARGETS
            if (ratio := target_ratio(by_impl, peer, field)) is not None
            and not meets(ratio, target, higher)]


def shape_table(records: list[dict], sources: dict[tuple, str]) -> list[str]:
    """Per target shape: ours' median ms, ours over FA2, cuDNN and FlexAttention, the fix's cost
    (nofix/fix), FA2's ratio and the fix's cost back to back, the source file and the targets
    the medians miss."""
    rows = []
    shapes = target_shapes(records, MODE)
    for shape in sorted(shapes, key=lambda s: (s[1], not s[2], _group(s), s[0])):
        by = shapes[shape]
        seqlen, head_dim, causal, hq, hkv, _ = shape

        def cell(peer, field="tflops"):
            ratio = target_ratio(by, peer, field)
            return "—" if ratio is None else f"{ratio:.3f}"

        ms = record_field(by, OURS, "ms")
        rows.append([str(seqlen), str(head_dim), "yes" if causal else "no", f"{hq}/{hkv}",
                     "—" if ms is None else f"{ms:.3f}", cell("sdpa_flash"), cell("sdpa_cudnn"),
                     cell("flex"), cell(NOFIX), cell("sdpa_flash", "tflops_sustained"),
                     cell(NOFIX, "tflops_sustained"), f"`{sources[shape]}`",
                     ", ".join(_misses(by, "tflops")) or "none"])
    header = ["S", "D", "causal", "Hq/Hkv", "ours ms", "ours/FA2", "ours/cuDNN", "ours/flex",
              "fix cost", "ours/FA2, back to back", "fix cost, back to back", "file",
              "targets missed (medians)"]
    return markdown_table(header, rows)


def report(paths: list[str]) -> str:
    """Markdown: the per-shape table, the targets from medians and back to back, and the target
    shapes no file covers."""
    records, sources = stitch(paths)
    out = [f"Issue 4's target shapes from {len(paths)} file(s), each shape from one run:", ""]
    out += shape_table(records, sources) + ["", "Targets, `do_bench` medians:", ""]
    out += target_summary(records) + [""]
    if has_sustained(records):
        out += ["Targets, back to back:", ""] + target_summary(records, "tflops_sustained") + [""]
    gaps = missing(records)
    if gaps:
        out.append(f"Not covered ({len(gaps)} of {len(TARGET_SET)}): " + "; ".join(
            f"S {s} D{d} {'causal' if c else 'no mask'} {'MHA' if g == 1 else f'GQA {g}:1'}"
            for s, d, c, g in gaps))
    return "\n".join(out).rstrip() + "\n"


def main(argv=None) -> str:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("results", nargs="+", help="attention results JSON files, oldest first")
    text = report(p.parse_args(argv).results)
    print(text, end="")
    return text


if __name__ == "__main__":
    main()

"""Compare two kernel packages' ``benchmarks.tune_kernel`` runs, config by config.

Each side is one or more ``tune_kernel --grid table`` result files of the same shapes (runs of
one package, interleaved with the other's in one machine session). Per (part, shape) this
prints the median over the table configs of ``variant / base - 1`` (each config's time the
fastest of its side's runs) and the same ratio for the fastest config of each side. A change
that leaves a shape's code alone (a control) shows the noise.

    python -m benchmarks.compare_variants --base a1.json a2.json --variant b1.json b2.json
"""

from __future__ import annotations

import argparse
import json
import statistics


def fastest_per_config(paths: list[str]) -> dict[tuple, float]:
    """``{(part, head_dim, causal, heads_kv, config): ms}``, the fastest of ``paths``' runs."""
    best: dict[tuple, float] = {}
    for path in paths:
        with open(path) as f:
            for r in json.load(f)["records"]:
                if r["ms"] is None:
                    continue
                config = (r["block_m"], r["block_n"], r["num_warps"], r["num_stages"], r["tma"])
                key = (r["part"], r["head_dim"], r["causal"], r["heads_kv"], config)
                best[key] = min(best.get(key, float("inf")), r["ms"])
    return best


def compare(base: dict[tuple, float], variant: dict[tuple, float]) -> list[dict]:
    """Per (part, head_dim, causal, heads_kv): median per-config change and fastest-config
    change of ``variant`` against ``base`` (fractions), over the configs both timed."""
    rows = []
    for shape in sorted({k[:4] for k in base}, key=str):
        both = [k for k in base if k[:4] == shape and k in variant]
        if not both:
            continue
        rows.append(dict(
            part=shape[0], head_dim=shape[1], causal=shape[2], heads_kv=shape[3],
            configs=len(both),
            median_change=statistics.median(variant[k] / base[k] - 1 for k in both),
            best_change=min(variant[k] for k in both) / min(base[k] for k in both) - 1,
        ))
    return rows


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", nargs="+", required=True)
    ap.add_argument("--variant", nargs="+", required=True)
    args = ap.parse_args(argv)
    print("part  D    causal Hkv configs  median per config  fastest config")
    for r in compare(fastest_per_config(args.base), fastest_per_config(args.variant)):
        print(f"{r['part']:5} {r['head_dim']:<4} {str(r['causal']):6} {r['heads_kv']:<3} "
              f"{r['configs']:<8} {100 * r['median_change']:+17.1f}% "
              f"{100 * r['best_change']:+14.1f}%")


if __name__ == "__main__":
    main()

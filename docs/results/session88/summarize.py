"""Session 88: the tables of docs/results/session88/README.md from the route checks' JSON files
of calls 1-9 (``gpu/route_check.py`` through ``routes_by_triton.sh``), CPU only:

    python3 docs/results/session88/summarize.py > docs/results/session88/summary.txt

A run's file is ``callN/rK-tVERSION[-TREE]-routes.json``; each shape's TFLOP/s per route is the
median over the runs of that version and tree (each run's figure a median of ``--rounds``
interleaved ``do_bench`` rounds)."""
import collections
import glob
import json
import math
import os
import re
import statistics

HERE = os.path.dirname(os.path.abspath(__file__))
NAME = re.compile(r"r\d+-t(\d+)(?:-(\w+))?-routes\.json")


def route(name: str) -> tuple[bool, bool]:
    """(persistent, fix on) of a route_check variant name."""
    return "persistent" in name, not name.endswith("nofix")


def shape_key(shape: dict) -> str:
    kind = "MHA" if shape["heads_kv"] == shape["heads_q"] else "GQA"
    return f"D{shape['head_dim']} S{shape['seqlen']} {kind}"


def load(calls) -> dict:
    """(version, tree) -> shape -> (persistent, fix) -> [TFLOP/s of each run of ``calls``]."""
    runs = collections.defaultdict(lambda: collections.defaultdict(
        lambda: collections.defaultdict(list)))
    for call in calls:
        for path in sorted(glob.glob(os.path.join(HERE, f"call{call}", "r*-routes.json"))):
            version, tree = NAME.match(os.path.basename(path)).groups()
            for timing in json.load(open(path))["timings"]:
                for name, tflops in timing["tflops"].items():
                    by_route = runs[version, tree or "main"][shape_key(timing["shape"])]
                    by_route[route(name)].append(tflops)
    return runs


def med(values) -> float:
    return statistics.median(values)


def geomean(values) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values))


def routes_table() -> None:
    """Calls 1-3: both launches, fix on and off, main under 3.6 and 3.8.0."""
    runs = load((1, 2, 3))
    print("## Calls 1-3: main's no-mask Gluon forward, TFLOP/s (median of the runs)")
    print("runs:", {v: len(next(iter(s.values()))[True, True]) for (v, _), s in runs.items()})
    print(f"{'shape':18s} {'Triton':6s} {'fix tile':>9s} {'fix pers':>9s} {'nofix tile':>10s} "
          f"{'nofix pers':>10s}  pers/tile fix, nofix   fix/nofix (best launch)")
    for shape in runs["36", "main"]:
        for version in ("36", "38"):
            r = {k: med(v) for k, v in runs[version, "main"][shape].items()}
            best_fix = max(r[False, True], r[True, True])
            best_nofix = max(r[False, False], r[True, False])
            print(f"{shape:18s} {version:6s} {r[False, True]:9.1f} {r[True, True]:9.1f} "
                  f"{r[False, False]:10.1f} {r[True, False]:10.1f}  "
                  f"{r[True, True] / r[False, True] - 1:+6.1%} "
                  f"{r[True, False] / r[False, False] - 1:+6.1%}      {best_fix / best_nofix:.3f}")
    for fix in (True, False):
        for pers in (True, False):
            ratios = [med(runs["38", "main"][s][pers, fix]) / med(runs["36", "main"][s][pers, fix])
                      for s in runs["36", "main"]]
            launch = "persistent" if pers else "per tile  "
            print(f"3.8.0 / 3.6, fix {'on ' if fix else 'off'} {launch}: geomean "
                  f"{geomean(ratios):.3f}, range {min(ratios):.3f}-{max(ratios):.3f}")
    print()


def variants_table(call: int) -> None:
    """A variant call: each tree's persistent forward with the fix against main's, and the
    fix's cost (fix on against off) per tree, under each version."""
    runs = load((call,))
    print(f"## Call {call}: persistent launch, TFLOP/s with the fix / without (median of the runs)")
    print("runs:", {f"{v}:{t}": len(next(iter(s.values()))[True, True])
                    for (v, t), s in runs.items()})
    keys = sorted(runs, key=lambda k: (k[0], k[1] != "main", k[1]))
    print(f"{'shape':18s} " + " ".join(f"{v + ':' + t:>22s}" for v, t in keys))
    shapes = list(runs[keys[0]])
    for shape in shapes:
        cells = []
        for key in keys:
            on, off = med(runs[key][shape][True, True]), med(runs[key][shape][True, False])
            gain = on / med(runs[key[0], "main"][shape][True, True]) - 1
            cells.append(f"{on:6.1f}/{off:6.1f} {gain:+5.1%}")
        print(f"{shape:18s} " + " ".join(f"{c:>22s}" for c in cells))
    for key in keys:
        for head_dim in ("D64", "D128"):
            mine = [s for s in shapes if s.startswith(head_dim + " ")]
            fix = geomean([med(runs[key][s][True, True]) / med(runs[key[0], "main"][s][True, True])
                           for s in mine])
            cost = geomean([med(runs[key][s][True, False]) / med(runs[key][s][True, True])
                            for s in mine])
            print(f"{key[0]}:{key[1]:12s} {head_dim:4s} fix on against main's (same Triton): "
                  f"{fix - 1:+.1%}; the fix's forward cost (off/on): {cost:.3f}")
    print()


if __name__ == "__main__":
    routes_table()
    for call in (5, 7, 9):
        variants_table(call)

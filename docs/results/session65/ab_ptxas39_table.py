"""Session 65: the D64 forward routes under Triton 3.9 built by ptxas 13.4 (bundled) against
13.0 (PyTorch's), from call 3's route JSONs (ab_ptxas39_packed.sh): per shape and route, each
pass's TFLOP/s and the geometric mean's change from 13.4 to 13.0.

Run: ``python3 ab_ptxas39_table.py call3_ab_ptxas39 > call3_ab_ptxas39_table.txt``."""
import collections
import glob
import json
import math
import sys

rows = collections.defaultdict(lambda: collections.defaultdict(dict))
for f in sorted(glob.glob(sys.argv[1] + "/fwd_gpu*_*.json")):
    tag = f.rsplit("/", 1)[1][4:-5]  # e.g. gpu0_bundled_1
    for r in json.load(open(f))["timings"]:
        sh = r["shape"]
        key = (sh["seqlen"], sh["heads_q"] // sh["heads_kv"], sh["causal"])
        for v, t in r["tflops"].items():
            rows[key][v][tag] = t


def gm(xs):
    return math.exp(sum(map(math.log, xs)) / len(xs))


for key in sorted(rows):
    print("S %d group %d causal %s" % key)
    for v, tags in rows[key].items():
        b = [t for k, t in sorted(tags.items()) if "bundled" in k]
        c = [t for k, t in sorted(tags.items()) if "torch" in k]
        if b and c:
            print(f"  {v:42s} 13.4 {' '.join('%4.0f' % x for x in b):10s} "
                  f"13.0 {' '.join('%4.0f' % x for x in c):10s} {gm(c) / gm(b) - 1:+6.1%}")

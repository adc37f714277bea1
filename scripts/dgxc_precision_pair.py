#!/usr/bin/env python3
"""Split what cleave misses on the DGX Cloud H100 rows with their BF16 / FP8 pairs (issue 25).

NVIDIA's DGXC v24.11.1 recipes publish each layout twice, in BF16 (tests/data/public_runs_2024.csv)
and in FP8 (tests/data/public_runs_2024_fp8.csv, row id + 3000). FP8 shrinks the linear-layer GEMMs
and leaves the attention core, the memory-bound kernels and the communication as they were, so the
pair tells a GEMM-rate error from an error in the rest, which one precision alone cannot:

    scripts/dgxc_precision_pair.py [CLEAVE] [DATA_DIR]

Per source (its rows at every GPU count pooled) it prints the signed mean error of each precision
and three readings of the missing time, each with the residual it leaves:
  A  GEMMs alone mispriced: T = a G + R, a fitted to BF16 and to FP8 separately (a_bf16, a_fp8);
  B  GEMMs and the rest:    T = a G + b N + F, one (a, b) for both precisions (least squares);
  C  a time per layer and micro-batch that the model lacks: (T - predicted) / (layers x mbs).
G = the priced linear-layer GEMMs, N = attention + memory-bound + recompute, F = exposed
communication + optimizer; the bubble and the straggler term scale with G + N. Read from
`cleave published --format json` (predicted_by_kind_s). Nothing here is fitted into cleave.
"""
import csv
import json
import os
import subprocess
import sys
from collections import defaultdict


def published(cleave, path):
    out = subprocess.run([cleave, "published", path, "--format", "json"], check=True,
                         capture_output=True, text=True).stdout
    return {r["row_id"]: r for r in json.loads(out)["rows"]}


def terms(r):
    k = r["predicted_by_kind_s"]
    g = k["gemm"]
    n = k["attention"] + k["memory_bound"] + k["recompute"]
    scale = 1.0 + (k["bubble"] + k["straggler"]) / (g + n)
    return g * scale, n * scale, k["exposed_comm"] + k["optimizer"]


def lsq2(rows):
    """Least squares of y = a x1 + b x2 over (x1, x2, y)."""
    s11 = sum(x1 * x1 for x1, _, _ in rows)
    s12 = sum(x1 * x2 for x1, x2, _ in rows)
    s22 = sum(x2 * x2 for _, x2, _ in rows)
    t1 = sum(x1 * y for x1, _, y in rows)
    t2 = sum(x2 * y for _, x2, y in rows)
    det = s11 * s22 - s12 * s12
    return (t1 * s22 - s12 * t2) / det, (s11 * t2 - s12 * t1) / det


def main():
    cleave = sys.argv[1] if len(sys.argv) > 1 else "build/release/cleave"
    data = sys.argv[2] if len(sys.argv) > 2 else "tests/data"
    bf = published(cleave, os.path.join(data, "public_runs_2024.csv"))
    f8 = published(cleave, os.path.join(data, "public_runs_2024_fp8.csv"))
    with open(os.path.join(data, "public_runs_2024.csv"), newline="") as f:
        csvrows = {int(r["row_id"]): r for r in csv.DictReader(f)}
    by_source = defaultdict(list)
    for rid in sorted(bf):
        if rid + 3000 in f8:
            by_source[bf[rid]["source_key"]].append(rid)
    print("source               rows | signed % bf16   fp8 | A: a_bf16 a_fp8 | B: a     b    "
          "resid % | C: ms per layer x mbs bf16  fp8")
    for src, rids in by_source.items():
        sb = sum(bf[r]["error_pct"] for r in rids) / len(rids)
        sf = sum(f8[r + 3000]["error_pct"] for r in rids) / len(rids)
        a_b, a_f, pts, cb, cf = [], [], [], [], []
        for r in rids:
            for row, sink, csink in ((bf[r], a_b, cb), (f8[r + 3000], a_f, cf)):
                g, n, fx = terms(row)
                t = row["published_s"]
                sink.append((t - n - fx) / g)
                pts.append((g, n, t - fx))
                c = csvrows[r]
                layers = int(c["num_layers"]) // int(c["pp"])
                mbs = int(c["global_batch_size"]) // (int(c["dp"]) * int(c["micro_batch_size"]))
                csink.append(1e3 * (t - row["predicted_s"]) / (layers * mbs))
        a, b = lsq2(pts)
        resid = [100.0 * (a * g + b * n - y) / y for g, n, y in pts]
        rms = (sum(e * e for e in resid) / len(resid)) ** 0.5
        mean = lambda v: sum(v) / len(v)
        print(f"{src:20s} {len(rids):4d} | {sb:13.1f} {sf:5.1f} | {mean(a_b):8.2f} {mean(a_f):5.2f}"
              f" | {a:5.2f} {b:5.2f} {rms:6.1f}  | {mean(cb):27.2f} {mean(cf):4.2f}")


if __name__ == "__main__":
    main()

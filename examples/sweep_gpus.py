#!/usr/bin/env python3
"""A notebook-style sweep with cleave's Python API: how the best plan of one model changes as the
job grows from 8 to 256 GPUs (weak scaling: 4 sequences per GPU), and how the same model fares
with a wider hidden size. Run after `pip install .` (or with PYTHONPATH=build/release/python):

    python3 examples/sweep_gpus.py [OUT_FOLDER]

Prints one row per job and writes a plot: sweep.png with matplotlib when it is installed, else
sweep.svg with the report's own SVG writer (x step time, y memory per GPU, one point per job).
"""
import os
import sys

import cleave

HERE = os.path.dirname(os.path.abspath(__file__))
out_dir = sys.argv[1] if len(sys.argv) > 1 else "."

# The model as keywords: no file needed to try a variant.
base = dict(arch="llama", layers=40, heads=40, ffn_hidden=13824, vocab=32000, seq_len=4096)
cluster = cleave.Cluster("dgx-h100")

rows = []
for hidden in (5120, 6400):  # 40 heads of 128, of 160
    model = cleave.Model(name=f"llama-40l-h{hidden}", hidden=hidden, **base)
    for gpus in (8, 16, 32, 64, 128, 256):
        result = cleave.plan(model, cluster, gpus=gpus, gbs=4 * gpus, top=1)
        if not result.plans:
            print(f"{model.name:16s} {gpus:4d} GPUs: no feasible plan")
            continue
        best = result.plans[0]
        rows.append((model.name, gpus, best))
        print(f"{model.name:16s} {gpus:4d} GPUs  {best.flags:<62s} {best.iteration_time_s:6.3f} s"
              f"  {best.tokens_per_s / gpus:7.0f} tok/s/GPU  MFU {100 * best.mfu:4.1f} %"
              f"  {best.memory_gib.total:5.1f} GiB")

try:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    for name in sorted({r[0] for r in rows}):
        pts = [(g, b.tokens_per_s / g) for n, g, b in rows if n == name]
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=name)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("GPUs (4 sequences each)")
    ax.set_ylabel("tokens/s per GPU, best plan")
    ax.legend()
    path = os.path.join(out_dir, "sweep.png")
    fig.savefig(path, dpi=120, bbox_inches="tight")
except ImportError:
    points = [(f"{n} on {g} GPUs: {b.flags}", b.iteration_time_s, b.memory_gib.total, False)
              for n, g, b in rows]
    path = os.path.join(out_dir, "sweep.svg")
    with open(path, "w", encoding="utf-8") as f:
        f.write(cleave.scatter_svg(points, cluster.memory_gib))
print("wrote", path)

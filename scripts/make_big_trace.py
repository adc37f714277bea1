#!/usr/bin/env python3
"""Writes a large Kineto trace for benchmarking `cleave trace`: the events of a real trace
(default: ../shared/traces/deepseek-v3-train-h800.json) repeated, each copy shifted in time past
the last and its correlation / External ids offset, until the file reaches --mb megabytes.
Usage: make_big_trace.py OUT.json [--mb 1024] [--source TRACE] [--gzip]"""
import argparse, gzip, json, os, sys

ap = argparse.ArgumentParser()
ap.add_argument("out")
ap.add_argument("--mb", type=float, default=1024)
ap.add_argument("--source", default=os.path.join(os.path.dirname(__file__), "..", "..", "shared",
                                                  "traces", "deepseek-v3-train-h800.json"))
ap.add_argument("--gzip", action="store_true")
a = ap.parse_args()
src = json.load(open(a.source))
events = src["traceEvents"]
ts = [e["ts"] for e in events if "ts" in e]
t0, t1 = min(ts), max(e["ts"] + e.get("dur", 0) for e in events if "ts" in e)
width = t1 - t0 + 1000
head = {k: v for k, v in src.items() if k != "traceEvents"}
target = int(a.mb * 1e6)
out = gzip.open(a.out, "wt", compresslevel=1) if a.gzip else open(a.out, "w")
written = 0
out.write('{\n  "traceEvents": [\n')
copy = 0
first = True
while written < target:
    parts = []
    for e in events:
        e2 = dict(e)
        if "ts" in e2:
            e2["ts"] = e["ts"] + copy * width
        if "args" in e2:
            args = dict(e2["args"])
            for k in ("correlation", "External id"):
                if k in args:
                    args[k] = args[k] + copy * 10_000_000
            e2["args"] = args
        if e2.get("ph") in ("s", "f") and "id" in e2:
            e2["id"] = e2["id"] + copy * 10_000_000
        parts.append(json.dumps(e2))
    chunk = ("" if first else ",\n") + ",\n".join(parts)
    first = False
    out.write(chunk)
    written += len(chunk)
    copy += 1
out.write("\n  ],\n")
out.write(",\n".join('  "%s": %s' % (k, json.dumps(v)) for k, v in head.items()))
out.write("\n}\n")
out.close()
print(f"{a.out}: {copy} copies of {len(events)} events, {written / 1e6:.0f} MB of events", file=sys.stderr)

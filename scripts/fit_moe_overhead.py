#!/usr/bin/env python3
"""Fit [moe] quantised_expert_overhead_us of the calibration overlays to the quantised MoE rows.

    scripts/fit_moe_overhead.py [CLEAVE] [CSV] [--release YY.MM] [--exclude ROW,...]

For each hardware profile with MoE rows whose expert GEMMs are quantised (FP8-CS, MXFP8) in
public_runs_2025.csv, a grid search (0..2000 us, step 5) of the profile's overlay value that
minimises the iteration-time MAPE of `cleave published` over those rows; then, for each such row,
the same fit without it and that row's error at the value the other rows chose (leave one row out;
a profile with one row has no held-out figure). The value is a fitted constant: it goes into
hwprofiles/calibration/<profile>.toml, whose fitted_rows must list the rows used. Runs the search
in a temporary CLEAVE_HWPROFILES folder holding a copy of each overlay; the repository's files are
only read.

With --release, the value searched is a [[moe.from_release]] entry for that release (the rows'
framework release, e.g. 26.02 for the NeMo 26.02 and 26.04 rows): the overlay's base [moe] value
(fitted under an earlier release) is kept, and rows of the CSV priced under that release choose
the new entry. --exclude leaves rows out of the fit (they stay in cleave published's MAPE); a
profile with a single row left is not fitted (no constant from one row).

    scripts/fit_moe_overhead.py --implied [CLEAVE] [CSV ...]

prints, for every quantised MoE row of the CSVs (default: the 2025 and 2026h1 files), the
per-expert value that would make that row's prediction equal its published time with everything
else as priced: cleave published is run with every overlay's value (its [moe] base and each
[[moe.from_release]] entry) at 0 and at 1000 us, and the row's time is linear in the value in
between. A constant that describes a mechanism gives one value per profile and release; the
spread of these shows how far the fitted one is a property of its rows. Fits nothing.
"""
import csv
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ARGS = [a for a in sys.argv[1:]]
RELEASE = None
EXCLUDE = set()
IMPLIED = "--implied" in ARGS
if IMPLIED:
    ARGS.remove("--implied")
if "--release" in ARGS:
    i = ARGS.index("--release")
    RELEASE = ARGS[i + 1]
    del ARGS[i:i + 2]
if "--exclude" in ARGS:
    i = ARGS.index("--exclude")
    EXCLUDE = {int(x) for x in ARGS[i + 1].split(",")}
    del ARGS[i:i + 2]
CLEAVE = ARGS[0] if len(ARGS) > 0 else os.path.join(ROOT, "build/dev/cleave")
CSV = ARGS[1] if len(ARGS) > 1 else os.path.join(ROOT, "../shared/validation/public_runs_2025.csv")
GRID = range(0, 2001, 5)


def is_quantised_moe(r):
    """A CSV row of an MoE model whose expert GEMMs are quantised (FP8-CS, MXFP8)."""
    return bool(r["num_experts"]) and r["precision"].startswith(("FP8", "MXFP8"))


def quantised_moe_rows():
    rows = []
    with open(CSV, newline="") as f:
        for r in csv.DictReader(f):
            if is_quantised_moe(r) and int(r["row_id"]) not in EXCLUDE:
                rows.append(int(r["row_id"]))
    return rows


def overlay_text(profile, value):
    src = os.path.join(ROOT, "hwprofiles", "calibration", profile + ".toml")
    if RELEASE is not None:
        # keep the base [moe] value; replace (or add) this release's entry
        text = open(src).read() if os.path.exists(src) else (
            '[calibration]\nprofile = "%s"\nfitted_on = "public_runs_2025.csv"\n' % profile)
        # the entry runs to the next table header (a line that opens with '['): its
        # fitted_rows = [[...]] value opens with a key, not a bracket
        text = re.sub(r'\n\[\[moe\.from_release\]\]\nrelease = "%s".*?(?=\n\[|\Z)' % re.escape(RELEASE),
                      "\n", text, flags=re.S)
        return (text.rstrip() + '\n\n[[moe.from_release]]\nrelease = "%s"\n'
                'quantised_expert_overhead_us = %g\n' % (RELEASE, value))
    if os.path.exists(src):
        text = open(src).read()
        text = re.sub(r"\n\[moe\][^\[]*", "\n", text)
    else:
        text = ('[calibration]\nprofile = "%s"\nfitted_on = "public_runs_2025.csv"\n' % profile)
    return text.rstrip() + "\n\n[moe]\nquantised_expert_overhead_us = %g\n" % value


def published(tmp, values):
    cal = os.path.join(tmp, "calibration")
    os.makedirs(cal, exist_ok=True)
    for profile, v in values.items():
        with open(os.path.join(cal, profile + ".toml"), "w") as f:
            f.write(overlay_text(profile, v))
    env = dict(os.environ, CLEAVE_HWPROFILES=tmp)
    out = subprocess.run([CLEAVE, "published", CSV, "--format", "json"], env=env,
                         capture_output=True, text=True)
    if out.returncode:
        sys.exit(out.stderr)
    return {r["row_id"]: r for r in json.loads(out.stdout)["rows"]}


def mape(res, ids):
    return sum(abs(res[i]["error_pct"]) for i in ids) / len(ids)


def implied():
    """Per quantised MoE row: the per-expert value that zeroes its error (see the docstring)."""
    cleave = ARGS[0] if ARGS else os.path.join(ROOT, "build/dev/cleave")
    csvs = ARGS[1:] or [os.path.join(ROOT, "../shared/validation/public_runs_2025.csv"),
                        os.path.join(ROOT, "../shared/validation/public_runs_2026h1.csv")]
    spec = {}
    for path in csvs:
        with open(path, newline="") as f:
            for r in csv.DictReader(f):
                if is_quantised_moe(r):
                    spec[int(r["row_id"])] = r

    def run(value):
        tmp = tempfile.mkdtemp(prefix="implied-moe-")
        try:
            hw = os.path.join(tmp, "hw")
            shutil.copytree(os.path.join(ROOT, "hwprofiles"), hw)
            cal = os.path.join(hw, "calibration")
            for name in os.listdir(cal):
                path = os.path.join(cal, name)
                text = re.sub(r"quantised_expert_overhead_us = [0-9.]+",
                              "quantised_expert_overhead_us = %g" % value, open(path).read())
                with open(path, "w") as f:
                    f.write(text)
            out = {}
            for path in csvs:
                res = subprocess.run([cleave, "published", path, "--format", "json"],
                                     env=dict(os.environ, CLEAVE_HWPROFILES=hw),
                                     capture_output=True, text=True)
                if res.returncode:
                    sys.exit(res.stderr)
                out.update({r["row_id"]: r for r in json.loads(res.stdout)["rows"]})
            return out
        finally:
            shutil.rmtree(tmp)

    zero, thousand = run(0), run(1000)
    print("# row  profile       mbs  ep local  published  at 0 us  s per 1000 us  implied us")
    for i in sorted(spec):
        if i not in zero:
            continue
        slope = thousand[i]["predicted_s"] - zero[i]["predicted_s"]
        if slope <= 0.0:  # no overlay value reaches the row (a profile with no [moe])
            continue
        r = spec[i]
        local = int(r["num_experts"]) // max(1, int(r["ep"] or 1))
        print("  %4d  %-12s %4s %3s %5d %10.2f %8.2f %14.2f %11.0f" % (
            i, zero[i]["profile"], r["micro_batch_size"], r["ep"], local,
            zero[i]["published_s"], zero[i]["predicted_s"], slope,
            1000.0 * (zero[i]["published_s"] - zero[i]["predicted_s"]) / slope))


def main():
    if IMPLIED:
        implied()
        return
    ids = quantised_moe_rows()
    tmp = tempfile.mkdtemp(prefix="fit-moe-")
    try:
        base = published(tmp, {})
        by_profile = {}
        for i in ids:
            if i in base and base[i].get("in_mape", True):
                by_profile.setdefault(base[i]["profile"], []).append(i)
        for profile, rows in sorted(by_profile.items()):
            if len(rows) < 2:
                print("%s: rows %s  not fitted (one row)" % (profile, rows))
                continue
            curve = {v: published(tmp, {profile: v}) for v in GRID}
            best = min(GRID, key=lambda v: mape(curve[v], rows))
            print("%s: rows %s  best %d us  MAPE %.2f %% (0 us: %.2f %%)" % (
                profile, rows, best, mape(curve[best], rows), mape(curve[0], rows)))
            for i in rows:
                print("  row %d: %+.1f %% at %d us (0 us: %+.1f %%)" % (
                    i, curve[best][i]["error_pct"], best, curve[0][i]["error_pct"]))
            if len(rows) > 1:
                for held in rows:
                    rest = [i for i in rows if i != held]
                    v = min(GRID, key=lambda x: mape(curve[x], rest))
                    print("  leave out %d: others choose %d us; row %d then %+.1f %%" % (
                        held, v, held, curve[v][held]["error_pct"]))
    finally:
        shutil.rmtree(tmp)


if __name__ == "__main__":
    main()

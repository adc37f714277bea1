#!/usr/bin/env python3
"""Write tests/data/public_runs_2024_fp8.csv: the FP8 half of NVIDIA's DGX Cloud recipes.

public_runs_2024.csv holds the BF16 tables of NVIDIA/dgxc-benchmarking v24.11.1 (commit 35a9aec,
NeMo 24.09 / 24.11, DGX H100). Each README there has a second table, FP8 (Transformer Engine
delayed scaling: the recipe's model.fp8=true with its amax_history_len 1024, amax_compute_algo
max), for the same layout on the same GPU counts. This script copies each BF16 row, keeps its
model, layout and recipe, and puts in the FP8 table's step time and MFU from the README:

    scripts/make_dgxc_fp8_csv.py DGXC_CHECKOUT [BF16_CSV] [OUT_CSV]

DGXC_CHECKOUT is a git checkout of NVIDIA/dgxc-benchmarking holding commit 35a9aec; the README is
read at that commit (git show). Row ids are 3000 + the BF16 row's id; source keys gain "_FP8".
"""
import csv
import re
import subprocess
import sys

COMMIT = "35a9aec"


def fp8_table(repo, readme):
    """{gpus: (step_s, mfu_pct)} of the README's FP8 'Expected Performance' table."""
    text = subprocess.run(["git", "-C", repo, "show", f"{COMMIT}:{readme}"],
                          check=True, capture_output=True, text=True).stdout
    lines = text.splitlines()
    for i, line in enumerate(lines):
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if not line.lstrip().startswith("|") or "FP8" not in cells[0]:
            continue
        gpus = []
        for c in cells[1:]:
            m = re.search(r"(\d+)x? H100", c)
            gpus.append(int(m.group(1)) if m else None)
        step, mfu = None, None
        for row in lines[i + 1:i + 14]:
            rc = [c.strip() for c in row.strip().strip("|").split("|")]
            if rc[0].startswith("Training step time"):
                step = rc[1:]
            elif rc[0].startswith("Model flops utilization"):
                mfu = rc[1:]
        out = {}
        for k, g in enumerate(gpus):
            if g is None or step is None or k >= len(step) or not step[k]:
                continue
            s = float(step[k].replace(" ", ""))
            f = float(mfu[k].rstrip("%")) if mfu and k < len(mfu) and mfu[k] else None
            out[g] = (s, f)
        return out
    raise SystemExit(f"{readme}: no FP8 table at {COMMIT}")


def main():
    repo = sys.argv[1]
    src = sys.argv[2] if len(sys.argv) > 2 else "tests/data/public_runs_2024.csv"
    dst = sys.argv[3] if len(sys.argv) > 3 else "tests/data/public_runs_2024_fp8.csv"
    with open(src, newline="") as f:
        rd = csv.DictReader(f)
        fields = rd.fieldnames
        rows = list(rd)
    tables = {}
    out = []
    for r in rows:
        readme = r["source_locator"].split()[0]
        if readme not in tables:
            tables[readme] = fp8_table(repo, readme)
        g = int(r["num_gpus"])
        if g not in tables[readme]:
            raise SystemExit(f"{readme}: FP8 table has no {g}-GPU column")
        step, mfu = tables[readme][g]
        bf16_id = r["row_id"]
        r["row_id"] = str(3000 + int(bf16_id))
        r["source_key"] = r["source_key"] + "_FP8"
        r["source_locator"] = re.sub(r"\(BF16[^)]*\)", "(FP8 table)", r["source_locator"])
        r["peak_tflops_per_gpu"] = "1979"
        r["precision"] = ("fp8 delayed scaling (Transformer Engine; the recipe's model.fp8=true, "
                          "amax_history_len 1024, amax_compute_algo max)")
        r["iteration_time_s"] = f"{step:g}"
        r["mfu_pct"] = f"{mfu:g}" if mfu is not None else ""
        r["tflops_definition"] = r["tflops_definition"].replace("989e12", "1979e12")
        for k in ("tflops_per_gpu", "hfu_pct", "tokens_per_sec_per_gpu", "tokens_per_sec_total",
                  "aggregate_pflops", "iteration_time_s_derived", "mfu_pct_derived",
                  "derivation"):
            r[k] = ""
        r["notes"] = (f"FP8 table of the same README at {COMMIT}, same layout and GPU count as "
                      f"row {bf16_id} of public_runs_2024.csv (the BF16 table). " + r["notes"])
        out.append(r)
    with open(dst, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields, lineterminator="\n")
        w.writeheader()
        w.writerows(out)
    print(f"{dst}: {len(out)} rows")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Predicted vs published step time for the dense rows of public_runs_2025.csv (Megatron-Bridge 25.11).

    scripts/rows_2025.py [CLEAVE] [CSV]

Runs `cleave explain` per row and prints one line per row. Conversion used:
  published iteration_s = iteration_time_s_derived = GBS * seq / (tokens/s/GPU * GPUs)
  (the CSV's own column; the table gives throughput, not step time).
Mapping: GPU column -> profile (DGX-GB300 -> gb300-nvl72, DGX-GB200 -> gb200-nvl72, DGX-B200 ->
dgx-b200, DGX-H100 -> dgx-h100); FP8-CS -> --dtype fp8 --fp8-recipe tensorwise, FP8-MX -> --dtype
mxfp8, BF16 -> bf16; "Megatron FSDP" -> --zero 3, otherwise the distributed optimizer -> --zero 1;
recompute empty -> none (the table does not state it). Rows cleave cannot express are listed with
the reason. Error = predicted / published - 1. load_cluster applies hwprofiles/calibration/<profile>.toml
where one exists: the Blackwell overlays were fitted to these very rows (their files say which).
"""
import csv
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CLEAVE = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build/dev/cleave")
CSV = sys.argv[2] if len(sys.argv) > 2 else os.path.join(ROOT, "../shared/validation/public_runs_2025.csv")

PROFILES = {"GB300": "gb300-nvl72", "GB200": "gb200-nvl72", "B200": "dgx-b200", "H100": "dgx-h100"}
MODELS = {"Llama 3 8B": "llama-3-8b.toml", "Llama 3 70B": "llama-3-70b.toml",
          "Llama 3.1 405B": "llama-3-405b.toml"}


def profile_of(gpu):
    for key in ("GB300", "GB200", "B200", "H100"):
        if gpu.startswith(key):
            return PROFILES[key]
    return None


def precision_args(p):
    if p.startswith("FP8 per-tensor current scaling"):
        return ["--dtype", "fp8", "--fp8-recipe", "tensorwise"]
    if p.startswith("MXFP8"):
        return ["--dtype", "mxfp8"]
    return ["--dtype", "bf16"]


def explain(r):
    model = next((v for k, v in MODELS.items() if r["model"].startswith(k)), None)
    if model is None:
        return None, "no example model"
    args = [CLEAVE, "explain", os.path.join(ROOT, "examples", model), profile_of(r["gpu_type"]),
            "--gpus", r["num_gpus"], "--gbs", r["global_batch_size"], "--seq", r["seq_length"],
            "--tp", r["tp"], "--pp", r["pp"], "--cp", r["cp"], "--mbs", r["micro_batch_size"],
            "--zero", "3" if r["dp_sharding"].startswith("Megatron FSDP") else "1",
            "--format", "json"] + precision_args(r["precision"])
    if int(r["vpp"] or 1) > 1:
        args += ["--vpp", r["vpp"]]
    if r["sequence_parallel"] == "yes":
        args += ["--sp"]
    out = subprocess.run(args, capture_output=True, text=True)
    if out.returncode != 0:
        return None, out.stderr.strip().splitlines()[-1][:90]
    return json.loads(out.stdout), ""


def main():
    rows = [r for r in csv.DictReader(open(CSV)) if not r["num_experts"]]
    print(f"{'row':>5} {'model':<15} {'gpu':<6} {'prec':<7} {'plan':<26} {'pub_s':>7} {'pred_s':>7} "
          f"{'err%':>7} {'pub_TF':>7} {'pred_TF':>7}")
    errs = []
    for r in rows:
        j, why = explain(r)
        plan = f"tp{r['tp']} pp{r['pp']} cp{r['cp']} dp{r['dp']} vpp{r['vpp']} mbs{r['micro_batch_size']}"
        prec = "fp8cs" if "current" in r["precision"] else ("mxfp8" if "MXFP8" in r["precision"] else "bf16")
        pub = float(r["iteration_time_s_derived"])
        name = r["model"].split(" (")[0]
        gpu = r["gpu_type"].split(" ")[0]
        if j is None:
            print(f"{r['row_id']:>5} {name:<15} {gpu:<6} {prec:<7} {plan:<26} {pub:7.3f}  not expressed: {why}")
            continue
        pred = j["iteration_time_s"]
        err = pred / pub - 1.0
        errs.append((r["row_id"], err))
        print(f"{r['row_id']:>5} {name:<15} {gpu:<6} {prec:<7} {plan:<26} {pub:7.3f} {pred:7.3f} "
              f"{100 * err:+7.1f} {float(r['tflops_per_gpu']):7.0f} {j['tflops_per_gpu']:7.0f}")
    if errs:
        mape = 100 * sum(abs(e) for _, e in errs) / len(errs)
        worst = max(errs, key=lambda x: abs(x[1]))
        cal = sorted(f[:-5] for f in os.listdir(os.path.join(ROOT, "hwprofiles", "calibration")))
        print(f"# {len(errs)} rows priced: MAPE {mape:.1f}%, worst row {worst[0]} {100 * worst[1]:+.1f}%; "
              f"calibration overlays applied (fitted constants, hwprofiles/calibration/): {', '.join(cal)}")


if __name__ == "__main__":
    main()

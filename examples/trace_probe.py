#!/usr/bin/env python3
"""trace_probe.py: one Llama 3.1 8B layer's training step under torch.profiler, read by cleave.

Issue 46 item 4: a real Kineto trace of a known shape, from the lent GPU (step 7 of
examples/gpu-check.sh), through `cleave trace` and `cleave explain --trace`, class by class:

  1. one decoder layer of Llama 3.1 8B in plain PyTorch (hidden 4096, 32 heads, 8 KV heads, FFN
     14336, RMSNorm, RoPE, SwiGLU, SDPA; bf16), micro-batch 1 x 4096 tokens, AdamW;
  2. a few warm-up steps (forward, backward, optimizer step), then torch.profiler (CPU + CUDA,
     record_shapes, schedule wait 1 / warmup 1 / active 3) exports a Chrome trace to
     OUT_DIR/llama_layer_trace.json, and a gzipped copy (.json.gz);
  3. `cleave trace` of the .json (trace.txt, trace.json) and `cleave explain
     examples/hf/llama-3-8b.config.json CLUSTER --gpus 1 --gbs 1 --seq 4096 --mbs 1 --tp 1 --pp 1
     --trace <the .json.gz> --trace-scope layers=1 --format json` (explain.json): one layer, not
     a model (Llama 3.1 8B's layer is Llama 3 8B's: only RoPE scaling and context length differ);
  4. OUT_DIR/summary.json and a table: class, measured ms per step, cleave's ms, difference;
     launch gaps, unclassified share. AdamW is measured, not priced (layers=N: fwd + bwd only).

Without CUDA it is a dry run: a scaled-down layer on the CPU, profiled on the CPU only, so
`cleave trace` finds no GPU kernels and exits 2 -- the dry run's expected outcome, recorded.
Without PyTorch: SKIPPED.

    python3 examples/trace_probe.py --out-dir DIR [--cleave CMD] [--cluster auto|NAME]
        [--device auto|cuda|cpu] [--warmup 3] [--analyze TRACE: price an existing trace only]

Exit 0: done, skipped, or the dry run's expected exit 2; 1: a phase failed (summary.json says).
"""
import argparse
import gzip
import json
import os
import shlex
import shutil
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODEL = os.path.join(ROOT, "examples", "hf", "llama-3-8b.config.json")
LLAMA = dict(hidden=4096, heads=32, kv_heads=8, ffn=14336, seq=4096)
TINY = dict(hidden=64, heads=4, kv_heads=2, ffn=128, seq=64)  # the CPU dry run
DEFAULT_CLEAVE = os.path.join(ROOT, "build", "release", "cleave")
SKIP = ("communication", "exposed_communication", "idle", "total")  # explain's sums, not classes


def build(shape, dev, dtype):
    import torch
    import torch.nn.functional as F
    h, nh, nkv, hd = shape["hidden"], shape["heads"], shape["kv_heads"], shape["hidden"] // shape["heads"]

    def rms_norm(x, w):
        if hasattr(F, "rms_norm"):
            return F.rms_norm(x, (h,), w, 1e-5)
        return (x.float() * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + 1e-5)).to(x.dtype) * w

    def rope(x, cos, sin):
        rot = torch.cat((-x[..., hd // 2:], x[..., :hd // 2]), dim=-1)
        return x * cos + rot * sin

    class Layer(torch.nn.Module):
        def __init__(self):
            super().__init__()
            lin = lambda i, o: torch.nn.Linear(i, o, bias=False, device=dev, dtype=dtype)
            self.n1 = torch.nn.Parameter(torch.ones(h, device=dev, dtype=dtype))
            self.n2 = torch.nn.Parameter(torch.ones(h, device=dev, dtype=dtype))
            self.qkv, self.o = lin(h, (nh + 2 * nkv) * hd), lin(nh * hd, h)
            self.fc1, self.fc2 = lin(h, 2 * shape["ffn"]), lin(shape["ffn"], h)

        def forward(self, x, cos, sin):
            b, t, _ = x.shape
            q, k, v = self.qkv(rms_norm(x, self.n1)).split([nh * hd, nkv * hd, nkv * hd], dim=-1)
            q = rope(q.view(b, t, nh, hd).transpose(1, 2), cos, sin)
            k = rope(k.view(b, t, nkv, hd).transpose(1, 2), cos, sin)
            v = v.view(b, t, nkv, hd).transpose(1, 2)
            try:
                a = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=nh > nkv)
            except (TypeError, RuntimeError):  # torch < 2.5: no enable_gqa; or no GQA kernel
                r = nh // nkv
                a = F.scaled_dot_product_attention(q, k.repeat_interleave(r, 1),
                                                   v.repeat_interleave(r, 1), is_causal=True)
            x = x + self.o(a.transpose(1, 2).reshape(b, t, nh * hd))
            g, u = self.fc1(rms_norm(x, self.n2)).chunk(2, dim=-1)
            return x + self.fc2(F.silu(g) * u)

    torch.manual_seed(0)
    layer = Layer()
    for p in layer.parameters():
        if p.dim() > 1:
            torch.nn.init.normal_(p, std=0.02)
    pos = torch.arange(shape["seq"], device=dev, dtype=torch.float32)
    inv = 1.0 / (500000.0 ** (torch.arange(0, hd, 2, device=dev, dtype=torch.float32) / hd))
    ang = torch.outer(pos, inv)
    cos, sin = (torch.cat((f, f), -1).to(dtype) for f in (ang.cos(), ang.sin()))
    x0 = torch.randn(1, shape["seq"], h, device=dev, dtype=dtype, requires_grad=True)
    gout = torch.randn(1, shape["seq"], h, device=dev, dtype=dtype)
    try:
        opt = torch.optim.AdamW(layer.parameters(), lr=1e-4, fused=dev.type == "cuda")
    except (TypeError, RuntimeError):  # an older torch: no fused AdamW
        opt = torch.optim.AdamW(layer.parameters(), lr=1e-4)

    def step():
        layer(x0, cos, sin).backward(gout)
        opt.step()
        opt.zero_grad(set_to_none=True)
        x0.grad = None
    return step


def gzip_copy(path):
    with open(path, "rb") as src, gzip.open(path + ".gz", "wb") as dst:
        shutil.copyfileobj(src, dst)


def run(cmd, out_path):
    """Run cmd; stdout to out_path; (exit status, stderr's tail)."""
    try:
        with open(out_path, "w") as f:
            p = subprocess.run(cmd, stdout=f, stderr=subprocess.PIPE, text=True)
    except OSError as e:  # no cleave there
        return 127, repr(e)
    return p.returncode, p.stderr.strip()[-600:]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out-dir", required=True)
    ap.add_argument("--device", default="auto", choices=("auto", "cuda", "cpu"))
    ap.add_argument("--cluster", default="auto", help="auto: dgx-h200 on an H200, else dgx-h100")
    ap.add_argument("--cleave", default="", help="cleave's command line, split as a shell would "
                    "(an env prefix may lead); default build/release/cleave, else PATH")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--analyze", metavar="TRACE", help="skip the run: price an existing trace "
                    "of this layer (a GPU's; copied to OUT_DIR)")
    a = ap.parse_args()
    os.makedirs(a.out_dir, exist_ok=True)
    summary_path = os.path.join(a.out_dir, "summary.json")
    trace_json = os.path.join(a.out_dir, "llama_layer_trace.json")
    cleave = shlex.split(a.cleave) if a.cleave else [DEFAULT_CLEAVE if os.access(
        DEFAULT_CLEAVE, os.X_OK) else (shutil.which("cleave") or "cleave")]
    if a.analyze:  # an existing GPU trace of this layer: no PyTorch needed
        if os.path.abspath(a.analyze) != os.path.abspath(trace_json):
            shutil.copyfile(a.analyze, trace_json)
        gzip_copy(trace_json)
        res = {"device": "trace " + a.analyze, "dry_run": False, "shape": LLAMA,
               "cluster": "dgx-h100" if a.cluster == "auto" else a.cluster}
        return report(res, cleave, trace_json, True, summary_path)
    try:
        import torch
    except ImportError:
        print("trace_probe: SKIPPED, PyTorch is not installed here")
        json.dump({"skipped": "no PyTorch"}, open(summary_path, "w"))
        return 0
    cuda = torch.cuda.is_available() and a.device != "cpu"
    if a.device == "cuda" and not cuda:
        print("trace_probe: no CUDA device: the CPU dry run instead")
    dev = torch.device("cuda" if cuda else "cpu")
    gpu = torch.cuda.get_device_name(dev) if cuda else "cpu"
    cluster = a.cluster
    if cluster == "auto":
        cluster = "dgx-h200" if "H200" in gpu.upper() else "dgx-h100"
    shape = LLAMA if cuda else TINY
    res = {"device": gpu, "torch": torch.__version__, "dry_run": not cuda, "shape": shape,
           "cluster": cluster}
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    try:
        step = build(shape, dev, torch.bfloat16 if cuda else torch.float32)
        for _ in range(a.warmup):
            step()
        sync()
        acts = [torch.profiler.ProfilerActivity.CPU] + ([torch.profiler.ProfilerActivity.CUDA] if cuda else [])
        with torch.profiler.profile(
                activities=acts, record_shapes=True,
                schedule=torch.profiler.schedule(wait=1, warmup=1, active=3, repeat=1),
                on_trace_ready=lambda prof: prof.export_chrome_trace(trace_json)) as prof:
            for i in range(5):
                step()
                if i == 4:
                    sync()  # the last active step's kernels done before the export
                prof.step()
        gzip_copy(trace_json)
        t0 = time.perf_counter()
        for _ in range(3):
            step()
        sync()
        res["step_wall_ms"] = (time.perf_counter() - t0) / 3 * 1e3
    except Exception as e:
        res["error"] = f"profiling: {e!r}"
        json.dump(res, open(summary_path, "w"), indent=1)
        print(f"# trace probe FAILED: {e!r}")
        return 1
    return report(res, cleave, trace_json, cuda, summary_path)


def report(res, cleave, trace_json, cuda, summary_path):
    """cleave trace + explain on the trace, the table, summary.json; the exit status."""
    out_dir, cluster, shape, gpu = os.path.dirname(trace_json), res["cluster"], res["shape"], res["device"]
    res["model"] = os.path.relpath(MODEL, ROOT)
    # cleave trace (table and JSON) on the .json; cleave explain --trace on the .json.gz.
    rc_t, err_t = run(cleave + ["trace", trace_json], os.path.join(out_dir, "trace.txt"))
    rc_j, err_j = run(cleave + ["trace", trace_json, "--format", "json"],
                      os.path.join(out_dir, "trace.json"))
    explain = cleave + ["explain", MODEL, cluster, "--gpus", "1", "--gbs", "1", "--seq",
                        str(LLAMA["seq"]), "--mbs", "1", "--tp", "1", "--pp", "1", "--trace",
                        trace_json + ".gz", "--trace-scope", "layers=1", "--format", "json"]
    rc_e, err_e = run(explain, os.path.join(out_dir, "explain.json"))
    res["cleave"] = {"trace_exit": [rc_t, rc_j], "explain_exit": rc_e, "stderr": err_j or err_t,
                     "explain_stderr": err_e, "explain_command": shlex.join(explain)}
    if not cuda:
        ok = rc_j == 2 and "no GPU kernel" in err_j
        res["dry_run_expected"] = ("cleave trace exits 2: a CPU-only trace has no GPU kernels; "
                                   + ("as expected" if ok else "NOT as expected"))
        status = 0 if rc_j in (0, 2) and rc_e in (0, 2) else 1
        json.dump(res, open(summary_path, "w"), indent=1)
        print(f"cleave trace: exit {rc_j}: {err_j.splitlines()[-1] if err_j else ''}")
        print(f"# trace probe (dry run, cpu, {shape['hidden']} wide): cleave trace exit {rc_j}, "
              f"explain exit {rc_e} ({'expected: no GPU kernels' if ok else 'UNEXPECTED'})")
        return status
    if rc_j != 0 or rc_e != 0:
        res["error"] = f"cleave trace exit {rc_j}, explain exit {rc_e}: {err_j or err_e}"
        json.dump(res, open(summary_path, "w"), indent=1)
        print(f"# trace probe FAILED: {res['error']}")
        return 1
    tr = json.load(open(os.path.join(out_dir, "trace.json")))
    ex = json.load(open(os.path.join(out_dir, "explain.json")))["trace"]
    steps = max(1, len(tr.get("steps") or []))
    # Measured per step from the trace's classes (explain's layers=N figures cover all of it);
    # "compute" less the optimizer's kernels, as explain prices forward + backward alone.
    meas = {c: v / steps for c, v in tr["by_class_ms"].items()}
    meas["compute"] = (tr["compute_kernel_ms"] / steps - meas.get("optimizer", 0.0))
    pred = ex["predicted_ms"]
    rows = []
    for c in sorted(set(meas) | set(k for k, v in pred.items() if v is not None),
                    key=lambda c: (c == "compute", -(meas.get(c) or 0.0))):
        m, p = meas.get(c, 0.0), pred.get(c)
        if c in SKIP or (not m and not p):
            continue
        rows.append({"class": c, "measured_ms": m, "cleave_ms": p,
                     "diff_ms": None if p is None else p - m,
                     "diff_pct": None if p is None or not m else 100.0 * (p - m) / m})
    res.update({"profiled_steps": steps, "gpu_in_trace": tr.get("gpu"), "rows": rows,
                "explain_trace": ex, "unclassified_share": tr["unclassified_ms"] / (
                    tr["compute_kernel_ms"] or float("nan"))})
    for k in ("span_ms", "launch_gaps", "launch_gaps_ms", "waits_ms", "unclassified_ms"):
        res[k + "_per_step"] = tr[k] / steps
    json.dump(res, open(summary_path, "w"), indent=1)
    print(f"Llama 3.1 8B layer, 1 x {shape['seq']} tokens, bf16, AdamW, on {gpu}; cleave on "
          f"{cluster} (--trace-scope layers=1); {steps} profiled steps, per step:")
    print(f"{'class':<14} {'measured_ms':>12} {'cleave_ms':>10} {'diff_ms':>9} {'diff_%':>8}")
    for r in rows:
        f = lambda v, w, p=3: f"{v:{w}.{p}f}" if v is not None else f"{'-':>{w}}"
        print(f"{r['class']:<14} {f(r['measured_ms'], 12)} {f(r['cleave_ms'], 10)} "
              f"{f(r['diff_ms'], 9)} {f(r['diff_pct'], 8, 1)}")
    wall = f" (wall {res['step_wall_ms']:.3f} ms unprofiled)" if "step_wall_ms" in res else ""
    print(f"span {res['span_ms_per_step']:.3f} ms/step{wall}; "
          f"launch gaps {res['launch_gaps_per_step']:.0f} = {res['launch_gaps_ms_per_step']:.3f} ms/step, "
          f"waits {res['waits_ms_per_step']:.3f} ms/step; unclassified "
          f"{100 * res['unclassified_share']:.1f} % of kernel time")
    cells = [f"{r['class']} {r['measured_ms']:.2f}/{r['cleave_ms']:.2f}" for r in rows
             if r["class"] in ("gemm", "attention", "compute") and r["cleave_ms"] is not None]
    print(f"# trace probe on {gpu} ({cluster}), measured/cleave ms per step: " + ", ".join(cells)
          + f"; launch gaps {res['launch_gaps_ms_per_step']:.2f} ms, unclassified "
          f"{100 * res['unclassified_share']:.1f} %")
    return 0


if __name__ == "__main__":
    sys.exit(main())

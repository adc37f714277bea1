#!/usr/bin/env python3
"""layer_probe.py: where one GPU's time goes in a Llama-shaped layer stack, burst and sustained.

Issue 25 asks what an H100 holds in a training loop, by term. cleave prices the DGX Cloud
recipes 10-13 % fast and the published numbers cannot say which kernels hold the missing time
(docs/costmodel.md section 9, "The FP8 twins"; shared/reference/sustained-compute.md U1, U2).
This probe measures it on whatever GPU it runs on:

  1. burst: a few forward + backward passes of L decoder layers (RMSNorm, QKV, RoPE, causal
     attention, output projection, RMSNorm, SwiGLU MLP; bf16) after a short warm-up;
  2. sustained: the same step back to back for --seconds, the SM clock, memory clock, power and
     temperature sampled by nvidia-smi every 500 ms;
  3. a profile of a few steps at the end (sustained state): kernel time by kind (GEMM, attention,
     other = element-wise / norm / RoPE / copies) and the idle time between kernels;
  4. on a GPU, the same step captured in CUDA graphs (torch.cuda.make_graphed_callables): what
     the gaps between eager kernel launches cost;
  5. with --cleave, cleave's price of the same layers (`cleave explain --format json`,
     stages[0].by_kind_s) on --cluster, kind by kind.

It is PyTorch eager (torch's SDPA, not Transformer Engine's cuDNN attention; bf16 weights and
grads, no optimizer), so it measures the GPU under a training-like load, not NeMo's kernels.

    python3 examples/layer_probe.py --out probe.json [--cleave build/release/cleave]
        [--cluster dgx-h100] [--seconds 60] [--layers 4] [--hidden 4096] [--ffn 14336]
        [--heads 32] [--kv-heads 8] [--seq 4096] [--mbs 1] [--device cuda]

The defaults are Llama 3.1 8B's layer at the DGX Cloud recipe's 4096 tokens per rank (seq 8192,
CP 2), here as one causal sequence of 4096. Exit 0 with the JSON written; 2 on bad arguments;
1 if a phase failed (the JSON says which).
"""
import argparse
import json
import math
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import threading
import time

import torch
import torch.nn.functional as F


def rms_norm(x, w, eps=1e-5):
    if hasattr(F, "rms_norm"):
        return F.rms_norm(x, (x.shape[-1],), w, eps)
    v = x.float().pow(2).mean(-1, keepdim=True)
    return (x.float() * torch.rsqrt(v + eps)).to(x.dtype) * w


def rope(x, cos, sin):
    half = x.shape[-1] // 2
    rot = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
    return x * cos + rot * sin


def attention(q, k, v):
    """Causal attention, [b, heads, t, d]; k, v may have fewer heads (GQA)."""
    rep = q.shape[1] // k.shape[1]
    sdpa = getattr(F, "scaled_dot_product_attention", None)
    if sdpa is not None:
        try:
            return sdpa(q, k, v, is_causal=True, enable_gqa=rep > 1)
        except TypeError:  # torch < 2.5: no enable_gqa
            pass
    if rep > 1:
        k = k.repeat_interleave(rep, dim=1)
        v = v.repeat_interleave(rep, dim=1)
    if sdpa is not None:
        return sdpa(q, k, v, is_causal=True)
    t = q.shape[2]
    s = (q @ k.transpose(-1, -2)) / math.sqrt(q.shape[-1])
    mask = torch.ones(t, t, dtype=torch.bool, device=q.device).triu(1)
    return torch.softmax(s.masked_fill(mask, float("-inf")).float(), -1).to(q.dtype) @ v


class Layer(torch.nn.Module):
    def __init__(self, a, dtype, dev):
        super().__init__()
        self.heads, self.kv, self.hd = a.heads, a.kv_heads, a.hidden // a.heads
        lin = lambda i, o: torch.nn.Linear(i, o, bias=False, device=dev, dtype=dtype)
        self.n1 = torch.nn.Parameter(torch.ones(a.hidden, device=dev, dtype=dtype))
        self.n2 = torch.nn.Parameter(torch.ones(a.hidden, device=dev, dtype=dtype))
        self.qkv = lin(a.hidden, (a.heads + 2 * a.kv_heads) * self.hd)
        self.o = lin(a.heads * self.hd, a.hidden)
        self.fc1 = lin(a.hidden, 2 * a.ffn)
        self.fc2 = lin(a.ffn, a.hidden)

    def forward(self, x, cos, sin):
        b, t, _ = x.shape
        q, k, v = self.qkv(rms_norm(x, self.n1)).split(
            [self.heads * self.hd, self.kv * self.hd, self.kv * self.hd], dim=-1)
        q = rope(q.view(b, t, self.heads, self.hd).transpose(1, 2), cos, sin)
        k = rope(k.view(b, t, self.kv, self.hd).transpose(1, 2), cos, sin)
        v = v.view(b, t, self.kv, self.hd).transpose(1, 2)
        a = attention(q, k, v).transpose(1, 2).reshape(b, t, self.heads * self.hd)
        x = x + self.o(a)
        g, u = self.fc1(rms_norm(x, self.n2)).chunk(2, dim=-1)
        return x + self.fc2(F.silu(g) * u)


def graphed_step_s(layers, x0, cos, sin, gout, sync, iters=10):
    """Median step time of the layer stack as one graphed callable (fwd + bwd)."""

    class Stack(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = layers

        def forward(self, x, c, s):
            for layer in self.layers:
                x = layer(x, c, s)
            return x

    graphed = torch.cuda.make_graphed_callables(Stack(), (x0, cos, sin))
    times = []
    for i in range(iters + 3):
        start = time.perf_counter()
        graphed(x0, cos, sin).backward(gout)
        sync()
        if i >= 3:
            times.append(time.perf_counter() - start)
        for q in layers.parameters():
            q.grad = None
        x0.grad = None
    return statistics.median(times)


def flops(a):
    """Per step (fwd + bwd): linear-layer GEMMs 3 x 2 b t (weights); attention as FlashAttention
    counts it, fwd 4 b heads t^2 d / 2 (causal), bwd 2.5 x fwd (Dao 2023, Sec. 4.1)."""
    hd = a.hidden // a.heads
    weights = (a.hidden * (a.heads + 2 * a.kv_heads) * hd + a.heads * hd * a.hidden
               + a.hidden * 2 * a.ffn + a.ffn * a.hidden)
    tokens = a.mbs * a.seq
    gemm = 3 * 2 * tokens * weights * a.layers
    attn = 3.5 * 4 * a.mbs * a.heads * a.seq * a.seq * hd / 2 * a.layers
    return gemm, attn


class Sampler:
    """nvidia-smi every 500 ms: (t, sm MHz, mem MHz, W, C) rows; empty where there is none."""

    def __init__(self, index):
        self.rows, self.proc = [], None
        cmd = ["nvidia-smi", "-i", str(index), "-lms", "500", "--format=csv,noheader,nounits",
               "--query-gpu=clocks.sm,clocks.mem,power.draw,temperature.gpu"]
        try:
            self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                         text=True)
        except OSError:
            return
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            try:
                vals = [float(v) for v in line.split(",")]
            except ValueError:
                continue
            if len(vals) == 4:
                self.rows.append((time.time(), *vals))

    def between(self, t0, t1):
        return [r for r in self.rows if t0 <= r[0] <= t1]

    def stop(self):
        if self.proc is not None:
            self.proc.terminate()


def summary(rows):
    if not rows:
        return None
    col = lambda i: statistics.median(r[i] for r in rows)
    return {"samples": len(rows), "sm_mhz": col(1), "mem_mhz": col(2), "power_w": col(3),
            "temp_c": col(4), "sm_mhz_min": min(r[1] for r in rows)}


def kind_of(name):
    n = name.lower()
    if any(s in n for s in ("flash", "fmha", "attention", "sdpa", "mha")):
        return "attention"
    if any(s in n for s in ("gemm", "xmma", "cutlass", "nvjet", "cublas", "wgmma")) or n in (
            "aten::mm", "aten::addmm", "aten::bmm"):  # the last three: CPU dry run
        return "gemm"
    return "other"


def profile_kinds(step, iters, use_cuda):
    """Kernel time per step by kind (s) and the step's wall time, over `iters` profiled steps."""
    acts = [torch.profiler.ProfilerActivity.CPU]
    if use_cuda:
        acts.append(torch.profiler.ProfilerActivity.CUDA)
    sync = torch.cuda.synchronize if use_cuda else (lambda: None)
    sync()
    with torch.profiler.profile(activities=acts) as prof:
        t0 = time.perf_counter()
        for _ in range(iters):
            step()
        sync()
        wall = (time.perf_counter() - t0) / iters
    kinds = {"gemm": 0.0, "attention": 0.0, "other": 0.0}
    for e in prof.key_averages():
        if use_cuda:
            if "cuda" not in str(getattr(e, "device_type", "")).lower():
                continue
            us = getattr(e, "self_device_time_total", None)
            if us is None:
                us = getattr(e, "self_cuda_time_total", 0.0)
        else:  # the dry run: each op's self time on the CPU stands in for its kernels
            us = e.self_cpu_time_total
        kinds[kind_of(e.key)] += us * 1e-6 / iters
    busy = sum(kinds.values())
    return kinds, wall, max(0.0, wall - busy)


def cleave_price(a, cleave, cluster):
    """cleave's stages[0].by_kind_s for the same layers (vocab 128: no output layer to speak of)."""
    toml = (f'[model]\nname = "layer-probe"\narch = "llama"\nlayers = {a.layers}\n'
            f"hidden = {a.hidden}\nheads = {a.heads}\nkv_heads = {a.kv_heads}\n"
            f"ffn_hidden = {a.ffn}\nvocab = 128\nseq_len = {a.seq}\n")
    with tempfile.NamedTemporaryFile("w", suffix=".toml", delete=False) as f:
        f.write(toml)
    try:
        out = subprocess.run(shlex.split(cleave) + ["explain", f.name, cluster, "--gpus", "1", "--gbs",
                              str(a.mbs), "--mbs", str(a.mbs), "--seq", str(a.seq),
                              "--format", "json"], check=True, capture_output=True, text=True)
    finally:
        os.unlink(f.name)
    return json.loads(out.stdout)["stages"][0]["by_kind_s"]


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True)
    p.add_argument("--device", default="cuda")
    p.add_argument("--seconds", type=float, default=60.0)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--hidden", type=int, default=4096)
    p.add_argument("--ffn", type=int, default=14336)
    p.add_argument("--heads", type=int, default=32)
    p.add_argument("--kv-heads", type=int, default=8)
    p.add_argument("--seq", type=int, default=4096)
    p.add_argument("--mbs", type=int, default=1)
    p.add_argument("--profile-iters", type=int, default=5)
    p.add_argument("--cleave", default="",
                   help="cleave's command line, split as a shell would (an env prefix may lead)")
    p.add_argument("--cluster", default="dgx-h100")
    a = p.parse_args()
    if a.hidden % a.heads or a.heads % a.kv_heads or (a.hidden // a.heads) % 2:
        p.error("hidden / heads must be an even head dim and heads a multiple of kv-heads")
    use_cuda = a.device.startswith("cuda")
    if use_cuda and not torch.cuda.is_available():
        print("layer_probe: SKIPPED, no CUDA device", file=sys.stderr)
        json.dump({"skipped": "no CUDA device"}, open(a.out, "w"))
        return 0
    dev = torch.device(a.device)
    dtype = torch.bfloat16 if use_cuda else torch.float32
    torch.manual_seed(0)
    layers = torch.nn.ModuleList(Layer(a, dtype, dev) for _ in range(a.layers))
    for m in layers.parameters():
        torch.nn.init.normal_(m, std=0.02) if m.dim() > 1 else None
    hd = a.hidden // a.heads
    pos = torch.arange(a.seq, device=dev, dtype=torch.float32)
    inv = 1.0 / (10000 ** (torch.arange(0, hd, 2, device=dev, dtype=torch.float32) / hd))
    ang = torch.outer(pos, inv)
    cos = torch.cat((ang.cos(), ang.cos()), -1).to(dtype)
    sin = torch.cat((ang.sin(), ang.sin()), -1).to(dtype)
    x0 = torch.randn(a.mbs, a.seq, a.hidden, device=dev, dtype=dtype, requires_grad=True)
    gout = torch.randn(a.mbs, a.seq, a.hidden, device=dev, dtype=dtype)

    def step():
        x = x0
        for layer in layers:
            x = layer(x, cos, sin)
        x.backward(gout)
        for q in layers.parameters():
            q.grad = None
        x0.grad = None

    result = {"device": torch.cuda.get_device_name(dev) if use_cuda else "cpu",
              "torch": torch.__version__, "args": vars(a)}
    gemm_flop, attn_flop = flops(a)
    result["flop_per_step"] = {"gemm": gemm_flop, "attention": attn_flop}
    sampler = Sampler(dev.index or 0) if use_cuda else None
    status = 0
    sync = torch.cuda.synchronize if use_cuda else (lambda: None)
    try:
        for _ in range(3):
            step()
        sync()
        t0 = time.time()
        burst = []
        for _ in range(10):
            s = time.perf_counter()
            step()
            sync()
            burst.append(time.perf_counter() - s)
        result["burst"] = {"step_s": statistics.median(burst),
                           "clocks": summary(sampler.between(t0, time.time())) if sampler else None}
        # Sustained: back to back, one sync per second to read the time.
        t_start, times = time.time(), []
        while time.time() - t_start < a.seconds:
            s, n = time.perf_counter(), 0
            while time.perf_counter() - s < 1.0:
                step()
                n += 1
            sync()
            times.append((time.perf_counter() - s) / n)
        tail = times[len(times) * 3 // 4:] or times
        result["sustained"] = {
            "step_s": statistics.median(tail), "seconds": a.seconds,
            "per_second_step_s": times,
            "clocks": summary(sampler.between(t_start + 0.75 * a.seconds, time.time()))
            if sampler else None}
        result["sustained_over_burst"] = result["sustained"]["step_s"] / result["burst"]["step_s"]
    except Exception as e:  # the JSON says which phase failed
        result["error"] = f"timing: {e!r}"
        status = 1
    try:
        kinds, wall, idle = profile_kinds(step, a.profile_iters, use_cuda)
        result["profile"] = {"kinds_s": kinds, "step_s": wall, "idle_s": idle,
                             "gemm_tflops": gemm_flop / kinds["gemm"] / 1e12 if kinds["gemm"] else None,
                             "attention_tflops": attn_flop / kinds["attention"] / 1e12
                             if kinds["attention"] else None}
    except Exception as e:
        result["error"] = result.get("error", "") + f" profile: {e!r}"
        status = 1
    if use_cuda:
        # The same step captured in CUDA graphs (torch.cuda.make_graphed_callables, forward and
        # backward): what launch gaps between kernels cost in eager mode. Optional: a failure is
        # recorded, not fatal.
        try:
            result["graphed"] = {"step_s": graphed_step_s(layers, x0, cos, sin, gout, sync)}
            if result.get("burst"):
                result["graphed"]["over_burst"] = (result["graphed"]["step_s"]
                                                   / result["burst"]["step_s"])
        except Exception as e:
            result["graphed"] = {"error": repr(e)}
    if sampler:
        sampler.stop()
    if a.cleave:
        try:
            result["cleave"] = {"cluster": a.cluster,
                                "by_kind_s": cleave_price(a, a.cleave, a.cluster)}
        except Exception as e:
            result["error"] = result.get("error", "") + f" cleave: {e!r}"
            status = 1
    with open(a.out, "w") as f:
        json.dump(result, f, indent=1)
    pr, cl = result.get("profile"), result.get("cleave")
    if pr:
        line = (f"# layer probe on {result['device']}: step burst "
                f"{1e3 * result.get('burst', {}).get('step_s', float('nan')):.2f} ms, sustained "
                f"{1e3 * result.get('sustained', {}).get('step_s', float('nan')):.2f} ms; "
                f"profiled gemm {1e3 * pr['kinds_s']['gemm']:.2f} / attention "
                f"{1e3 * pr['kinds_s']['attention']:.2f} / other {1e3 * pr['kinds_s']['other']:.2f}"
                f" / idle {1e3 * pr['idle_s']:.2f} ms")
        if cl:
            k = cl["by_kind_s"]
            line += (f"; cleave ({cl['cluster']}) gemm {1e3 * k['gemm']:.2f} / attention "
                     f"{1e3 * k['attention']:.2f} / memory {1e3 * k['memory_bound']:.2f} ms")
        if (result.get("graphed") or {}).get("step_s"):
            line += f"; CUDA-graphed step {1e3 * result['graphed']['step_s']:.2f} ms"
        clk = (result.get("sustained") or {}).get("clocks")
        if clk:
            line += f"; sustained SM {clk['sm_mhz']:.0f} MHz at {clk['power_w']:.0f} W"
        print(line)
    return status


if __name__ == "__main__":
    sys.exit(main())

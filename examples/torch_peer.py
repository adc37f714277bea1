#!/usr/bin/env python3
"""The PyTorch eager peer of examples/gpu-check.sh: the same GPT as a cleave model TOML (learned
positions, pre-LayerNorm blocks with biases, tanh-GeLU MLP, output layer tied to the embedding
as the model file says), one training step of --gbs
sequences in micro-batches of --mbs with bf16 autocast (fp32 master weights, fp32 AdamW) and
torch.nn.functional.scaled_dot_product_attention (causal). Prints and writes the median step time.
"""
import argparse
import json
import statistics
import sys
import time

import torch
import torch.nn.functional as F


def load_model(path):
    try:
        import tomllib
        with open(path, "rb") as f:
            return tomllib.load(f)["model"]
    except ModuleNotFoundError:  # Python < 3.11: the flat [model] table cleave's examples use
        m = {}
        for line in open(path):
            line = line.split("#", 1)[0].strip()
            if "=" in line:
                k, v = (x.strip() for x in line.split("=", 1))
                m[k] = v.strip('"') if v.startswith('"') else int(v)
        return m


class Block(torch.nn.Module):
    def __init__(self, h, heads, ffn):
        super().__init__()
        self.heads = heads
        self.ln1 = torch.nn.LayerNorm(h)
        self.qkv = torch.nn.Linear(h, 3 * h)
        self.proj = torch.nn.Linear(h, h)
        self.ln2 = torch.nn.LayerNorm(h)
        self.fc1 = torch.nn.Linear(h, ffn)
        self.fc2 = torch.nn.Linear(ffn, h)

    def forward(self, x):
        b, s, h = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(h, dim=-1)
        q, k, v = (t.view(b, s, self.heads, h // self.heads).transpose(1, 2) for t in (q, k, v))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(b, s, h))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x)), approximate="tanh"))


class Gpt(torch.nn.Module):
    def __init__(self, m, seq):
        super().__init__()
        h = m["hidden"]
        self.tok = torch.nn.Embedding(m["vocab"], h)
        self.pos = torch.nn.Embedding(seq, h)
        self.blocks = torch.nn.ModuleList(
            Block(h, m["heads"], m["ffn_hidden"]) for _ in range(m["layers"]))
        self.ln = torch.nn.LayerNorm(h)
        self.out = torch.nn.Linear(h, m["vocab"], bias=False)
        if m.get("tied_embeddings", True):
            self.out.weight = self.tok.weight

    def forward(self, ids):
        x = self.tok(ids) + self.pos(torch.arange(ids.shape[1], device=ids.device))
        for blk in self.blocks:
            x = blk(x)
        return self.out(self.ln(x))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--gbs", type=int, default=8)
    ap.add_argument("--mbs", type=int, default=2)
    ap.add_argument("--seq", type=int, default=0)
    ap.add_argument("--iters", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    m = load_model(a.model)
    seq = a.seq or m["seq_len"]
    dev = torch.device(a.device)
    torch.manual_seed(1234)
    model = Gpt(m, seq).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, betas=(0.9, 0.95), eps=1e-8)
    ids = torch.randint(0, m["vocab"], (a.gbs, seq + 1), device=dev)
    dtype = torch.bfloat16 if dev.type == "cuda" else torch.float32
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    times, losses = [], []
    for it in range(a.warmup + a.iters):
        sync()
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        total = 0.0
        for i in range(0, a.gbs, a.mbs):
            x, y = ids[i:i + a.mbs, :-1], ids[i:i + a.mbs, 1:]
            with torch.autocast(dev.type, dtype=dtype, enabled=dev.type == "cuda"):
                logits = model(x)
            loss = F.cross_entropy(logits.float().view(-1, logits.shape[-1]), y.reshape(-1))
            (loss * a.mbs / a.gbs).backward()
            total += loss.item() * a.mbs / a.gbs
        opt.step()
        sync()
        if it >= a.warmup:
            times.append(time.perf_counter() - t0)
        losses.append(total)
    params = sum(p.numel() for p in model.parameters())
    peak = torch.cuda.max_memory_allocated() / 2**30 if dev.type == "cuda" else 0.0
    r = {"step_time_s": statistics.median(times), "step_times_s": times, "losses": losses,
         "params": params, "peak_memory_gib": peak, "device": str(dev), "gbs": a.gbs,
         "mbs": a.mbs, "seq": seq, "torch": torch.__version__}
    json.dump(r, open(a.out, "w"), indent=2)
    print(f"PyTorch eager {params/1e9:.2f}B params, gbs {a.gbs} mbs {a.mbs} seq {seq}: "
          f"step {r['step_time_s']*1e3:.2f} ms (median of {len(times)}), peak {peak:.1f} GiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Per-local-expert fixed cost of a grouped expert GEMM loop, measured on one GPU (a device check).

    python3 examples/moe_expert_cost.py [OUT.json]

cleave prices quantised expert GEMMs with a fixed cost per local expert per MoE layer per
micro-batch, fitted to published runs (hwprofiles/calibration/*.toml, [moe]
quantised_expert_overhead_us; docs/costmodel.md section 4.2) but never measured. This script
measures the floor of that mechanism in plain PyTorch: the same tokens (T x top-k rows, hidden h,
expert width f) split over E = 4, 8, 16, 32 local experts, each expert's slice quantised on its own
(fp8 e4m3, per-tensor current scaling: amax, scale, cast) and multiplied by its own GEMM
(torch._scaled_mm; weights quantised once), fc1 then fc2, as Transformer Engine's grouped GEMM loops over experts; and the
same in BF16 (torch.mm). The FLOPs do not change with E, so the slope of time over E is the fixed
cost per expert (one forward pass: 2 quantise + 2 GEMM launches per expert; a backward pass has
about twice as many). It is a floor: Transformer Engine adds its own Python per expert, and the
host waits Megatron-Core's dispatcher adds are not here. Needs CUDA and PyTorch >= 2.1 (fp8 on
sm89+); prints JSON and writes it to OUT.json when given.
"""
import json
import sys
import time

import torch

T, K, H, F = 4096, 8, 2048, 768  # Qwen3-30B-A3B's layer at one 4096-token micro-batch
EXPERTS = [4, 8, 16, 32]
REPEAT = 20


def quantise(x):
    amax = x.abs().amax().float().clamp(min=1e-12)
    scale = 448.0 / amax
    return (x.float() * scale).to(torch.float8_e4m3fn), scale.reciprocal()


def pass_fp8(xs, w1s, w2s):
    # Weights quantised once, as Transformer Engine caches them over a step's micro-batches.
    for x, (q1, s1), (qw2, sw2) in zip(xs, w1s, w2s):
        q, s = quantise(x)
        y = torch._scaled_mm(q, q1.t(), scale_a=s, scale_b=s1, out_dtype=torch.bfloat16)
        y = y[0] if isinstance(y, tuple) else y  # torch < 2.4 returned (out, amax)
        q2, s2 = quantise(y)
        torch._scaled_mm(q2, qw2.t(), scale_a=s2, scale_b=sw2, out_dtype=torch.bfloat16)


def pass_bf16(xs, w1s, w2s):
    for x, w1, w2 in zip(xs, w1s, w2s):
        torch.mm(torch.mm(x, w1.t()), w2.t())


def timed(fn, *args):
    for _ in range(3):
        fn(*args)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(REPEAT):
        fn(*args)
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) / REPEAT


def slope(xs, ys):
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)


def main():
    if not torch.cuda.is_available():
        print("moe_expert_cost.py: no CUDA device", file=sys.stderr)
        return 77
    dev = torch.device("cuda")
    rows = T * K
    out = {"device": torch.cuda.get_device_name(), "torch": torch.__version__,
           "tokens": T, "top_k": K, "hidden": H, "expert_ffn": F, "repeat": REPEAT, "runs": []}
    for kind, fn in (("bf16", pass_bf16), ("fp8_tensorwise", pass_fp8)):
        times = []
        for e in EXPERTS:
            m = rows // e
            xs = [torch.randn(m, H, device=dev, dtype=torch.bfloat16) for _ in range(e)]
            w1s = [torch.randn(F, H, device=dev, dtype=torch.bfloat16) * 0.02 for _ in range(e)]
            w2s = [torch.randn(H, F, device=dev, dtype=torch.bfloat16) * 0.02 for _ in range(e)]
            try:
                if kind != "bf16":
                    w1s = [quantise(w) for w in w1s]
                    w2s = [quantise(w) for w in w2s]
                t = timed(fn, xs, w1s, w2s)
            except (RuntimeError, AttributeError) as err:  # no fp8 path on this GPU / torch
                out["runs"].append({"kind": kind, "experts": e, "error": str(err)[:200]})
                break
            times.append((e, t))
            out["runs"].append({"kind": kind, "experts": e, "rows_per_expert": m,
                                "forward_ms": t * 1e3})
        if len(times) >= 2:
            out[kind + "_us_per_expert_forward"] = 1e6 * slope([e for e, _ in times],
                                                               [t for _, t in times])
    text = json.dumps(out, indent=1)
    print(text)
    if len(sys.argv) > 1:
        with open(sys.argv[1], "w") as f:
            f.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

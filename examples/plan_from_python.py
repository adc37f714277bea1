#!/usr/bin/env python3
"""cleave from Python: search the plans of the seed's 13B job, price the best one's training run,
and compare it with the plan that needs the least memory.

    PYTHONPATH=build/release/python python3 examples/plan_from_python.py

With pandas installed, `pandas.DataFrame(result["plans"])` gives one row per plan.
"""
import cleave

MODEL, CLUSTER = "examples/seed-13b.toml", "dgx-a100-80g"

result = cleave.plan(MODEL, CLUSTER, gpus=32, gbs=128, top=5, tokens="300B",
                     price_per_gpu_hour=2.0)
print(f"{result['feasible']} feasible plans of {result['candidates_evaluated']} priced")
for p in result["plans"]:
    print(f"{p['rank']:2d}  {p['plan']['flags']:<60s} {p['iteration_time_s']:7.3f} s"
          f"  MFU {100 * p['mfu']:4.1f} %  {p['memory_gib']['total']:5.1f} GiB"
          f"  {p['train_days']:5.1f} days  ${p['cost']:,.0f}")

smallest = cleave.plan(MODEL, CLUSTER, gpus=32, gbs=128, top=1, objective="memory")["plans"][0]
print("least memory:", smallest["plan"]["flags"], f"{smallest['memory_gib']['total']:.1f} GiB")

best = result["plans"][0]["plan"]
timeline = cleave.simulate(MODEL, CLUSTER, gpus=32, gbs=128, tp=best["tp"], pp=best["pp"],
                           mbs=best["mbs"], vpp=best["vpp"], recompute=best["recompute"],
                           sp=best["sp"], zero=best["zero"], cp=best["cp"])
print(f"simulated {timeline['iteration_time_s']:.3f} s, bubble {100 * timeline['bubble_ratio']:.1f} %")

try:
    cleave.load_model("examples/does-not-exist.toml")
except cleave.ConfigError as e:
    print("ConfigError:", e)

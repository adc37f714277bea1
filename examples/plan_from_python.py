#!/usr/bin/env python3
"""cleave from Python: search the plans of the seed's 13B job, price the best one's training run,
compare it with the plan that needs the least memory, and simulate it.

    pip install .          # or: PYTHONPATH=build/release/python
    python3 examples/plan_from_python.py

With pandas installed, `pandas.DataFrame(result.to_dict()["plans"])` gives one row per plan.
"""
import cleave

model = cleave.Model("examples/seed-13b.toml")
cluster = cleave.Cluster("dgx-a100-80g")
job = cleave.Job(gpus=32, gbs=128, tokens="300B", price_per_gpu_hour=2.0)

result = cleave.plan(model, cluster, job, top=5)
print(f"{model.name}: {model.params_total / 1e9:.2f}B parameters on {cluster.display_name}")
print(f"{result.feasible} feasible plans of {result.candidates_evaluated} priced")
for rank, p in enumerate(result.plans, 1):
    d = p.to_dict()  # the same JSON as cleave plan --format json, with the training run's cost
    print(f"{rank:2d}  {p.flags:<62s} {p.iteration_time_s:7.3f} s  MFU {100 * p.mfu:4.1f} %"
          f"  {p.memory_gib.total:5.1f} GiB  {d['train_days']:5.1f} days  ${d['cost']:,.0f}")

smallest = cleave.plan(model, cluster, job, top=1, objective="memory").plans[0]
print("least memory:", smallest.flags, f"{smallest.memory_gib.total:.1f} GiB")

best = result.plans[0]
timeline = cleave.simulate(model, cluster, job, tp=best.tp, pp=best.pp, mbs=best.mbs,
                           vpp=best.vpp, recompute=best.recompute, sp=best.sp, zero=best.zero,
                           cp=best.cp)
print(f"simulated {timeline.iteration_time_s:.3f} s, bubble {100 * timeline.bubble_ratio:.1f} %")
print(result.export("megatron").splitlines()[0])

try:
    cleave.Model("examples/does-not-exist.toml")
except cleave.ConfigError as e:
    print("ConfigError:", e)

"""`import cleave` (python/module.cpp, on api/cleave.hpp), run by ctest with
PYTHONPATH=<build>/python.

Checks that results are objects with attributes, that each to_dict() equals what the CLI prints
with --format json for the README's commands, that keywords are the CLI's flags, that models
come from a path, a dict or keywords, that bad input raises cleave.ConfigError with file and line,
and that importing the module loads neither MPI nor CUDA.
"""
import json
import os
import subprocess
import tempfile
import unittest

import cleave

SRC = os.environ.get("CLEAVE_SOURCE", ".")
BIN = os.environ.get("CLEAVE_BIN", "cleave")
SEED = os.path.join(SRC, "examples", "seed-13b.toml")
SEED_JOB = dict(gpus=32, gbs=128)


def cli_json(*args):
    out = subprocess.run([BIN, *args, "--format", "json"], check=True, capture_output=True,
                         text=True, cwd=SRC).stdout
    return json.loads(out)


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def without_elapsed(d):
    d = dict(d)
    d.pop("elapsed_s", None)
    return d


class TestObjects(unittest.TestCase):
    def test_the_issue_example(self):
        # Issue 27's done-when: a model from keywords, planned on a profile by name.
        m = cleave.Model(layers=40, hidden=5120, heads=40, ffn_hidden=13824, vocab=32000,
                         seq_len=4096, arch="llama")
        r = cleave.plan(m, "dgx-a100-80g", gpus=32, gbs=128)
        best = r.plans[0]
        self.assertEqual(best.dp * best.tp * best.pp * best.cp, 32)
        self.assertGreater(best.iteration_time_s, 0.0)
        self.assertTrue(best.fits)
        self.assertLessEqual(best.memory_gib.total, best.usable_memory_gib)
        # attributes agree with the plan's JSON
        d = best.to_dict()
        self.assertEqual(d["plan"]["tp"], best.tp)
        self.assertEqual(d["plan"]["mbs"], best.mbs)
        self.assertEqual(d["plan"]["recompute"], best.recompute)
        self.assertEqual(d["plan"]["zero"], best.zero)
        self.assertEqual(d["plan"]["flags"], best.flags)
        self.assertAlmostEqual(d["iteration_time_s"], best.iteration_time_s, places=12)
        self.assertAlmostEqual(d["mfu"], best.mfu, places=12)
        self.assertAlmostEqual(d["memory_gib"]["total"], best.memory_gib.total, places=12)
        self.assertEqual([k["kind"] for k in d["risks"]], [k.kind for k in best.risks])
        # ranked best first: no later plan is faster under objective time
        times = [p.iteration_time_s for p in r.plans]
        self.assertEqual(times, sorted(times))

    def test_model_from_keywords_equals_the_same_toml(self):
        # The same fields as examples/seed-13b.toml give the same parameter count.
        kw = cleave.Model(name="seed-13b", arch="gpt", layers=32, hidden=5760, heads=40,
                          ffn_hidden=23040, vocab=51200, seq_len=2048)
        f = cleave.Model(SEED)
        self.assertEqual(kw.params_total, f.params_total)
        self.assertEqual(kw.to_dict(), f.to_dict())
        self.assertEqual(f.to_dict(), cli_json("model", SEED))
        self.assertEqual(cleave.Model(dict(name="seed-13b", arch="gpt", layers=32, hidden=5760,
                                           heads=40, ffn_hidden=23040, vocab=51200,
                                           seq_len=2048)).params_total, f.params_total)
        # 13.05B (examples/seed-13b.toml's comment)
        self.assertAlmostEqual(f.params_total / 1e9, 13.05, delta=0.01)

    def test_model_from_a_hugging_face_dict(self):
        path = os.path.join(SRC, "examples", "hf", "qwen3-8b.config.json")
        if not os.path.exists(path):
            self.skipTest("no qwen3-8b config shipped")
        d = json.loads(read(path))
        self.assertEqual(cleave.Model(d).params_total, cleave.Model(path).params_total)

    def test_cluster_and_job_objects(self):
        c = cleave.Cluster("dgx-h100")
        self.assertEqual(c.name, "dgx-h100")
        self.assertEqual(c.gpus_per_node, 8)
        self.assertEqual(c.to_dict(), cli_json("hw", "show", "dgx-h100"))
        job = cleave.Job(gpus=32, gbs=128)
        self.assertEqual(job.gbs, 128)
        a = cleave.plan(SEED, c, job, top=2)
        b = cleave.plan(SEED, "dgx-h100", gpus=32, gbs=128, top=2)
        self.assertEqual(without_elapsed(a.to_dict()), without_elapsed(b.to_dict()))
        with self.assertRaises(cleave.ConfigError):
            cleave.Job(gpus=32, gbs=128, dtype="bf17")
        st = cleave.Stack("torchtitan-fsdp2")
        self.assertEqual(st.framework, "torchtitan")
        self.assertEqual(st.to_dict(), cli_json("stack", "show", "torchtitan-fsdp2"))
        t = cleave.plan(SEED, "dgx-h100", cleave.Job(gpus=32, gbs=128, stack=st), top=1)
        self.assertEqual(t.to_dict()["plans"][0]["stack"]["name"], "torchtitan-fsdp2")

    def test_a_plan_keyword_fixes_that_dimension(self):
        r = cleave.plan(SEED, "dgx-a100-80g", tp=2, top=5, **SEED_JOB)
        self.assertEqual({p.tp for p in r.plans}, {2})
        self.assertIn("--tp 2", r.to_dict()["fixed"])

    def test_an_empty_plan_says_why(self):
        # Issue 49: --tp 3 divides neither the 64 GPUs nor Qwen3-8B's 32 heads.
        qwen = os.path.join(SRC, "examples", "hf", "qwen3-8b.config.json")
        r = cleave.plan(qwen, "dgx-h100", gpus=64, gbs=256, seq=4096, tp=3)
        self.assertEqual(len(r), 0)
        self.assertIn("--tp 3: tp=3 does not divide gpus=64 (rule gpus)", r.why_empty)
        self.assertIn("tp=3 does not divide heads=32 (rule tp_heads)", r.why_empty)
        self.assertEqual(r.to_dict()["why_empty"], r.why_empty)
        self.assertEqual(cleave.plan(SEED, "dgx-a100-80g", top=1, **SEED_JOB).why_empty, "")

    def test_every_fixed_flag_refusal_is_the_clis(self):
        # Issue 49: for each fixed flag that leaves no candidate, Python's why_empty is the text of
        # `cleave plan ... --format json` (exit 1), and it names the flag and a rule.
        qwen = os.path.join(SRC, "examples", "hf", "qwen3-8b.config.json")
        moe = os.path.join(SRC, "examples", "hf", "qwen3-30b-a3b.config.json")
        cases = [(qwen, dict(pp=64), ["--pp", "64"]), (qwen, dict(cp=3), ["--cp", "3"]),
                 (qwen, dict(ep=8), ["--ep", "8"]), (moe, dict(etp=3), ["--etp", "3"]),
                 (qwen, dict(vpp=2, schedule="1f1b"), ["--vpp", "2", "--schedule", "1f1b"]),
                 (qwen, dict(mbs=3), ["--mbs", "3"]),
                 (qwen, dict(pp=1, schedule="interleaved"), ["--pp", "1", "--schedule", "interleaved"]),
                 (qwen, dict(pp=2, zero=3), ["--pp", "2", "--zero", "3"])]
        for model, kw, flags in cases:
            with self.subTest(flags=flags):
                r = cleave.plan(model, "dgx-h100", gpus=64, gbs=256, seq=4096, top=1, **kw)
                cli = subprocess.run([BIN, "plan", model, "dgx-h100", "--gpus", "64", "--gbs", "256",
                                      "--seq", "4096", "--top", "1", *flags, "--format", "json"],
                                     capture_output=True, text=True, cwd=SRC)
                self.assertEqual(cli.returncode, 1)
                self.assertEqual(len(r), 0)
                self.assertEqual(r.why_empty, json.loads(cli.stdout)["why_empty"])
                self.assertIn(flags[0] + " ", r.why_empty)
                self.assertIn("(rule ", r.why_empty)

    def test_export_parses_back(self):
        r = cleave.plan(SEED, "dgx-a100-80g", top=1, **SEED_JOB)
        args = r.export("megatron")
        best = r.plans[0]
        self.assertIn(f"--tensor-model-parallel-size {best.tp}", args)
        self.assertIn(f"--pipeline-model-parallel-size {best.pp}", args)
        self.assertIn(f"--micro-batch-size {best.mbs}", args)
        # One explained plan exports the same way (its own layout, as fixed).
        e = cleave.explain(SEED, "dgx-a100-80g", tp=best.tp, pp=best.pp, mbs=best.mbs,
                           zero=best.zero, sp=best.sp, recompute=best.recompute,
                           schedule=best.schedule, vpp=best.vpp, **SEED_JOB)
        self.assertEqual(e.export("megatron").splitlines()[3:], args.splitlines()[3:])
        with self.assertRaises(cleave.ConfigError):
            e.export("deepspeed")  # priced for megatron-core


class TestSameAsTheCli(unittest.TestCase):
    """The README's commands: to_dict() equals the CLI's --format json, key for key."""

    def test_plan(self):
        got = cleave.plan(SEED, "dgx-a100-80g", top=5, **SEED_JOB).to_dict()
        want = cli_json("plan", SEED, "dgx-a100-80g", "--gpus", "32", "--gbs", "128", "--top", "5")
        self.assertEqual(without_elapsed(got), without_elapsed(want))

    def test_plan_fixed_405b(self):
        got = cleave.plan(os.path.join(SRC, "examples", "llama-3-405b.toml"), "dgx-h100",
                          gpus=16384, gbs=2048, seq=8192, tp=8, pp=16, top=3).to_dict()
        want = cli_json("plan", "examples/llama-3-405b.toml", "dgx-h100", "--gpus", "16384",
                        "--gbs", "2048", "--seq", "8192", "--tp", "8", "--pp", "16", "--top", "3")
        self.assertEqual(without_elapsed(got), without_elapsed(want))

    def test_explain(self):
        for cluster in ("dgx-a100-80g", "a100-pcie-1gbe"):
            got = cleave.explain(SEED, cluster, pp=8, dp=4, mbs=8, **SEED_JOB).to_dict()
            want = cli_json("explain", SEED, cluster, "--gpus", "32", "--gbs", "128", "--pp", "8",
                            "--dp", "4", "--mbs", "8")
            self.assertEqual(got, want)

    def test_explain_with_knobs(self):
        got = cleave.explain(os.path.join(SRC, "examples", "llama-3-70b.toml"), "dgx-h100",
                             gpus=64, gbs=256, tp=4, pp=2, sp=True, zero=1,
                             recompute_modules=["mlp"], cpu_offloading_num_layers=10,
                             use_precision_aware_optimizer=True, exp_avg_dtype="bf16",
                             exp_avg_sq_dtype="bf16").to_dict()
        want = cli_json("explain", "examples/llama-3-70b.toml", "dgx-h100", "--gpus", "64",
                        "--gbs", "256", "--tp", "4", "--pp", "2", "--sp", "--zero", "1",
                        "--recompute-modules", "mlp", "--cpu-offloading-num-layers", "10",
                        "--use-precision-aware-optimizer", "--exp-avg-dtype", "bf16",
                        "--exp-avg-sq-dtype", "bf16")
        self.assertEqual(got, want)

    def test_explain_muon_and_train(self):
        got = cleave.explain(SEED, "dgx-a100-80g", zero=1, optimizer="muon", tokens="1T",
                             failures_per_gpu_hour=0, **SEED_JOB).to_dict()
        want = cli_json("explain", SEED, "dgx-a100-80g", "--gpus", "32", "--gbs", "128",
                        "--zero", "1", "--optimizer", "muon", "--tokens", "1T",
                        "--failures-per-gpu-hour", "0")
        self.assertEqual(got, want)
        self.assertEqual(got["optimizer"]["name"], "muon")
        # --tokens 1T: days = 1e12 / tokens_per_s / 86400 with no interruptions
        self.assertAlmostEqual(got["train_days"], 1e12 / got["tokens_per_s"] / 86400.0, places=9)

    def test_simulate(self):
        s = cleave.simulate(SEED, "dgx-a100-80g", pp=8, dp=4, mbs=8, **SEED_JOB)
        want = cli_json("simulate", SEED, "dgx-a100-80g", "--gpus", "32", "--gbs", "128", "--pp",
                        "8", "--dp", "4", "--mbs", "8")
        self.assertEqual(s.to_dict(), want)
        self.assertEqual(len(s.stages), 8)
        self.assertAlmostEqual(s.iteration_time_s, want["iteration_time_s"], places=12)

    def test_compare(self):
        model = os.path.join(SRC, "examples", "llama-3-70b.toml")
        c = cleave.compare(model, ["dgx-a100-80g", "dgx-h100"], gpus=64, gbs=512)
        want = cli_json("compare", "examples/llama-3-70b.toml", "--clusters", "dgx-a100-80g",
                        "dgx-h100", "--gpus", "64", "--gbs", "512")
        self.assertEqual(c.to_dict(), want)
        self.assertEqual(sorted(c.best), ["dgx-a100-80g", "dgx-h100"])
        self.assertAlmostEqual(c.best["dgx-h100"].iteration_time_s,
                               want["profiles"][1]["best"]["iteration_time_s"], places=12)

    def test_published(self):
        csv = os.path.join(SRC, "tests", "data", "public_memory.csv")
        p = cleave.published(csv)
        self.assertTrue(p.memory)
        got, want = p.to_dict(), cli_json("published", csv)
        self.assertEqual(got, want)
        runs = cleave.published()
        self.assertFalse(runs.memory)
        self.assertGreater(runs.rows, 10)


class TestErrors(unittest.TestCase):
    def test_wrong_key_raises_config_error_with_its_line(self):
        text = read(SEED).splitlines()
        # a misspelt key on the line after the first table header
        header = next(i for i, l in enumerate(text) if l.startswith("["))
        text.insert(header + 1, "hiden = 5120")
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "bad.toml")
            with open(path, "w", encoding="utf-8") as f:
                f.write("\n".join(text) + "\n")
            with self.assertRaises(cleave.ConfigError) as ctx:
                cleave.plan(path, "dgx-a100-80g", **SEED_JOB)
            err = ctx.exception
            self.assertEqual(err.file, path)
            self.assertEqual(err.line, header + 2)  # 1-based
            self.assertEqual(err.column, 1)
            self.assertIn("hiden", str(err))
            self.assertIsInstance(err, ValueError)

    def test_bad_keywords_raise_config_error(self):
        for bad in (dict(objective="fastest"), dict(schedule="bogus"), dict(tp=0),
                    dict(zero=4), dict(gbs="128"), dict(no_such_flag=1)):
            with self.assertRaises(cleave.ConfigError, msg=str(bad)):
                cleave.plan(SEED, "dgx-a100-80g", **{**SEED_JOB, **bad})
        with self.assertRaises(cleave.ConfigError):
            cleave.plan(SEED, "dgx-a100-80g", gbs=128)  # no gpus
        with self.assertRaises(cleave.ConfigError) as ctx:
            cleave.Model(layers=40, hidden=5120)  # heads, ffn_hidden, vocab missing
        self.assertIn("heads", str(ctx.exception))

    def test_report_writes_the_page(self):
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "r.html")
            self.assertTrue(cleave.report(SEED, "dgx-a100-80g", top=2, out=out, **SEED_JOB))
            page = read(out)
            self.assertIn('<svg id="scatter"', page)
            self.assertIn("seed-13b on dgx-a100-80g", page)

    def test_examples_run(self):
        env = dict(os.environ)
        with tempfile.TemporaryDirectory() as d:
            out = subprocess.run(["python3" if not os.environ.get("PYTHON") else
                                  os.environ["PYTHON"],
                                  os.path.join(SRC, "examples", "sweep_gpus.py"), d],
                                 check=True, capture_output=True, text=True, env=env).stdout
            rows = [l for l in out.splitlines() if " GPUs  --" in l]
            self.assertEqual(len(rows), 12)  # 2 widths x 6 job sizes, each with a plan
            self.assertTrue(os.path.exists(os.path.join(d, "sweep.svg")) or
                            os.path.exists(os.path.join(d, "sweep.png")))
            out = subprocess.run(["python3" if not os.environ.get("PYTHON") else
                                  os.environ["PYTHON"],
                                  os.path.join(SRC, "examples", "plan_from_python.py")],
                                 check=True, capture_output=True, text=True, env=env, cwd=SRC).stdout
            self.assertIn("least memory:", out)
            self.assertIn("ConfigError:", out)

    def test_tables_are_the_clis(self):
        def cli_text(*args):
            return subprocess.run([BIN, *args], check=True, capture_output=True, text=True,
                                  cwd=SRC).stdout
        e = cleave.explain(SEED, "dgx-a100-80g", pp=8, dp=4, mbs=8, **SEED_JOB)
        self.assertEqual(e.table(), cli_text("explain", SEED, "dgx-a100-80g", "--gpus", "32",
                                             "--gbs", "128", "--pp", "8", "--dp", "4", "--mbs",
                                             "8"))
        r = cleave.plan(SEED, "dgx-a100-80g", top=3, **SEED_JOB)
        strip = lambda t: [l for l in t.splitlines() if not l.startswith("# elapsed")]
        self.assertEqual(strip(str(r)), strip(cli_text("plan", SEED, "dgx-a100-80g", "--gpus",
                                                       "32", "--gbs", "128", "--top", "3")))

    def test_svg_writer(self):
        svg = cleave.scatter_svg([("a", 1.0, 10.0, True), ("b", 2.0, 5.0)], 80.0)
        self.assertTrue(svg.startswith('<svg id="scatter"'))
        self.assertEqual(svg.count('<circle class="pt'), 2)  # one per point
        self.assertEqual(svg.count('chosen"'), 1)

    def test_help_has_signatures(self):
        self.assertIn("plan(model, cluster, job=None, **flags) -> PlanResult", cleave.plan.__doc__)
        self.assertIn("tp", [o["name"] for o in cleave.options()])

    def test_import_loads_neither_mpi_nor_cuda(self):
        maps = read("/proc/self/maps")
        for lib in ("libmpi", "libcuda", "libcudart", "libnccl", "libcublas"):
            self.assertNotIn(lib, maps)


if __name__ == "__main__":
    unittest.main()

"""`import cleave` (python/module.cpp), run by ctest with PYTHONPATH=<build>/python.

Checks that each function returns what the command's --format json prints, that keyword
arguments mirror the flags, that bad input raises cleave.ConfigError with file and line, and
that importing the module loads neither MPI nor CUDA.
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


def cli_json(*args):
    out = subprocess.run([BIN, *args, "--format", "json"], check=True, capture_output=True,
                         text=True, cwd=SRC).stdout
    return json.loads(out)


class TestModule(unittest.TestCase):
    def test_plan_matches_the_cli(self):
        got = cleave.plan(SEED, "dgx-a100-80g", gpus=32, gbs=128, top=3)
        want = cli_json("plan", SEED, "dgx-a100-80g", "--gpus", "32", "--gbs", "128", "--top", "3")
        self.assertIsInstance(got["plans"], list)
        self.assertEqual(len(got["plans"]), 3)
        got.pop("elapsed_s")
        want.pop("elapsed_s")
        self.assertEqual(got, want)
        first = got["plans"][0]
        self.assertGreater(first["tokens_per_s"], 0.0)
        self.assertTrue(first["fits"])
        self.assertEqual(first["plan"]["dp"] * first["plan"]["tp"] * first["plan"]["pp"] *
                         first["plan"]["cp"], 32)

    def test_keywords_mirror_flags(self):
        e = cleave.explain(SEED, "dgx-a100-80g", gpus=32, gbs=128, tp=2, pp=2, sp=True,
                           recompute="selective", tokens="1T", failures_per_gpu_hour=0)
        self.assertEqual(e["plan"]["tp"], 2)
        self.assertEqual(e["plan"]["pp"], 2)
        self.assertTrue(e["plan"]["sp"])
        self.assertEqual(e["plan"]["recompute"], "selective")
        # --tokens 1T: days = 1e12 / tokens_per_s / 86400 with no interruptions
        self.assertAlmostEqual(e["train_days"], 1e12 / e["tokens_per_s"] / 86400.0, places=9)
        s = cleave.simulate(SEED, "dgx-a100-80g", gpus=32, gbs=128, tp=2, pp=2)
        self.assertEqual(len(s["stages"]), 2)
        self.assertGreater(s["iteration_time_s"], 0.0)

    def test_loaders_and_published(self):
        m = cleave.load_model(SEED)
        self.assertEqual(m, cli_json("model", SEED))
        self.assertGreater(m["params_total"], 1e10)
        c = cleave.load_cluster("dgx-h100")
        self.assertEqual(c, cli_json("hw", "show", "dgx-h100"))
        p = cleave.published()
        self.assertIsInstance(p, dict)

    def test_wrong_key_raises_config_error_with_its_line(self):
        text = open(SEED, encoding="utf-8").read().splitlines()
        # a misspelt key on the line after the first table header
        header = next(i for i, l in enumerate(text) if l.startswith("["))
        text.insert(header + 1, "hiden = 5120")
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "bad.toml")
            open(path, "w", encoding="utf-8").write("\n".join(text) + "\n")
            with self.assertRaises(cleave.ConfigError) as ctx:
                cleave.plan(path, "dgx-a100-80g", gpus=32, gbs=128)
            err = ctx.exception
            self.assertEqual(err.file, path)
            self.assertEqual(err.line, header + 2)  # 1-based
            self.assertEqual(err.column, 1)
            self.assertIn("hiden", str(err))
            self.assertIsInstance(err, ValueError)

    def test_bad_flag_value_raises_config_error(self):
        with self.assertRaises(cleave.ConfigError):
            cleave.plan(SEED, "dgx-a100-80g", gpus=32, gbs=128, objective="fastest")

    def test_report_writes_the_page(self):
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "r.html")
            self.assertIsNone(cleave.report(SEED, "dgx-a100-80g", gpus=32, gbs=128, top=2, out=out))
            page = open(out, encoding="utf-8").read()
            self.assertIn('<svg id="scatter"', page)
            self.assertIn("seed-13b on dgx-a100-80g", page)

    def test_import_loads_neither_mpi_nor_cuda(self):
        maps = open("/proc/self/maps", encoding="utf-8").read()
        for lib in ("libmpi", "libcuda", "libcudart", "libnccl", "libcublas"):
            self.assertNotIn(lib, maps)


if __name__ == "__main__":
    unittest.main()

"""`pip install .`: builds python/module.cpp (import cleave) with CMake and installs it with the
hardware profiles, software stacks and model configs it reads (under <prefix>/share/cleave, the
install folders the module looks in; CLEAVE_HWPROFILES / CLEAVE_STACKS / CLEAVE_MODELS override).

The build folder is build/pip (Release, no tests, no CUDA backend: the module links no executor).
CLEAVE_BUILD_DIR=<folder> uses a CMake build folder that is already configured instead (the test
tests/cli/test_pip_install.sh points it at the tree under test, so CI does not compile twice).
"""
import glob
import os
import shutil
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = os.path.dirname(os.path.abspath(__file__))


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        build_dir = os.environ.get("CLEAVE_BUILD_DIR")
        if not build_dir:
            build_dir = os.path.join(ROOT, "build", "pip")
            subprocess.run(["cmake", "-S", ROOT, "-B", build_dir, "-DCMAKE_BUILD_TYPE=Release",
                            f"-DCMAKE_INSTALL_PREFIX={sys.prefix}",
                            f"-DPython3_EXECUTABLE={sys.executable}",
                            "-DCLEAVE_BUILD_TESTS=OFF", "-DCLEAVE_BUILD_BENCH=OFF",
                            "-DCLEAVE_BUILD_EXAMPLES=OFF", "-DCLEAVE_ENABLE_CUDA=OFF"],
                           check=True)
        jobs = os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL", str(os.cpu_count() or 1))
        subprocess.run(["cmake", "--build", build_dir, "--target", "cleave_python", "-j", jobs],
                       check=True)
        built = glob.glob(os.path.join(build_dir, "python", "cleave*.so"))
        if not built:
            raise RuntimeError(f"cmake built no python/cleave*.so under {build_dir}")
        target = self.get_ext_fullpath(ext.name)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        shutil.copyfile(built[0], target)


def data(folder, pattern):
    return sorted(os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(ROOT, folder, pattern)))


setup(
    ext_modules=[Extension("cleave", sources=[])],
    cmdclass={"build_ext": CMakeBuild},
    data_files=[
        ("share/cleave/hwprofiles", data("hwprofiles", "*.toml")),
        ("share/cleave/hwprofiles/calibration", data("hwprofiles/calibration", "*.toml")),
        ("share/cleave/stacks", data("stacks", "*.toml")),
        ("share/cleave/models", data("examples/hf", "*.json")),
        ("share/cleave", ["tests/data/public_runs.csv"]),
    ],
    packages=[],
    py_modules=[],
    zip_safe=False,
)

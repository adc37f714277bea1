"""cleave's PEP 517 build backend: `pip install .` with nothing to download (requires = []).

Standard library only, so it runs under any CPython >= 3.9 (pyenv, conda, uv, Debian) online or
offline, with or without build isolation. It builds python/module.cpp (the target cleave_python)
with CMake and writes the wheel itself: the module at the wheel's root and, under
cleave-<version>.data/data/share/cleave, the hardware profiles, stacks, model configs and
public_runs.csv, so that they land in <prefix>/share/cleave: the install folders that the module
looks in (CMAKE_INSTALL_PREFIX is sys.prefix, compiled in; CLEAVE_HWPROFILES / CLEAVE_STACKS /
CLEAVE_MODELS override).

The build folder is build/pip (Release, no tests, no CUDA backend: the module links no executor),
reconfigured for the interpreter that runs pip. CLEAVE_BUILD_DIR=<folder> builds in that folder
instead: one already configured is used as it is (the test tests/cli/test_pip_install.sh points
it at the tree under test, so CI does not compile twice); an empty one is configured as build/pip.
A build that cannot work stops with one line saying what is missing and what to install.
"""
import base64
import csv
import glob
import hashlib
import io
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import time
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# (source folder, glob, install folder under <prefix>): what the CMake install rules ship
# (cli/CMakeLists.txt, trace/CMakeLists.txt) and public_runs.csv for cleave.published().
DATA = [
    ("hwprofiles", "*.toml", "share/cleave/hwprofiles"),
    ("hwprofiles/calibration", "*.toml", "share/cleave/hwprofiles/calibration"),
    ("stacks", "*.toml", "share/cleave/stacks"),
    ("examples/hf", "*.json", "share/cleave/models"),
    ("trace", "kernel-classes.toml", "share/cleave/trace"),
    ("tests/data", "public_runs.csv", "share/cleave"),
]

# Debian 12 packages for what CMake reports missing (.ci/deps installs them all).
DEBIAN = {
    "Eigen3": "libeigen3-dev", "CLI11": "libcli11-dev", "tomlplusplus": "libtomlplusplus-dev",
    "nlohmann_json": "nlohmann-json3-dev", "MPI": "libopenmpi-dev", "simdjson": "libsimdjson-dev",
    "ZLIB": "zlib1g-dev", "Threads": "libc6-dev", "pybind11": "pybind11-dev",
}


class BuildFailed(SystemExit):
    """Ends the hook with one line (SystemExit: no traceback under pip's hook runner)."""

    def __init__(self, line):
        super().__init__("error: cleave: " + line)


# --- metadata ------------------------------------------------------------------------------------

def _project():
    """[project]'s string values from pyproject.toml (tomllib is 3.11+; the table is flat)."""
    values, inside = {}, False
    with open(os.path.join(ROOT, "pyproject.toml"), encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if line.startswith("["):
                inside = line == "[project]"
            elif inside:
                m = re.match(r'([A-Za-z-]+)\s*=\s*(?:\{\s*text\s*=\s*)?"([^"]*)"', line)
                if m:
                    values[m.group(1)] = m.group(2)
    return values


def _names():
    p = _project()
    name, version = p["name"], p["version"]
    return p, name, version, f"{re.sub(r'[-_.]+', '_', name).lower()}-{version}"


def _metadata():
    p, name, version, _ = _names()
    lines = ["Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}"]
    if "description" in p:
        lines.append(f"Summary: {p['description']}")
    if "license" in p:
        lines.append(f"License: {p['license']}")
    if "requires-python" in p:
        lines.append(f"Requires-Python: {p['requires-python']}")
    body = ""
    if "readme" in p and os.path.isfile(os.path.join(ROOT, p["readme"])):
        lines.append("Description-Content-Type: text/markdown")
        with open(os.path.join(ROOT, p["readme"]), encoding="utf-8") as f:
            body = "\n" + f.read()
    return "\n".join(lines) + "\n" + body


def _tag():
    """The running interpreter's wheel tag, e.g. cp312-cp312-linux_x86_64."""
    impl = {"cpython": "cp", "pypy": "pp"}.get(sys.implementation.name, sys.implementation.name)
    interp = f"{impl}{sys.version_info[0]}{sys.version_info[1]}"
    soabi = sysconfig.get_config_var("SOABI") or ""
    if impl == "cp" and soabi.startswith("cpython-"):
        abi = "cp" + soabi.split("-")[1]  # cp312, cp313t, cp37m
    else:
        abi = re.sub(r"[-.]", "_", soabi) or "none"
    plat = re.sub(r"[-.]", "_", sysconfig.get_platform())
    return f"{interp}-{abi}-{plat}"


def _dist_info(tag):
    _, _, _, stem = _names()
    wheel = ("Wheel-Version: 1.0\nGenerator: cleave_build (python/build_backend)\n"
             f"Root-Is-Purelib: false\nTag: {tag}\n")
    return stem, {f"{stem}.dist-info/METADATA": _metadata().encode(),
                  f"{stem}.dist-info/WHEEL": wheel.encode()}


def _write_dist_info(metadata_directory):
    stem, files = _dist_info(_tag())
    for name, data in files.items():
        path = os.path.join(metadata_directory, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(data)
    return f"{stem}.dist-info"


# --- the CMake build -----------------------------------------------------------------------------

def _run(cmd, what):
    """Runs cmd, its output passed on (pip shows it when the build fails); returns the output."""
    print("+ " + " ".join(cmd), flush=True)
    try:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                errors="replace")
    except FileNotFoundError:
        raise BuildFailed(f"{cmd[0]} not found on PATH: install CMake >= 3.25 (Debian 12: "
                          "apt install cmake g++ make)") from None
    out = []
    for line in proc.stdout:
        sys.stdout.write(line)
        out.append(line)
    sys.stdout.flush()
    if proc.wait() != 0:
        _diagnose("".join(out), what)
    return "".join(out)


def _headers_line():
    v = f"{sys.version_info[0]}.{sys.version_info[1]}"
    inc = sysconfig.get_paths()["include"]
    if sys.base_prefix == "/usr":
        action = f"apt install python{v}-dev (Debian; python3-dev for its default python3)"
    else:
        action = (f"install the headers of the Python in {sys.base_prefix} (pyenv, conda and uv "
                  f"ship them; a distribution's package is python{v}-dev)")
    return f"Python.h for Python {v} ({sys.executable}) is not in {inc}: {action}"


def _diagnose(out, what):
    """One line for what went wrong in `out`, the output of the step `what`."""
    m = re.search(r"CMake ([0-9.]+) or higher is required\.\s+You are running version ([0-9.]+)",
                  out)
    if m:
        raise BuildFailed(f"CMake {m.group(1)} or newer is needed, this is {m.group(2)} "
                          "(Debian 12's cmake is 3.25)")
    if "No CMAKE_CXX_COMPILER could be found" in out or "is not able to compile a simple" in out:
        raise BuildFailed("no working C++ compiler: install g++ >= 12 "
                          "(Debian: apt install g++ make)")
    m = (re.search(r'provided by "([A-Za-z0-9_]+)"', out) or
         re.search(r"Could NOT find ([A-Za-z0-9_]+)", out))
    if m:
        pkg = m.group(1)
        deb = DEBIAN.get(pkg) or DEBIAN.get(pkg.split("_")[0], "see .ci/deps")
        raise BuildFailed(f"CMake did not find {pkg}, which cleave builds with: install it "
                          f"(Debian: apt install {deb}; .ci/deps installs all of cleave's)")
    if "Python.h: No such file" in out and not os.path.isfile(
            os.path.join(sysconfig.get_paths()["include"], "Python.h")):
        raise BuildFailed(_headers_line())
    m = (re.search(r"^CMake Error.*\n\s*\S.*$", out, re.M) or  # what CMake says is on the next line
         re.search(r"^.*(?:error:|CMake Error|Error \d|\*\*\*).*$", out, re.M))
    first = " ".join(m.group(0).split()) if m else "see the output above"
    raise BuildFailed(f"{what} failed: {first[:300]}")


def _configure(build_dir):
    # -U: FindPython and pybind11 keep the last interpreter's headers and module suffix in the
    # cache even when Python3_EXECUTABLE names another (.venv made anew with another python3).
    _run(["cmake", "-U", "*Python3_*", "-U", "PYTHON_*", "-U", "PYBIND11_PYTHON*",
          "-U", "pybind11_INCLUDE_DIRS", "-S", ROOT, "-B", build_dir, "-DCMAKE_BUILD_TYPE=Release",
          f"-DCMAKE_INSTALL_PREFIX={sys.prefix}", f"-DPython3_EXECUTABLE={sys.executable}",
          "-DCLEAVE_BUILD_TESTS=OFF", "-DCLEAVE_BUILD_BENCH=OFF", "-DCLEAVE_BUILD_EXAMPLES=OFF",
          "-DCLEAVE_ENABLE_CUDA=OFF"], "configuring with CMake")


def _has_module_target(build_dir):
    """Whether the tree's CMake run found pybind11 and Python.h (python/CMakeLists.txt)."""
    cache, text = os.path.join(build_dir, "CMakeCache.txt"), ""
    if os.path.isfile(cache):
        with open(cache, encoding="utf-8", errors="replace") as f:
            text = f.read()
    return "PYTHON_MODULE_EXTENSION:INTERNAL=" in text, text


def _build_module():
    """Builds the target cleave_python for this interpreter; returns the module's path."""
    if shutil.which("cmake") is None:
        raise BuildFailed("cmake not found on PATH: install CMake >= 3.25 (Debian 12: "
                          "apt install cmake g++ make)")
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    build_dir = os.environ.get("CLEAVE_BUILD_DIR")
    reuse = bool(build_dir) and os.path.isfile(os.path.join(build_dir, "CMakeCache.txt"))
    if not reuse:
        if not os.path.isfile(os.path.join(sysconfig.get_paths()["include"], "Python.h")):
            raise BuildFailed(_headers_line())
        build_dir = os.path.abspath(build_dir or os.path.join(ROOT, "build", "pip"))
        _configure(build_dir)
    found, cache = _has_module_target(build_dir)
    if not found:
        if "pybind11_DIR:PATH=pybind11_DIR-NOTFOUND" in cache:
            raise BuildFailed("pybind11 not found: install it (Debian: apt install pybind11-dev; "
                              "elsewhere pybind11_ROOT=<its folder with pybind11Config.cmake>)")
        raise BuildFailed(f"{build_dir} builds no Python module: CMake found no Python headers "
                          f"for {sys.executable} there ({_headers_line()})")
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    jobs = os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL") or str(cpus or 1)
    _run(["cmake", "--build", build_dir, "--target", "cleave_python", "-j", jobs],
         "compiling the module")
    module = os.path.join(build_dir, "python", "cleave" + suffix)
    if not os.path.isfile(module):
        other = [os.path.basename(p)
                 for p in glob.glob(os.path.join(build_dir, "python", "cleave*.so"))]
        raise BuildFailed(f"{build_dir} builds {', '.join(other) or 'no module'}, "
                          f"not cleave{suffix} "
                          f"for {sys.executable}: unset CLEAVE_BUILD_DIR (or configure that folder "
                          "with -DPython3_EXECUTABLE=<this python>)")
    return module


# --- archives ------------------------------------------------------------------------------------

def _date():
    t = time.gmtime(int(os.environ.get("SOURCE_DATE_EPOCH", "315532800")))
    return max(t[:6], (1980, 1, 1, 0, 0, 0))


def _write_wheel(wheel_directory, members, tag):
    """members: [(path in the wheel, bytes, executable)]; adds the dist-info with its RECORD."""
    stem, info = _dist_info(tag)
    members = list(members) + [(name, data, False) for name, data in info.items()]
    record = io.StringIO()
    writer = csv.writer(record, lineterminator="\n")
    for name, data, _ in members:
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        writer.writerow([name, f"sha256={digest}", len(data)])
    writer.writerow([f"{stem}.dist-info/RECORD", "", ""])
    members.append((f"{stem}.dist-info/RECORD", record.getvalue().encode(), False))
    wheel_name = f"{stem}-{tag}.whl"
    path = os.path.join(wheel_directory, wheel_name)
    os.makedirs(wheel_directory, exist_ok=True)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data, executable in members:
            info = zipfile.ZipInfo(name, date_time=_date())
            info.external_attr = (0o100755 if executable else 0o100644) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, data)
    return wheel_name


def _read(path):
    with open(path, "rb") as f:
        return f.read()


def _data_members(stem):
    members = []
    for folder, pattern, dest in DATA:
        for src in sorted(glob.glob(os.path.join(ROOT, folder, pattern))):
            if os.path.isfile(src):
                name = f"{stem}.data/data/{dest}/{os.path.basename(src)}"
                members.append((name, _read(src), False))
    return members


def _source_files():
    """The files of an sdist: git's list (tracked and not ignored) or the tree less build output."""
    try:
        cmd = ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"]
        out = subprocess.run(cmd, cwd=ROOT, capture_output=True, check=True).stdout
        files = [f for f in out.decode().split("\0") if f and os.path.isfile(os.path.join(ROOT, f))]
        if files:
            return sorted(files)
    except (OSError, subprocess.CalledProcessError):
        pass
    files = []
    for top, dirs, names in os.walk(ROOT):
        rel = os.path.relpath(top, ROOT)
        dirs[:] = [d for d in dirs if not (rel == "." and d in ("build", "out", ".git", ".venv"))
                   and d != "__pycache__"]
        files += [os.path.normpath(os.path.join(rel, n)) for n in names]
    return sorted(files)


# --- the PEP 517 / PEP 660 hooks -----------------------------------------------------------------

def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def get_requires_for_build_editable(config_settings=None):
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    return _write_dist_info(metadata_directory)


def prepare_metadata_for_build_editable(metadata_directory, config_settings=None):
    return _write_dist_info(metadata_directory)


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    module = _build_module()
    _, _, _, stem = _names()
    members = [(os.path.basename(module), _read(module), True)] + _data_members(stem)
    return _write_wheel(wheel_directory, members, _tag())


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    """A .pth naming the build folder's python/: the module as built there, read where it lies
    (the source tree's data folders are compiled in); rebuild with cmake --build <that folder>."""
    module = _build_module()
    _, _, _, stem = _names()
    pth = (os.path.dirname(module) + "\n").encode()
    return _write_wheel(wheel_directory, [(f"__editable__.{stem}.pth", pth, False)], _tag())


def build_sdist(sdist_directory, config_settings=None):
    _, _, _, stem = _names()
    path = os.path.join(sdist_directory, f"{stem}.tar.gz")
    os.makedirs(sdist_directory, exist_ok=True)
    mtime = int(os.environ.get("SOURCE_DATE_EPOCH", "315532800"))

    def add(tar, name, data, mode):
        info = tarfile.TarInfo(f"{stem}/{name}")
        info.size, info.mode, info.mtime = len(data), mode, mtime
        tar.addfile(info, io.BytesIO(data))

    with tarfile.open(path, "w:gz", format=tarfile.PAX_FORMAT) as tar:
        for rel in _source_files():
            full = os.path.join(ROOT, rel)
            mode = 0o755 if os.access(full, os.X_OK) else 0o644
            add(tar, rel.replace(os.sep, "/"), _read(full), mode)
        add(tar, "PKG-INFO", _metadata().encode(), 0o644)
    return os.path.basename(path)

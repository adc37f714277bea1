#!/usr/bin/env bash
# README's install command (python3 -m venv .venv && .venv/bin/pip install .), run as written and
# offline (PIP_NO_INDEX=1; build isolation on: the backend requires nothing), in a copy of the
# sources; then issue 27's example from another folder, with the copy gone but for its .venv.
# Usage: test_pip_install.sh PYTHON SOURCE_DIR BUILD_DIR [pyenv]
#   python.pip_install: PYTHON (the tree's, Debian's python3); the module as built in BUILD_DIR,
#     the tree under test (CLEAVE_BUILD_DIR), so CI does not compile twice.
#   python.pip_install.pyenv: the newest $PYENV_ROOT/versions/3.*/bin/python3 (3.9 or newer) that
#     has venv and its headers, built by the backend from scratch in the copy's build/pip, the copy
#     kept in BUILD_DIR/pip-pyenv/<version> (later runs compile only what changed). Skips (77) when
#     no pyenv CPython >= 3.9 exists (CI's clean machine).
set -euo pipefail
PY=$1 SRC=$2 BUILD=$3 MODE=${4:-tree}
SRC=$(cd "$SRC" && pwd) BUILD=$(cd "$BUILD" && pwd)

if [ "$MODE" = pyenv ]; then
  root=${PYENV_ROOT:-$HOME/.pyenv}
  PY="" seen=""
  for cand in $(ls -d "$root"/versions/3.*/bin/python3 2>/dev/null | sort -rV); do
    "$cand" -c 'import sys; sys.exit(sys.version_info < (3, 9))' 2>/dev/null || continue
    seen="$seen ${cand#"$root"/versions/}"
    if "$cand" -c 'import os, sysconfig, venv, ensurepip
assert os.path.isfile(os.path.join(sysconfig.get_paths()["include"], "Python.h"))' 2>/dev/null; then
      PY=$cand
      break
    fi
  done
  if [ -z "$PY" ] && [ -z "$seen" ]; then
    echo "SKIP: no pyenv CPython >= 3.9 ($root/versions/3.*/bin/python3)" \
         "(Debian's python3 is python.pip_install's)"
    exit 77
  fi
  [ -n "$PY" ] || { echo "FAIL: none of$seen has venv, ensurepip and Python.h"; exit 1; }
  work=$BUILD/pip-pyenv/$("$PY" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
else
  "$PY" -c 'import venv, ensurepip' 2>/dev/null || {
    echo "SKIP: $PY has no venv / ensurepip (Debian: python3-venv, which .ci/deps installs)"
    exit 77
  }
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  export CLEAVE_BUILD_DIR=$BUILD
fi
cmd=$(grep -m1 -E '^python3 -m venv [^&]*&& [^ ]*pip install \.$' "$SRC/README.md") ||
  { echo "FAIL: README.md has no 'python3 -m venv ... && ... pip install .' line"; exit 1; }
echo "# $PY ($("$PY" -c 'import sys; print(sys.version.split()[0])')): $cmd"

# The copy: git's files (tracked, or new and not ignored) with their times, so that make in a
# kept build/pip rebuilds only what changed.
mkdir -p "$work/src"
find "$work/src" -mindepth 1 -maxdepth 1 ! -name build -exec rm -rf {} +
if git -C "$SRC" rev-parse --git-dir >/dev/null 2>&1; then
  (cd "$SRC" && git ls-files -z --cached --others --exclude-standard |
     while IFS= read -r -d '' f; do [ -f "$f" ] && printf '%s\0' "$f"; done |
     xargs -0 cp -p --parents -t "$work/src")
else
  (cd "$SRC" && tar cf - --exclude=./build --exclude=./.git --exclude=./.venv . |
     tar xf - -C "$work/src")
fi
[ -f "$work/src/pyproject.toml" ] || { echo "FAIL: copying $SRC to $work/src"; exit 1; }
(cd "$work/src" && PATH="$(dirname "$PY"):$PATH" PIP_NO_INDEX=1 bash -c "$cmd")
# the installed module must need nothing from the copy: its data are in the venv's share/cleave
find "$work/src" -mindepth 1 -maxdepth 1 ! -name build ! -name .venv -exec rm -rf {} +
cd "$work"
"$work/src/.venv/bin/python" - <<'PYEOF'
import os, sys
import cleave
assert os.path.dirname(cleave.__file__).startswith(sys.prefix), cleave.__file__
share = os.path.join(sys.prefix, "share", "cleave")
for f in ("hwprofiles/dgx-a100-80g.toml", "stacks", "models", "public_runs.csv"):
    assert os.path.exists(os.path.join(share, f)), f
m = cleave.Model(layers=40, hidden=5120, heads=40, ffn_hidden=13824, vocab=32000, seq_len=4096,
                 arch='llama')
r = cleave.plan(m, 'dgx-a100-80g', gpus=32, gbs=128)
p = r.plans[0]
print(p.tp, p.iteration_time_s)
assert p.dp * p.tp * p.pp * p.cp == 32 and p.iteration_time_s > 0 and p.fits
seed = cleave.plan(os.path.join(os.environ["CLEAVE_SOURCE"], "examples", "seed-13b.toml"),
                   'dgx-a100-80g', gpus=32, gbs=128, top=1)
assert seed.plans[0].fits
assert cleave.published().rows > 10  # share/cleave/public_runs.csv and share/cleave/models
print("installed", cleave.__file__, "for Python", sys.version.split()[0])
PYEOF

#!/usr/bin/env bash
# `pip install --no-build-isolation .` into a fresh venv, then issue 27's example from another
# folder: a model from keywords planned on a shipped profile (run by ctest as python.pip_install).
# Usage: test_pip_install.sh PYTHON SOURCE_DIR BUILD_DIR
# BUILD_DIR is the tree under test (CLEAVE_BUILD_DIR, setup.py): its module is installed as built.
set -euo pipefail
PY=$1 SRC=$2 BUILD=$3
# The interpreter the module was built for, or the system's of the same version (the built
# module's ABI tag is the version's) when the first lacks setuptools / wheel / venv (a pyenv one).
want=$("$PY" -c 'import sys; print(sys.version_info[:2])')
for cand in "$PY" /usr/bin/python3; do
  if [ -x "$(command -v "$cand")" ] && "$cand" -c "import setuptools, wheel, venv" 2>/dev/null &&
     [ "$("$cand" -c 'import sys; print(sys.version_info[:2])')" = "$want" ]; then
    PY=$cand
    break
  fi
  cand=""
done
if [ -z "${cand:-}" ]; then
  echo "SKIP: no Python $want with setuptools, wheel and venv (Debian: python3-setuptools python3-wheel python3-venv; .ci/deps installs them)"
  exit 77
fi
echo "# pip install with $PY"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# --system-site-packages: setuptools and wheel from Debian (no network in CI)
"$PY" -m venv --system-site-packages "$work/venv"
# pip builds in the source tree; its build/ and egg-info go to a copy, not the checkout
mkdir "$work/src"
(cd "$SRC" && git ls-files -z 2>/dev/null | xargs -0 cp --parents -t "$work/src" 2>/dev/null) ||
  cp -r "$SRC"/. "$work/src"
CLEAVE_BUILD_DIR=$BUILD "$work/venv/bin/python" -m pip install --no-build-isolation --no-deps \
  --no-index --quiet "$work/src"
rm -rf "$work/src"  # the installed module must not need the checkout copy
cd "$work"
"$work/venv/bin/python" - <<'PYEOF'
import os, sys
import cleave
assert os.path.dirname(cleave.__file__).startswith(sys.prefix), cleave.__file__
m = cleave.Model(layers=40, hidden=5120, heads=40, ffn_hidden=13824, vocab=32000, seq_len=4096,
                 arch='llama')
r = cleave.plan(m, 'dgx-a100-80g', gpus=32, gbs=128)
p = r.plans[0]
print(p.tp, p.iteration_time_s)
assert p.dp * p.tp * p.pp * p.cp == 32 and p.iteration_time_s > 0 and p.fits
seed = cleave.plan(os.path.join(os.environ["CLEAVE_SOURCE"], "examples", "seed-13b.toml"),
                   'dgx-a100-80g', gpus=32, gbs=128, top=1)
assert seed.plans[0].fits
print("installed", cleave.__file__)
PYEOF

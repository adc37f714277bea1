#!/usr/bin/env bash
# Fidelity check: cleave's predicted iteration time for every public training run it can express
# (shared/validation/public_runs.csv, copied to tests/data/public_runs.csv) against the published
# number, the error of each row and the mean absolute percentage error.
#   examples/published.sh [CSV] [--format table|json]
set -euo pipefail
cd "$(dirname "$0")/.."
CLEAVE=${CLEAVE:-}
if [[ -z "$CLEAVE" ]]; then
  for c in build/release/cleave build/dev/cleave build/ci/cleave; do
    if [[ -x "$c" ]]; then CLEAVE=$c; break; fi
  done
fi
if [[ -z "$CLEAVE" ]]; then
  echo "published.sh: build cleave first (cmake --workflow --preset ci, or set CLEAVE=path)" >&2
  exit 2
fi
exec "$CLEAVE" published "$@"

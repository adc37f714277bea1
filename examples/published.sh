#!/usr/bin/env bash
# Fidelity check: cleave's predicted iteration time for every public training run it can express
# (shared/validation/public_runs.csv, copied to tests/data/public_runs.csv) against the published
# number, the error of each row and the mean absolute percentage error.
#   examples/published.sh [CSV] [--format table|json]
set -euo pipefail
cd "$(dirname "$0")/.."
source examples/find-cleave.sh
exec "$CLEAVE" published "$@"

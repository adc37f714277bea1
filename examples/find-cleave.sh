# Sourced by the example scripts (run from the repository root): sets CLEAVE to $CLEAVE, else the
# first built cleave of the usual presets; exits 2 naming the calling script when there is none.
if [[ -z "${CLEAVE:-}" ]]; then
  for c in build/release/cleave build/dev/cleave build/ci/cleave; do
    if [[ -x "$c" ]]; then CLEAVE=$c; break; fi
  done
fi
if [[ -z "${CLEAVE:-}" ]]; then
  echo "$(basename "$0"): build cleave first (cmake --workflow --preset ci, or set CLEAVE=path)" >&2
  exit 2
fi

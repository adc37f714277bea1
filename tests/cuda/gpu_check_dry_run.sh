#!/usr/bin/env bash
# CTest gpu_check_dry_run: examples/gpu-check.sh on the CPU backend (CLEAVE_BACKEND=cpu), the
# same steps and output files as on a GPU, from a bundle of this build made by
# examples/gpu-bundle.sh (so the bundle's relocated Open MPI is exercised too).
#   gpu_check_dry_run.sh SOURCE_DIR BUILD_DIR WORK_DIR
set -euo pipefail
src="$1" build="$2" work="$3"
rm -rf "$work"
"$src/examples/gpu-bundle.sh" "$build" "$work/bundle"
# The dry run checks that every step runs and writes its files, not the accuracy of a CPU run on
# a loaded machine (validate's --max-error is lifted there).
if ! CLEAVE_BACKEND=cpu CLEAVE_BUNDLE="$work/bundle" "$src/examples/gpu-check.sh" "$work/out"; then
    echo "gpu_check_dry_run: gpu-check.sh failed; its files:" >&2
    tail -n 20 "$work/out"/*.txt >&2
    exit 1
fi
for f in summary.txt tests.txt calibrate.txt calibrated.toml gemm.txt validate.txt table.txt \
    peer.txt peer.json layer_probe.txt trace_probe.txt; do
    [[ -s "$work/out/$f" ]] || { echo "gpu_check_dry_run: $f missing or empty" >&2; exit 1; }
done
rows="$(grep -c '^--mbs' "$work/out/table.txt")"
[[ "$rows" -eq 4 ]] || { echo "gpu_check_dry_run: $rows plan rows, expected 4" >&2; exit 1; }
grep -q 'SKIPPED' "$work/out/tests.txt" || { echo "gpu_check_dry_run: CUDA tests not reported skipped" >&2; exit 1; }
grep -q 'MAPE' "$work/out/table.txt"
grep -q '# gpu-check: 6. layer probe' "$work/out/summary.txt"
grep -q '# gpu-check: 7. trace probe' "$work/out/summary.txt"
grep -q '2b. fp32 gemm NN 128x128x128: [0-9][0-9.]* TFLOP/s measured' "$work/out/summary.txt"
echo "gpu_check_dry_run: ok"

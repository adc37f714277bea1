#!/usr/bin/env bash
# gpu-check.sh: build cleave with the CUDA backend, run the GPU tests, then `cleave run --backend
# cuda` on one GPU for a few model sizes and print predicted against measured iteration times.
#
#   examples/gpu-check.sh [CLUSTER]     CLUSTER: hardware profile to predict with (default
#                                       dgx-h100; pick the one matching the GPU you run on)
# Environment: BUILD_DIR (default build/cuda), SKIP_BUILD=1 to reuse a build, ITERS (default 5).
# Exit status: 0 all checks ran; 1 no usable GPU, a build, a test or a run failed.
set -euo pipefail

cluster="${1:-dgx-h100}"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${BUILD_DIR:-$root/build/cuda}"
iters="${ITERS:-5}"

die() { echo "gpu-check: $*" >&2; exit 1; }

# 1. A GPU first: without one there is nothing to check (and the CUDA build takes minutes).
command -v nvidia-smi >/dev/null 2>&1 ||
    die "no NVIDIA driver on this machine (nvidia-smi not found); run this on a GPU node"
gpus="$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true)"
[[ "$gpus" -ge 1 ]] || die "nvidia-smi lists no GPU; run this on a GPU node"
echo "# gpu-check: $gpus GPU(s): $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)"
command -v mpirun >/dev/null 2>&1 || die "mpirun not found (install Open MPI or MPICH)"
command -v jq >/dev/null 2>&1 || die "jq not found (needed to read cleave's JSON)"

# 2. Build with CUDA and the device tests registered.
if [[ "${SKIP_BUILD:-0}" != 1 ]]; then
    cmake -S "$root" -B "$build" --preset cuda -DCLEAVE_ENABLE_DEVICE_TESTS=ON ||
        die "CUDA configure failed"
    cmake --build "$build" -j"$(nproc)" || die "CUDA build failed"
fi
cleave="$build/cleave"
[[ -x "$cleave" ]] || die "no cleave binary at $cleave"

# 3. GPU tests (label gpu): every Backend op on CUDA against the CPU reference.
ctest --test-dir "$build" -L gpu --output-on-failure || die "GPU tests failed"

# 4. One-GPU runs, CPU-checked first: the CUDA loss must match the CPU backend's.
mpi=(mpirun --allow-run-as-root -np 1)
printf '# %-34s %12s %12s %9s %10s %10s\n' model predicted_ms measured_ms error_pct peak_gib loss
status=0
check() {  # name, model file, extra flags
    local name="$1" model="$2"
    shift 2
    local out
    if ! out="$("${mpi[@]}" "$cleave" run "$model" "$cluster" --backend cuda --warmup 2 \
        --iters "$iters" --format json "$@")"; then
        echo "gpu-check: cleave run failed for $name" >&2
        status=1
        return
    fi
    jq -r --arg n "$name" '[$n, .predicted_iteration_time_s * 1e3, .iteration_time_s * 1e3,
        (.iteration_time_s - .predicted_iteration_time_s) / .predicted_iteration_time_s * 100,
        .peak_memory_gib, .loss] | @tsv' <<<"$out" |
        awk -F'\t' '{ printf "  %-34s %12.3f %12.3f %9.1f %10.3f %10.4f\n", $1, $2, $3, $4, $5, $6 }'
}
tiny="$root/examples/tiny.toml"
cpu_loss="$("${mpi[@]}" "$cleave" run "$tiny" "$cluster" --backend cpu --gbs 4 --warmup 0 \
    --iters 2 --format json | jq .loss)"
gpu_loss="$("${mpi[@]}" "$cleave" run "$tiny" "$cluster" --backend cuda --gbs 4 --warmup 0 \
    --iters 2 --format json | jq .loss)"
echo "# tiny: loss cpu $cpu_loss, cuda $gpu_loss"
awk -v a="$cpu_loss" -v b="$gpu_loss" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= 1e-3 * a) }' ||
    { echo "gpu-check: CUDA loss differs from the CPU reference" >&2; status=1; }
check "tiny (gbs 8)" "$tiny" --gbs 8
check "llama-3-8b 4 layers, seq 1024" "$root/examples/llama-3-8b.toml" --layers 4 --seq 1024 --gbs 4 --dtype fp32
check "llama-3-8b 8 layers, seq 2048" "$root/examples/llama-3-8b.toml" --layers 8 --seq 2048 --gbs 4 --dtype fp32
check "gpt3-175b 2 layers, hidden 4096" "$root/examples/gpt3-175b.toml" --layers 2 --hidden 4096 --heads 32 --seq 2048 --gbs 4 --dtype fp32
# ---- 5. calibrate + validate on one GPU (issue #7; section owned by calibrate/) -----------------
# cleave calibrate measures this GPU through the CUDA backend (cuBLAS GEMM sweep up to 8192^3,
# memory, the executor's kernels; one rank has no collectives) and writes a profile; cleave
# validate then runs the top 1x1x1 plans of a 4-layer GPT (and the worst feasible one) and prints
# predicted against measured with that profile. The profile's hbm_capacity_gib is host memory
# (the Backend interface does not report device memory): memory fit is not checked here.
profile="$build/calibrated-gpu.toml"
if "${mpi[@]}" "$cleave" calibrate --backend cuda --out "$profile"; then
    "${mpi[@]}" "$cleave" validate "$root/tests/calibrate/data/gpu-gpt.toml" "$profile" \
        --backend cuda --gbs 8 --top 3 --iters "$iters" --warmup 2 ||
        { echo "gpu-check: cleave validate failed or its MAPE exceeds 15%" >&2; status=1; }
else
    echo "gpu-check: cleave calibrate --backend cuda failed" >&2
    status=1
fi
exit "$status"

#!/usr/bin/env bash
# Fuzz the TOML/JSON loaders with libFuzzer for a bounded time (default 60 s).
#   scripts/fuzz.sh [SECONDS]
# Builds tests/fuzz/fuzz_loaders with clang++ (ASan + UBSan) in build/fuzz, seeds the corpus with
# every example, hardware profile and kept regression, and copies any crash, leak, timeout or
# out-of-memory input into tests/fuzz/regressions/, where the doctest case
# "fuzz regressions: ..." (tests/core/test_fuzz_regressions.cpp) replays it on every CI run.
# Exit status: 0 when nothing was found, 1 when an input was kept.
set -euo pipefail

seconds="${1:-60}"
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${CLEAVE_FUZZ_BUILD:-$root/build/fuzz}"
jobs="${CLEAVE_FUZZ_BUILD_JOBS:-2}"

cmake -S "$root" -B "$build" -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCLEAVE_BUILD_FUZZERS=ON -DCLEAVE_ENABLE_CUDA=OFF -DCLEAVE_BUILD_TESTS=OFF \
  -DCLEAVE_BUILD_BENCH=OFF >/dev/null
cmake --build "$build" -j"$jobs" --target fuzz_loaders

corpus="$build/fuzz-corpus"
artifacts="$build/fuzz-artifacts"
rm -rf "$artifacts"
mkdir -p "$corpus" "$artifacts"
cp "$root"/examples/*.toml "$root"/examples/hf/*.json "$root"/hwprofiles/*.toml "$corpus"/
find "$root/tests/fuzz/regressions" -type f ! -name README.md -exec cp {} "$corpus"/ \;

status=0
"$build/tests/fuzz/fuzz_loaders" "$corpus" -max_total_time="$seconds" -max_len=16384 \
  -dict="$root/tests/fuzz/loaders.dict" -artifact_prefix="$artifacts/" -print_final_stats=1 \
  || status=$?

kept=0
for f in "$artifacts"/*; do
  [ -e "$f" ] || continue
  cp "$f" "$root/tests/fuzz/regressions/$(basename "$f")"
  echo "fuzz.sh: kept $(basename "$f") in tests/fuzz/regressions/"
  kept=1
done
if [ "$kept" -ne 0 ] || [ "$status" -ne 0 ]; then
  echo "fuzz.sh: libFuzzer exit status $status; see the inputs kept above" >&2
  exit 1
fi
echo "fuzz.sh: no crash in ${seconds} s"

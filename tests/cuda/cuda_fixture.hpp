#pragma once
// Test harness for the CUDA backend (STYLE S7.5, ggml test-backend-ops): every op runs on the
// CPU reference backend and on the CUDA backend with the same inputs, and the results are
// compared (exactly where inputs make every intermediate exactly representable, otherwise with
// a tight tolerance). Without a usable device every device case is skipped (cuda_main.cpp).

#include "executor/backend.hpp"

#include <array>
#include <memory>
#include <string>
#include <vector>

namespace cleave::executor::test {

enum class Side { cpu = 0, gpu = 1 };

/// One tensor allocated on both backends.
struct Pair {
    std::array<Buffer, 2> buf;

    [[nodiscard]] View operator()(Side s) const { return buf[static_cast<size_t>(s)].view(); }

    [[nodiscard]] int64_t size() const { return buf[0].size(); }
};

class Fixture {
public:
    /// Initialises MPI (a singleton run) and both backends; the CUDA one with `gpu_options`
    /// (bf16 GEMMs, fused attention). Precondition: a usable device (devices_usable()).
    explicit Fixture(const BackendOptions& gpu_options = {});

    [[nodiscard]] Backend& cpu() { return *cpu_; }

    [[nodiscard]] Backend& gpu() { return *gpu_; }

    /// Both copies hold `values`.
    [[nodiscard]] Pair tensor(const std::vector<float>& values);
    /// Both copies hold zeros.
    [[nodiscard]] Pair zeros(int64_t n);

    /// Runs f(backend, side) on the CPU backend, then on the CUDA backend.
    template <class F>
    void both(F&& f) {
        f(*cpu_, Side::cpu);
        f(*gpu_, Side::gpu);
    }

    /// Downloads both copies.
    [[nodiscard]] std::array<std::vector<float>, 2> read(const Pair& p);

    /// CHECKs that the two copies are bitwise-equal values.
    void expect_equal(const Pair& p, const std::string& what);
    /// CHECKs |gpu - cpu| <= abs_tol + rel_tol * |cpu| element by element.
    void expect_close(const Pair& p,
                      const std::string& what,
                      double rel_tol = 1e-4,
                      double abs_tol = 1e-5);

private:
    std::unique_ptr<Backend> cpu_;
    std::unique_ptr<Backend> gpu_;
};

/// Small integers in [-range, range], a deterministic function of (i, seed): exact in fp32, and
/// so are their sums and products at test sizes.
[[nodiscard]] std::vector<float> ints(int64_t n, int seed, int range = 3);
/// Multiples of 1/8 in [-2, 2] (exactly representable), for the nonlinear ops.
[[nodiscard]] std::vector<float> eighths(int64_t n, int seed);

/// Initialises MPI for a single-process test run (finalised at exit).
void ensure_mpi();

/// Whether this program's device cases (test suite "cuda") can run here; `why` says why not.
/// Defined once per test program (one GPU for test_cuda; one per rank for test_cuda_mpi).
/// cuda_main.cpp skips the suite when false, and the program then exits with 77, CTest's
/// SKIP_RETURN_CODE for these tests: without a GPU they are reported skipped, never passed.
[[nodiscard]] bool devices_usable(std::string& why);

}  // namespace cleave::executor::test

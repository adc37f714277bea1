#include "tests/cuda/cuda_fixture.hpp"

#include "executor/cpu/cpu_backend.hpp"
#include "executor/cuda/cuda_backend.hpp"

#include <cmath>
#include <cstdint>
#include <stdexcept>

#include <doctest/doctest.h>
#include <mpi.h>

namespace cleave::executor::test {

namespace {

struct MpiSession {
    MpiSession() {
        int initialised = 0;
        MPI_Initialized(&initialised);
        if (initialised == 0) {
            int provided = 0;
            // Not a doctest assertion: cuda_main.cpp calls this before any test case runs.
            if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) {
                throw std::runtime_error("MPI_Init_thread failed");
            }
            owned = true;
        }
    }

    ~MpiSession() {
        int finalised = 0;
        MPI_Finalized(&finalised);
        if (owned && finalised == 0) {
            MPI_Finalize();
        }
    }

    MpiSession(const MpiSession&) = delete;
    MpiSession& operator=(const MpiSession&) = delete;

    bool owned = false;
};

}  // namespace

void ensure_mpi() {
    static MpiSession session;
}

Fixture::Fixture(const BackendOptions& gpu_options) {
    ensure_mpi();
    cpu_ = make_cpu_backend({});
    gpu_ = make_cuda_backend(gpu_options);
}

Pair Fixture::tensor(const std::vector<float>& values) {
    Pair p = zeros(static_cast<int64_t>(values.size()));
    cpu_->upload(p(Side::cpu), values);
    gpu_->upload(p(Side::gpu), values);
    return p;
}

Pair Fixture::zeros(int64_t n) {
    Pair p;
    p.buf[0] = Buffer(*cpu_, n);
    p.buf[1] = Buffer(*gpu_, n);
    return p;
}

std::array<std::vector<float>, 2> Fixture::read(const Pair& p) {
    std::array<std::vector<float>, 2> out;
    out[0].resize(static_cast<size_t>(p.size()));
    out[1].resize(static_cast<size_t>(p.size()));
    cpu_->download(out[0], p(Side::cpu));
    gpu_->download(out[1], p(Side::gpu));
    return out;
}

void Fixture::expect_equal(const Pair& p, const std::string& what) {
    const auto [c, g] = read(p);
    int64_t bad = 0;
    for (size_t i = 0; i < c.size(); ++i) {
        if (c[i] != g[i] && bad++ < 5) {
            MESSAGE(what << "[" << i << "]: cpu " << c[i] << " cuda " << g[i]);
        }
    }
    CHECK_MESSAGE(bad == 0, what << ": " << bad << " of " << c.size() << " elements differ");
}

void Fixture::expect_close(const Pair& p, const std::string& what, double rel_tol, double abs_tol) {
    const auto [c, g] = read(p);
    int64_t bad = 0;
    for (size_t i = 0; i < c.size(); ++i) {
        const double err = std::fabs(static_cast<double>(g[i]) - c[i]);
        const bool ok = err <= abs_tol + rel_tol * std::fabs(static_cast<double>(c[i]));
        if (!ok && bad++ < 5) {
            MESSAGE(what << "[" << i << "]: cpu " << c[i] << " cuda " << g[i]);
        }
    }
    CHECK_MESSAGE(bad == 0, what << ": " << bad << " of " << c.size() << " elements differ");
}

namespace {

// A well-mixed hash of (i, seed) (splitmix64's finaliser) reduced to [0, m).
int64_t mix(int64_t i, int seed, int64_t m) {
    uint64_t x = static_cast<uint64_t>(i) * 0x9E3779B97F4A7C15ull +
                 static_cast<uint64_t>(seed) * 0xBF58476D1CE4E5B9ull;
    x ^= x >> 30;
    x *= 0x94D049BB133111EBull;
    x ^= x >> 31;
    return static_cast<int64_t>(x % static_cast<uint64_t>(m));
}

}  // namespace

std::vector<float> ints(int64_t n, int seed, int range) {
    std::vector<float> v(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
        v[static_cast<size_t>(i)] = static_cast<float>(mix(i, seed, 2 * range + 1) - range);
    }
    return v;
}

std::vector<float> eighths(int64_t n, int seed) {
    std::vector<float> v(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
        v[static_cast<size_t>(i)] = static_cast<float>(mix(i, seed, 33) - 16) / 8.0f;
    }
    return v;
}

}  // namespace cleave::executor::test

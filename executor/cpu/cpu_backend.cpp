#include "executor/cpu/cpu_backend.hpp"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <new>
#include <sstream>
#include <thread>
#include <vector>

#include <Eigen/Core>

namespace cleave::executor {

namespace {

using MatRM = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using CMap = Eigen::Map<const MatRM>;
using Map = Eigen::Map<MatRM>;

constexpr int64_t alignment_B = 64;

void need_size(View v, int64_t n, const char* what) {
    CLEAVE_ASSERT(v.data != nullptr || n == 0, what);
    CLEAVE_ASSERT(v.size >= n, what);
}

MPI_Op to_mpi(ReduceOp op) {
    return op == ReduceOp::max ? MPI_MAX : MPI_SUM;
}

}  // namespace

std::unique_ptr<Backend> make_cpu_backend(const BackendOptions& options) {
    return std::make_unique<CpuBackend>(options);
}

CpuBackend::CpuBackend(const BackendOptions& options)
    : groups_(options.timeout_s)
    , poison_uninit_(options.poison_uninit)
    , emulate_packing_(options.emulate_packing) {}

CpuBackend::~CpuBackend() {
    // Sends still in flight at destruction belong to a failed run; their buffers must outlive
    // MPI's use of them, so they are leaked rather than freed under MPI.
    for (auto& s : sends_) {
        if (s.req != MPI_REQUEST_NULL) {
            new std::vector<float>(std::move(s.staged));
        }
    }
    for (auto& [ptr, count] : allocations_) {
        std::free(const_cast<float*>(ptr));
    }
    for (auto& [size, ptr] : cached_) {
        std::free(ptr);
    }
}

std::string CpuBackend::device_name() const {
    std::ostringstream os;
    os << "CPU (" << std::thread::hardware_concurrency() << " hardware threads, Eigen "
       << EIGEN_WORLD_VERSION << "." << EIGEN_MAJOR_VERSION << "." << EIGEN_MINOR_VERSION << ")";
    return os.str();
}

View CpuBackend::alloc(int64_t count) {
    return take(count, true);
}

View CpuBackend::alloc_uninit(int64_t count) {
    return take(count, false);
}

View CpuBackend::take(int64_t count, bool zero) {
    CLEAVE_ASSERT(count >= 0, "alloc: negative count");
    if (count == 0) {
        return {};
    }
    const int64_t bytes = count * static_cast<int64_t>(sizeof(float));
    const int64_t rounded = (bytes + alignment_B - 1) / alignment_B * alignment_B;
    void* p = nullptr;
    if (auto hit = cached_.find(rounded); hit != cached_.end()) {
        p = hit->second;
        cached_.erase(hit);
    } else {
        p = std::aligned_alloc(alignment_B, static_cast<size_t>(rounded));
        if (p == nullptr && !cached_.empty()) {  // give the cache back and try once more
            for (auto& [size, ptr] : cached_) {
                std::free(ptr);
            }
            cached_.clear();
            p = std::aligned_alloc(alignment_B, static_cast<size_t>(rounded));
        }
    }
    if (p == nullptr) {
        throw BackendError("cpu backend: out of memory allocating " + std::to_string(bytes) +
                           " bytes (" + std::to_string(in_use_B_) + " bytes in use)");
    }
    auto* f = static_cast<float*>(p);
    if (zero) {
        std::memset(p, 0, static_cast<size_t>(rounded));
    } else if (poison_uninit_) {
        std::fill(f, f + count, std::numeric_limits<float>::quiet_NaN());
    }
    allocations_.emplace(f, bytes);
    in_use_B_ += bytes;
    peak_B_ = std::max(peak_B_, in_use_B_);
    return {f, count};
}

void CpuBackend::free(View v) {
    if (v.data == nullptr) {
        return;
    }
    auto it = allocations_.find(v.data);
    CLEAVE_ASSERT(it != allocations_.end(), "free: not a view returned by alloc()");
    in_use_B_ -= it->second;
    packed_.erase(v.data);
    const int64_t rounded = (it->second + alignment_B - 1) / alignment_B * alignment_B;
    allocations_.erase(it);
    cached_.emplace(rounded, v.data);
}

namespace {

// fp32 -> bf16 -> fp32, round to nearest even (the CUDA backend's __float2bfloat16_rn).
float round_bf16(float x) {
    uint32_t u = 0;
    std::memcpy(&u, &x, sizeof u);
    u += 0x7FFFu + ((u >> 16) & 1u);
    u &= 0xFFFF0000u;
    float r = 0.0f;
    std::memcpy(&r, &u, sizeof r);
    return r;
}

}  // namespace

// Issue 17, BackendOptions::emulate_packing: what the CUDA backend's 16-bit storage does to the
// values, with NaN in the buffer meanwhile; otherwise the CPU backend stores fp32 (no-op).
View CpuBackend::pack_activation(View x) {
    if (!emulate_packing_ || x.data == nullptr || packed_.count(x.data) == 1) {
        return x;
    }
    std::vector<float> kept(x.data, x.data + x.size);
    for (float& v : kept) {
        v = round_bf16(v);
    }
    std::fill(x.data, x.data + x.size, std::numeric_limits<float>::quiet_NaN());
    packed_.emplace(x.data, std::move(kept));
    return x;
}

View CpuBackend::unpack_activation(View x) {
    const auto it = packed_.find(x.data);
    if (it == packed_.end()) {
        return x;
    }
    std::copy(it->second.begin(), it->second.end(), x.data);
    packed_.erase(it);
    return x;
}

void CpuBackend::upload(View dst, std::span<const float> src) {
    CLEAVE_ASSERT(static_cast<int64_t>(src.size()) == dst.size, "upload: size mismatch");
    std::copy(src.begin(), src.end(), dst.data);
}

void CpuBackend::download(std::span<float> dst, View src) {
    CLEAVE_ASSERT(static_cast<int64_t>(dst.size()) == src.size, "download: size mismatch");
    std::copy(src.data, src.data + src.size, dst.begin());
}

void CpuBackend::copy(View dst, View src) {
    CLEAVE_ASSERT(dst.size == src.size, "copy: size mismatch");
    std::copy(src.data, src.data + src.size, dst.data);
}

void CpuBackend::fill(View x, float value) {
    std::fill(x.data, x.data + x.size, value);
}

void CpuBackend::gemm(Trans ta,
                      Trans tb,
                      int64_t m,
                      int64_t n,
                      int64_t k,
                      float alpha,
                      View a,
                      View b,
                      float beta,
                      View c) {
    need_size(a, m * k, "gemm: A too small");
    need_size(b, k * n, "gemm: B too small");
    need_size(c, m * n, "gemm: C too small");
    const bool at = ta == Trans::yes;
    const bool bt = tb == Trans::yes;
    CMap A(a.data, at ? k : m, at ? m : k);
    CMap B(b.data, bt ? n : k, bt ? k : n);
    Map C(c.data, m, n);
    if (beta == 0.0f) {
        C.setZero();
    } else if (beta != 1.0f) {
        C *= beta;
    }
    if (!at && !bt) {
        C.noalias() += alpha * A * B;
    } else if (at && !bt) {
        C.noalias() += alpha * A.transpose() * B;
    } else if (!at && bt) {
        C.noalias() += alpha * A * B.transpose();
    } else {
        C.noalias() += alpha * A.transpose() * B.transpose();
    }
}

void CpuBackend::axpy(float alpha, View x, View y) {
    CLEAVE_ASSERT(x.size == y.size, "axpy: size mismatch");
    for (int64_t i = 0; i < x.size; ++i) {
        y.data[i] += alpha * x.data[i];
    }
}

void CpuBackend::scale(View x, float alpha) {
    for (int64_t i = 0; i < x.size; ++i) {
        x.data[i] *= alpha;
    }
}

void CpuBackend::add_bias(View x, int64_t rows, int64_t cols, View bias) {
    need_size(x, rows * cols, "add_bias: x too small");
    need_size(bias, cols, "add_bias: bias too small");
    for (int64_t r = 0; r < rows; ++r) {
        float* row = x.data + r * cols;
        for (int64_t c = 0; c < cols; ++c) {
            row[c] += bias.data[c];
        }
    }
}

void CpuBackend::bias_grad(View dy, int64_t rows, int64_t cols, View dbias) {
    need_size(dy, rows * cols, "bias_grad: dy too small");
    need_size(dbias, cols, "bias_grad: dbias too small");
    for (int64_t r = 0; r < rows; ++r) {
        const float* row = dy.data + r * cols;
        for (int64_t c = 0; c < cols; ++c) {
            dbias.data[c] += row[c];
        }
    }
}

// ---- communication ------------------------------------------------------------------------

Group CpuBackend::create_group(int color, int key, const std::string& label) {
    return groups_.create(color, key, label);
}

void CpuBackend::all_reduce(Group g, View x, ReduceOp op) {
    MPI_Request req = MPI_REQUEST_NULL;
    CLEAVE_MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE,
                                    x.data,
                                    detail::mpi_count(x.size),
                                    MPI_FLOAT,
                                    to_mpi(op),
                                    groups_.comm(g),
                                    &req));
    groups_.wait(req, g, "all_reduce", std::to_string(x.size) + " floats");
}

void CpuBackend::all_gather(Group g, View in, View out) {
    CLEAVE_ASSERT(out.size == in.size * groups_.size(g), "all_gather: out.size != in.size * n");
    MPI_Request req = MPI_REQUEST_NULL;
    const int n = detail::mpi_count(in.size);
    CLEAVE_MPI_CHECK(
        MPI_Iallgather(in.data, n, MPI_FLOAT, out.data, n, MPI_FLOAT, groups_.comm(g), &req));
    groups_.wait(req, g, "all_gather", std::to_string(in.size) + " floats per rank");
}

void CpuBackend::reduce_scatter(Group g, View in, View out) {
    CLEAVE_ASSERT(in.size == out.size * groups_.size(g), "reduce_scatter: in.size != out.size * n");
    MPI_Request req = MPI_REQUEST_NULL;
    CLEAVE_MPI_CHECK(MPI_Ireduce_scatter_block(
        in.data, out.data, detail::mpi_count(out.size), MPI_FLOAT, MPI_SUM, groups_.comm(g), &req));
    groups_.wait(req, g, "reduce_scatter", std::to_string(out.size) + " floats per rank");
}

void CpuBackend::broadcast(Group g, View x, int root) {
    MPI_Request req = MPI_REQUEST_NULL;
    CLEAVE_MPI_CHECK(
        MPI_Ibcast(x.data, detail::mpi_count(x.size), MPI_FLOAT, root, groups_.comm(g), &req));
    groups_.wait(req, g, "broadcast", "root " + std::to_string(root));
}

void CpuBackend::send(Group g, View x, int peer, int tag) {
    CLEAVE_ASSERT(tag >= 0 && tag < 32768, "send: tag out of range");
    retire_completed_sends();
    PendingSend s;
    s.staged.assign(x.data, x.data + x.size);
    s.group = g;
    s.peer = peer;
    s.tag = tag;
    CLEAVE_MPI_CHECK(MPI_Isend(
        s.staged.data(), detail::mpi_count(x.size), MPI_FLOAT, peer, tag, groups_.comm(g), &s.req));
    sends_.push_back(std::move(s));
}

void CpuBackend::recv(Group g, View x, int peer, int tag) {
    CLEAVE_ASSERT(tag >= 0 && tag < 32768, "recv: tag out of range");
    MPI_Request req = MPI_REQUEST_NULL;
    CLEAVE_MPI_CHECK(
        MPI_Irecv(x.data, detail::mpi_count(x.size), MPI_FLOAT, peer, tag, groups_.comm(g), &req));
    groups_.wait(
        req, g, "recv", "from rank " + std::to_string(peer) + " tag " + std::to_string(tag));
}

// MPI_Alltoallv with int counts and displacements (element counts checked to fit).
void CpuBackend::all_to_all_v(Group g,
                              View send,
                              std::span<const int64_t> send_counts,
                              View recv,
                              std::span<const int64_t> recv_counts) {
    const auto n = static_cast<size_t>(groups_.size(g));
    CLEAVE_ASSERT(send_counts.size() == n && recv_counts.size() == n,
                  "all_to_all_v: one count per group rank");
    std::vector<int> sc(n), sd(n), rc(n), rd(n);
    int64_t s_off = 0;
    int64_t r_off = 0;
    for (size_t p = 0; p < n; ++p) {
        sc[p] = detail::mpi_count(send_counts[p]);
        sd[p] = detail::mpi_count(s_off);
        rc[p] = detail::mpi_count(recv_counts[p]);
        rd[p] = detail::mpi_count(r_off);
        s_off += send_counts[p];
        r_off += recv_counts[p];
    }
    CLEAVE_ASSERT(s_off <= send.size && r_off <= recv.size, "all_to_all_v: buffer too small");
    MPI_Request req = MPI_REQUEST_NULL;
    CLEAVE_MPI_CHECK(MPI_Ialltoallv(send.data,
                                    sc.data(),
                                    sd.data(),
                                    MPI_FLOAT,
                                    recv.data,
                                    rc.data(),
                                    rd.data(),
                                    MPI_FLOAT,
                                    groups_.comm(g),
                                    &req));
    groups_.wait(req,
                 g,
                 "all_to_all_v",
                 std::to_string(s_off) + " floats out, " + std::to_string(r_off) + " in");
}

void CpuBackend::gather_rows(View x, int64_t cols, std::span<const int64_t> rows, View out) {
    need_size(out, static_cast<int64_t>(rows.size()) * cols, "gather_rows: out too small");
    for (size_t i = 0; i < rows.size(); ++i) {
        CLEAVE_ASSERT(rows[i] >= 0 && (rows[i] + 1) * cols <= x.size, "gather_rows: bad row");
        std::memcpy(out.data + static_cast<int64_t>(i) * cols,
                    x.data + rows[i] * cols,
                    static_cast<size_t>(cols) * sizeof(float));
    }
}

void CpuBackend::retire_completed_sends() {
    std::erase_if(sends_, [](PendingSend& s) {
        int done = 0;
        CLEAVE_MPI_CHECK(MPI_Test(&s.req, &done, MPI_STATUS_IGNORE));
        return done != 0;
    });
}

void CpuBackend::synchronize() {
    for (auto& s : sends_) {
        groups_.wait(s.req,
                     s.group,
                     "send",
                     "to rank " + std::to_string(s.peer) + " tag " + std::to_string(s.tag));
    }
    sends_.clear();
}

double CpuBackend::clock_s() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

}  // namespace cleave::executor

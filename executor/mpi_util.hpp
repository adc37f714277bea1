#pragma once
// MPI plumbing shared by the backends: checked calls, per-group communicators made with
// MPI_Comm_split, and waiting on nonblocking requests with a deadline (the --timeout mechanism).
// Included by backend implementations only; the workload never sees MPI.

#include "executor/backend.hpp"

#include <string>
#include <vector>

#include <mpi.h>

namespace cleave::executor::detail {

/// Throws BackendError "MPI call `call` failed at file:line: <MPI_Error_string>" for rc !=
/// MPI_SUCCESS. Requires MPI_ERRORS_RETURN on the communicator (set by MpiGroups).
void mpi_check(int rc, const char* call, const char* file, int line);

}  // namespace cleave::executor::detail

#define CLEAVE_MPI_CHECK(call)                                                                     \
    ::cleave::executor::detail::mpi_check((call), #call, __FILE__, __LINE__)

namespace cleave::executor::detail {

/// The communicators of one process: one per group created, never MPI_COMM_WORLD for traffic.
class MpiGroups {
public:
    /// Sets MPI_ERRORS_RETURN on MPI_COMM_WORLD. Precondition: MPI is initialised.
    explicit MpiGroups(double timeout_s);
    ~MpiGroups();
    MpiGroups(const MpiGroups&) = delete;
    MpiGroups& operator=(const MpiGroups&) = delete;

    [[nodiscard]] int world_rank() const { return world_rank_; }

    [[nodiscard]] int world_size() const { return world_size_; }

    /// MPI_Comm_split of MPI_COMM_WORLD (collective over the world).
    [[nodiscard]] Group create(int color, int key, const std::string& label);
    [[nodiscard]] MPI_Comm comm(Group g) const;
    [[nodiscard]] int size(Group g) const;
    [[nodiscard]] int rank(Group g) const;
    [[nodiscard]] const std::string& label(Group g) const;

    /// Polls `req` until it completes; throws CommTimeout naming this rank, the group, `op` and
    /// `detail` when the timeout passes first. Pauses between polls as poll_pause_us says.
    void wait(MPI_Request& req, Group g, const char* op, const std::string& detail) const;

    /// More ranks on this host than it has hardware threads (set at construction).
    [[nodiscard]] bool oversubscribed() const { return oversubscribed_; }

    [[nodiscard]] double timeout_s() const { return timeout_s_; }

private:
    struct Entry {
        MPI_Comm comm = MPI_COMM_NULL;
        std::string label;
        int size = 0;
        int rank = 0;
    };

    const Entry& entry(Group g) const;

    double timeout_s_ = 0.0;
    bool oversubscribed_ = false;
    int world_rank_ = 0;
    int world_size_ = 1;
    std::vector<Entry> groups_;
};

/// How long MpiGroups::wait pauses before its next MPI_Test, in microseconds, after waiting
/// `waited_s`; 0: only yield the core. A nonblocking collective moves bytes only while its ranks
/// call into MPI (Open MPI has no progress thread: `ompi_info` "OMPI progress: no"), so a rank
/// with a core of its own polls without sleeping, as Open MPI's blocking calls do; a sleep of
/// 0.5 ms between polls made a 110 MB all-reduce over 2 ranks take 906 ms instead of 71 ms
/// (vader without single-copy, 32 KiB fragments, each needing a poll). Only an oversubscribed
/// host (more ranks than hardware threads) sleeps, after 2 ms, so that idle ranks leave the
/// cores to the busy ones.
[[nodiscard]] int poll_pause_us(double waited_s, bool oversubscribed);

/// Element count as MPI's int; throws BackendError when it does not fit.
[[nodiscard]] int mpi_count(int64_t n);

}  // namespace cleave::executor::detail

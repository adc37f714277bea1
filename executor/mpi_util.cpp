#include "executor/mpi_util.hpp"

#include <chrono>
#include <sstream>
#include <thread>

#include <climits>

namespace cleave::executor::detail {

void mpi_check(int rc, const char* call, const char* file, int line) {
    if (rc == MPI_SUCCESS) {
        return;
    }
    char text[MPI_MAX_ERROR_STRING] = {};
    int len = 0;
    if (MPI_Error_string(rc, text, &len) != MPI_SUCCESS) {
        len = 0;
    }
    std::ostringstream os;
    os << "MPI call `" << call << "` failed at " << file << ":" << line << ": "
       << std::string(text, static_cast<size_t>(len)) << " (code " << rc << ")";
    throw BackendError(os.str());
}

int poll_pause_us(double waited_s, bool oversubscribed) {
    if (!oversubscribed || waited_s < 2e-3) {
        return 0;
    }
    return waited_s < 0.1 ? 50 : 500;
}

namespace {

// Ranks sharing this host (MPI_COMM_TYPE_SHARED) against its online hardware threads; not the
// affinity mask, which mpirun narrows to one core per rank when it binds.
bool host_oversubscribed() {
    MPI_Comm local = MPI_COMM_NULL;
    CLEAVE_MPI_CHECK(
        MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &local));
    int ranks = 0;
    CLEAVE_MPI_CHECK(MPI_Comm_size(local, &ranks));
    MPI_Comm_free(&local);
    const unsigned threads = std::thread::hardware_concurrency();
    return threads > 0 && static_cast<unsigned>(ranks) > threads;
}

}  // namespace

int mpi_count(int64_t n) {
    if (n < 0 || n > INT_MAX) {
        throw BackendError("message of " + std::to_string(n) +
                           " elements does not fit MPI's int count");
    }
    return static_cast<int>(n);
}

MpiGroups::MpiGroups(double timeout_s)
    : timeout_s_(timeout_s) {
    CLEAVE_MPI_CHECK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    CLEAVE_MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &world_rank_));
    CLEAVE_MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &world_size_));
    oversubscribed_ = host_oversubscribed();
}

MpiGroups::~MpiGroups() {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (finalized != 0) {
        return;
    }
    for (auto& e : groups_) {
        if (e.comm != MPI_COMM_NULL) {
            MPI_Comm_free(&e.comm);  // failure while tearing down is not actionable
        }
    }
}

Group MpiGroups::create(int color, int key, const std::string& label) {
    Entry e;
    e.label = label;
    CLEAVE_MPI_CHECK(MPI_Comm_split(MPI_COMM_WORLD, color, key, &e.comm));
    CLEAVE_MPI_CHECK(MPI_Comm_set_errhandler(e.comm, MPI_ERRORS_RETURN));
    CLEAVE_MPI_CHECK(MPI_Comm_size(e.comm, &e.size));
    CLEAVE_MPI_CHECK(MPI_Comm_rank(e.comm, &e.rank));
    groups_.push_back(std::move(e));
    return Group{static_cast<int>(groups_.size()) - 1};
}

const MpiGroups::Entry& MpiGroups::entry(Group g) const {
    CLEAVE_ASSERT(g.id >= 0 && static_cast<size_t>(g.id) < groups_.size(), "unknown group");
    return groups_[static_cast<size_t>(g.id)];
}

MPI_Comm MpiGroups::comm(Group g) const {
    return entry(g).comm;
}

int MpiGroups::size(Group g) const {
    return entry(g).size;
}

int MpiGroups::rank(Group g) const {
    return entry(g).rank;
}

const std::string& MpiGroups::label(Group g) const {
    return entry(g).label;
}

void MpiGroups::wait(MPI_Request& req, Group g, const char* op, const std::string& detail) const {
    using clock = std::chrono::steady_clock;
    const auto start = clock::now();
    for (;;) {
        int done = 0;
        CLEAVE_MPI_CHECK(MPI_Test(&req, &done, MPI_STATUS_IGNORE));
        if (done != 0) {
            return;
        }
        const double waited_s = std::chrono::duration<double>(clock::now() - start).count();
        if (timeout_s_ > 0.0 && waited_s > timeout_s_) {
            const Entry& e = entry(g);
            std::ostringstream os;
            os << "rank " << world_rank_ << ": " << op << " on group '" << e.label << "' (rank "
               << e.rank << " of " << e.size << ")" << (detail.empty() ? "" : ", ") << detail
               << ": not done after " << timeout_s_ << " s";
            throw CommTimeout(os.str());
        }
        const int pause_us = poll_pause_us(waited_s, oversubscribed_);
        if (pause_us == 0) {
            std::this_thread::yield();
        } else {
            std::this_thread::sleep_for(std::chrono::microseconds(pause_us));
        }
    }
}

}  // namespace cleave::executor::detail

#pragma once

// MPI for the commands that run ranks (calibrate, validate): initialises MPI unless something
// already did, finalises only what it initialised, and aborts the whole job on a failure that
// may leave other ranks waiting in a collective.

namespace cleave::calibrate {

class MpiSession {
public:
    /// MPI_Init_thread(FUNNELED) when MPI is not initialised yet. Throws BackendError on failure.
    MpiSession();
    ~MpiSession();
    MpiSession(const MpiSession&) = delete;
    MpiSession& operator=(const MpiSession&) = delete;

    [[nodiscard]] int rank() const { return rank_; }

    [[nodiscard]] int size() const { return size_; }

    /// MPI_Abort(MPI_COMM_WORLD, code) when more than one rank runs; otherwise returns.
    void abort_if_parallel(int code) const;

private:
    bool owned_ = false;
    int rank_ = 0;
    int size_ = 1;
};

}  // namespace cleave::calibrate

#include "calibrate/mpi_session.hpp"

#include "core/errors.hpp"

#include <mpi.h>

namespace cleave::calibrate {

MpiSession::MpiSession() {
    int initialised = 0;
    MPI_Initialized(&initialised);
    if (initialised == 0) {
        int provided = 0;
        if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) {
            throw BackendError("MPI_Init_thread failed");
        }
        owned_ = true;
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
}

MpiSession::~MpiSession() {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (owned_ && finalized == 0) {
        MPI_Finalize();
    }
}

void MpiSession::abort_if_parallel(int code) const {
    if (size_ > 1) {
        MPI_Abort(MPI_COMM_WORLD, code);
    }
}

}  // namespace cleave::calibrate

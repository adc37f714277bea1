#pragma once
// MPI for test programs that build an in-process backend of one rank (no mpirun): initialised on
// first use, finalised at exit. Every test that makes a backend calls ensure_mpi() first.

#include <mpi.h>

namespace cleave::test {

inline void ensure_mpi() {
    struct Session {
        Session() {
            int init = 0;
            MPI_Initialized(&init);
            if (init == 0) {
                MPI_Init(nullptr, nullptr);
            }
        }

        ~Session() { MPI_Finalize(); }

        Session(const Session&) = delete;
        Session& operator=(const Session&) = delete;
    };

    static const Session session;
}

}  // namespace cleave::test

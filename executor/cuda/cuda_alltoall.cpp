// The CUDA backend's all-to-all with per-peer counts (issue 16: the MoE token dispatch and
// combine on the expert-parallel group). NCCL has no alltoallv; the NCCL documentation's
// point-to-point example builds one from ncclSend / ncclRecv to every peer inside one
// ncclGroupStart / ncclGroupEnd (NCCL User Guide, "Point-to-point communication: all-to-all").
#include "executor/cuda/cuda_backend_impl.hpp"

#include <string>

namespace cleave::executor::gpu {

void CudaBackend::all_to_all_v(Group g,
                               View send,
                               std::span<const int64_t> send_counts,
                               View recv,
                               std::span<const int64_t> recv_counts) {
    const auto n = static_cast<size_t>(groups_.size(g));
    CLEAVE_ASSERT(send_counts.size() == n && recv_counts.size() == n,
                  "all_to_all_v: one count per group rank");
    require_live();
    int64_t s_off = 0;
    int64_t r_off = 0;
    for (size_t p = 0; p < n; ++p) {
        s_off += send_counts[p];
        r_off += recv_counts[p];
    }
    CLEAVE_ASSERT(s_off <= send.size && r_off <= recv.size, "all_to_all_v: buffer too small");
    if (s_off == 0 && r_off == 0) {
        return;
    }
    const ncclComm_t comm = comm_group(g).comm;
    s_off = 0;
    r_off = 0;
    CLEAVE_NCCL_CHECK(ncclGroupStart());
    for (size_t p = 0; p < n; ++p) {
        const int peer = static_cast<int>(p);
        if (send_counts[p] > 0) {
            CLEAVE_NCCL_CHECK(ncclSend(send.data + s_off,
                                       static_cast<size_t>(send_counts[p]),
                                       ncclFloat,
                                       peer,
                                       comm,
                                       stream_));
        }
        if (recv_counts[p] > 0) {
            CLEAVE_NCCL_CHECK(ncclRecv(recv.data + r_off,
                                       static_cast<size_t>(recv_counts[p]),
                                       ncclFloat,
                                       peer,
                                       comm,
                                       stream_));
        }
        s_off += send_counts[p];
        r_off += recv_counts[p];
    }
    CLEAVE_NCCL_CHECK(ncclGroupEnd());
    wait_compute({g,
                  "all_to_all_v",
                  std::to_string(s_off) + " floats out, " + std::to_string(r_off) + " in"});
}

}  // namespace cleave::executor::gpu

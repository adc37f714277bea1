// The CUDA backend's posted pipeline receives (issue 17): recv_start() puts an ncclRecv on the
// incoming channel's own stream and returns; recv_wait() makes the compute stream wait for it
// on the device. The host never waits for a posted receive itself: the next host wait (a
// collective, clock_s, synchronize) covers it, checks its tag, and names it if it times out.
// See docs/executor.md for why this holds under CUDA_DEVICE_MAX_CONNECTIONS=1.
#include "executor/cuda/cuda_backend_impl.hpp"

#include <algorithm>
#include <sstream>

namespace cleave::executor::gpu {

// A pinned tag slot no posted receive holds ([0] is recv()'s).
int CudaBackend::free_tag_slot() const {
    for (int slot = 1; slot < tag_slots; ++slot) {
        const bool used = std::any_of(
            posted_.begin(), posted_.end(), [slot](const PostedRecv& r) { return r.slot == slot; });
        if (!used) {
            return slot;
        }
    }
    throw BackendError("cuda backend: more than " + std::to_string(tag_slots - 1) +
                       " posted receives outstanding");
}

PendingRecv CudaBackend::recv_start(Group g, View x, int peer, int tag) {
    CLEAVE_ASSERT(tag >= 0 && tag < 32768, "recv_start: tag out of range");
    require_live();
    if (peer == groups_.rank(g)) {
        return {g, x, peer, tag, -1};  // a message to itself: recv_wait copies it (recv())
    }
    const Channel& ch = channel(g, peer, false);
    PostedRecv r;
    r.id = next_recv_id_++;
    r.group = g;
    r.peer = peer;
    r.tag = tag;
    r.count = x.size;
    r.slot = free_tag_slot();
    // Staged on the channel's stream: the receive depends on nothing issued before it.
    void* staged = nullptr;
    CLEAVE_CUDA_CHECK(cudaMallocAsync(&staged, static_cast<size_t>(x.size + 1) * 4, ch.stream));
    r.staged = static_cast<float*>(staged);
    CLEAVE_CUDA_CHECK(cudaEventCreateWithFlags(&r.done, cudaEventDisableTiming));
    posted_.push_back(r);  // owned from here on (release_posted frees the event)
    CLEAVE_NCCL_CHECK(
        ncclRecv(r.staged, static_cast<size_t>(x.size + 1), ncclFloat, 0, ch.comm, ch.stream));
    CLEAVE_CUDA_CHECK(cudaMemcpyAsync(
        pinned_tag_ + r.slot, r.staged + x.size, sizeof(float), cudaMemcpyDeviceToHost, ch.stream));
    CLEAVE_CUDA_CHECK(cudaEventRecord(r.done, ch.stream));
    return {g, x, peer, tag, r.id};
}

void CudaBackend::recv_wait(const PendingRecv& p) {
    if (p.id < 0) {
        recv(p.group, p.x, p.peer, p.tag);
        return;
    }
    require_live();
    const auto it = std::find_if(
        posted_.begin(), posted_.end(), [&](const PostedRecv& r) { return r.id == p.id; });
    CLEAVE_ASSERT(it != posted_.end() && !it->waited && it->count == p.x.size,
                  "recv_wait: not a pending recv_start()");
    const bool in_order = std::none_of(posted_.begin(), it, [&](const PostedRecv& r) {
        return !r.waited && r.group.id == p.group.id && r.peer == p.peer;
    });
    CLEAVE_ASSERT(in_order, "recv_wait: receives from one peer must be waited in posting order");
    // The compute stream waits on the device; the host goes on issuing work.
    CLEAVE_CUDA_CHECK(cudaStreamWaitEvent(stream_, it->done, 0));
    if (p.x.size > 0) {
        CLEAVE_CUDA_CHECK(cudaMemcpyAsync(p.x.data,
                                          it->staged,
                                          static_cast<size_t>(p.x.size) * 4,
                                          cudaMemcpyDeviceToDevice,
                                          stream_));
    }
    CLEAVE_CUDA_CHECK(cudaFreeAsync(it->staged, stream_));
    it->staged = nullptr;
    it->waited = true;
}

void CudaBackend::check_received_tags() {
    for (auto it = posted_.begin(); it != posted_.end();) {
        if (!it->waited || cudaEventQuery(it->done) != cudaSuccess) {
            ++it;
            continue;
        }
        const PostedRecv r = *it;
        CLEAVE_CUDA_CHECK(cudaEventDestroy(r.done));
        it = posted_.erase(it);
        const float got = pinned_tag_[r.slot];
        if (got != static_cast<float>(r.tag)) {
            throw BackendError(
                describe(
                    {r.group,
                     "recv",
                     "from rank " + std::to_string(r.peer) + " tag " + std::to_string(r.tag)}) +
                ": the next message from that rank has tag " +
                std::to_string(static_cast<int64_t>(got)) +
                "; the CUDA backend delivers the messages between two ranks in the order they "
                "were sent, so sends and receives must be issued in the same order");
        }
    }
}

std::string CudaBackend::pending_recv_note() const {
    std::ostringstream os;
    const char* sep = " (waiting for a posted recv: ";
    for (const PostedRecv& r : posted_) {
        if (cudaEventQuery(r.done) == cudaSuccess) {
            continue;
        }
        os << sep << "from rank " << r.peer << " tag " << r.tag << " on group '"
           << groups_.label(r.group) << "'";
        sep = "; ";
    }
    if (sep[0] == ';') {
        os << ")";
    }
    return os.str();
}

void CudaBackend::release_posted() noexcept {
    for (PostedRecv& r : posted_) {
        if (r.done != nullptr) {
            CLEAVE_CUDA_CHECK_NOEXCEPT(cudaEventDestroy(r.done));
        }
        // A staging buffer not yet handed to recv_wait goes back to the pool with the device.
    }
    posted_.clear();
}

}  // namespace cleave::executor::gpu

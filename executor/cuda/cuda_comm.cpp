// The CUDA backend's communication: NCCL communicators per group (bootstrapped over MPI),
// collectives, point-to-point channels between ring neighbours, and the host waits that enforce
// BackendOptions::timeout_s (ncclCommAbort on expiry). See cuda_backend_impl.hpp for the model.
#include "executor/cuda/cuda_backend_impl.hpp"
#include "executor/cuda/cuda_kernels.hpp"

#include <algorithm>
#include <chrono>
#include <sstream>
#include <thread>
#include <tuple>
#include <utility>

namespace cleave::executor::gpu {

namespace {

// MPI tags of the unique-id exchange for point-to-point channels (one message per direction
// between two ring neighbours, on the group's own MPI communicator).
constexpr int id_tag_upward = 30001;
constexpr int id_tag_downward = 30002;

size_t count_of(View v) {
    return static_cast<size_t>(v.size);
}

struct Link {
    int src = 0;
    int dst = 0;
};

// A global order on links: by the unordered pair, then by direction. Every rank initialises its
// links in this order, so the two-rank rendezvous of ncclCommInitRank never wait in a cycle.
bool link_before(const Link& a, const Link& b) {
    const auto key = [](const Link& l) {
        return std::make_tuple(std::min(l.src, l.dst), std::max(l.src, l.dst), l.src > l.dst);
    };
    return key(a) < key(b);
}

std::vector<Link> ring_links(int rank, int size) {
    const int next = (rank + 1) % size;
    const int prev = (rank + size - 1) % size;
    std::vector<Link> links;
    for (const Link l : {Link{rank, next}, Link{rank, prev}, Link{next, rank}, Link{prev, rank}}) {
        const bool seen = std::any_of(links.begin(), links.end(), [&](const Link& o) {
            return o.src == l.src && o.dst == l.dst;
        });
        if (l.src != l.dst && !seen) {
            links.push_back(l);
        }
    }
    std::sort(links.begin(), links.end(), link_before);
    return links;
}

std::string floats(int64_t n) {
    return std::to_string(n) + " floats";
}

}  // namespace

// ---- groups --------------------------------------------------------------------------------

Group CudaBackend::create_group(int color, int key, const std::string& label) {
    require_live();
    const Group g = groups_.create(color, key, label);
    CLEAVE_ASSERT(static_cast<size_t>(g.id) == comms_.size(), "group ids are dense");
    comms_.emplace_back();
    // nccl-tests bootstrap: the group's rank 0 creates the id, MPI broadcasts it.
    ncclUniqueId id{};
    if (groups_.rank(g) == 0) {
        CLEAVE_NCCL_CHECK(ncclGetUniqueId(&id));
    }
    CLEAVE_MPI_CHECK(MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, groups_.comm(g)));
    CLEAVE_NCCL_CHECK(ncclCommInitRank(&comms_.back().comm, groups_.size(g), id, groups_.rank(g)));
    if (label == "dp" && groups_.size(g) > 1) {
        // Collective over the group, like the rest of create_group.
        CLEAVE_NCCL_CHECK(ncclCommSplit(
            comms_.back().comm, 0, groups_.rank(g), &comms_.back().async_comm, nullptr));
    }
    init_channels(g);
    return g;
}

// ---- overlapped all-reduce (DP gradient buckets) --------------------------------------------

void CudaBackend::all_reduce_start(Group g, View x) {
    require_live();
    const CommGroup& cg = comm_group(g);
    if (cg.async_comm == nullptr) {  // a group of one, or not a DP group: synchronous
        all_reduce(g, x, ReduceOp::sum);
        return;
    }
    if (x.size == 0) {
        return;
    }
    if (dp_stream_ == nullptr) {
        CLEAVE_CUDA_CHECK(cudaStreamCreateWithFlags(&dp_stream_, cudaStreamNonBlocking));
    }
    // At most one bucket in flight: a second all-reduce queued behind a running one would wait
    // for it inside the hardware queue, and with CUDA_DEVICE_MAX_CONNECTIONS=1 (one queue for
    // every stream) hold up every kernel issued after it, receives included (docs/executor.md).
    if (!async_.empty()) {
        const auto t0 = std::chrono::steady_clock::now();
        wait_event(
            async_.back().end,
            {g, "all_reduce (previous gradient bucket)", std::to_string(x.size) + " floats"});
        async_waited_s_ +=
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    }
    async_.emplace_back();  // owned from here on: all_reduce_wait / release free its events
    AsyncReduce& op = async_.back();
    op.group = g;
    CLEAVE_CUDA_CHECK(cudaEventCreateWithFlags(&op.ready, cudaEventDisableTiming));
    CLEAVE_CUDA_CHECK(cudaEventCreate(&op.begin));
    CLEAVE_CUDA_CHECK(cudaEventCreate(&op.end));
    // The bucket's gradients are complete once the compute issued so far is done.
    CLEAVE_CUDA_CHECK(cudaEventRecord(op.ready, stream_));
    CLEAVE_CUDA_CHECK(cudaStreamWaitEvent(dp_stream_, op.ready, 0));
    CLEAVE_CUDA_CHECK(cudaEventRecord(op.begin, dp_stream_));
    CLEAVE_NCCL_CHECK(ncclAllReduce(x.data,
                                    x.data,
                                    static_cast<size_t>(x.size),
                                    ncclFloat,
                                    ncclSum,
                                    cg.async_comm,
                                    dp_stream_));
    CLEAVE_CUDA_CHECK(cudaEventRecord(op.end, dp_stream_));
}

double CudaBackend::all_reduce_wait() {
    if (async_.empty()) {
        return 0.0;
    }
    using clock = std::chrono::steady_clock;
    const auto t0 = clock::now();
    // dp_stream_ runs its all-reduces in order: the last one's end is everyone's.
    wait_event(async_.back().end,
               {async_.back().group,
                "all_reduce (overlapped gradient buckets)",
                std::to_string(async_.size()) + " bucket(s)"});
    const double waited_s =
        async_waited_s_ + std::chrono::duration<double>(clock::now() - t0).count();
    double device_s = 0.0;
    for (AsyncReduce& op : async_) {
        float ms = 0.0f;
        CLEAVE_CUDA_CHECK(cudaEventElapsedTime(&ms, op.begin, op.end));
        device_s += static_cast<double>(ms) * 1e-3;
    }
    release_async();
    return std::max(0.0, device_s - waited_s);
}

void CudaBackend::release_async() noexcept {
    for (AsyncReduce& op : async_) {
        for (cudaEvent_t e : {op.ready, op.begin, op.end}) {
            if (e != nullptr) {
                CLEAVE_CUDA_CHECK_NOEXCEPT(cudaEventDestroy(e));
            }
        }
    }
    async_.clear();
    async_waited_s_ = 0.0;
}

// One two-rank communicator per direction between ring neighbours; the sender of each link
// creates its id and sends it to the receiver over the group's MPI communicator.
void CudaBackend::init_channels(Group g) {
    const int size = groups_.size(g);
    const int rank = groups_.rank(g);
    if (size < 2) {
        return;
    }
    const std::vector<Link> links = ring_links(rank, size);
    std::vector<ncclUniqueId> ids(links.size());
    std::vector<MPI_Request> reqs(links.size(), MPI_REQUEST_NULL);
    for (size_t i = 0; i < links.size(); ++i) {
        const Link& l = links[i];
        const int tag = l.src < l.dst ? id_tag_upward : id_tag_downward;
        if (l.src == rank) {
            CLEAVE_NCCL_CHECK(ncclGetUniqueId(&ids[i]));
            CLEAVE_MPI_CHECK(MPI_Isend(
                &ids[i], sizeof(ncclUniqueId), MPI_BYTE, l.dst, tag, groups_.comm(g), &reqs[i]));
        } else {
            CLEAVE_MPI_CHECK(MPI_Irecv(
                &ids[i], sizeof(ncclUniqueId), MPI_BYTE, l.src, tag, groups_.comm(g), &reqs[i]));
        }
    }
    CLEAVE_MPI_CHECK(MPI_Waitall(static_cast<int>(reqs.size()), reqs.data(), MPI_STATUSES_IGNORE));
    auto& channels = comms_[static_cast<size_t>(g.id)].channels;
    for (size_t i = 0; i < links.size(); ++i) {
        Channel ch;
        ch.outgoing = links[i].src == rank;
        ch.peer = ch.outgoing ? links[i].dst : links[i].src;
        // Within a channel the sender is NCCL rank 0 and the receiver NCCL rank 1.
        CLEAVE_NCCL_CHECK(ncclCommInitRank(&ch.comm, 2, ids[i], ch.outgoing ? 0 : 1));
        channels.push_back(ch);  // owned from here on, even if the stream creation fails
        // Sends (outgoing) or posted receives (incoming) run on the channel's own stream.
        CLEAVE_CUDA_CHECK(
            cudaStreamCreateWithFlags(&channels.back().stream, cudaStreamNonBlocking));
        connect_channel(g, channels.back());
    }
}

// NCCL sets up point-to-point connections on a communicator's first send/recv, and that setup
// blocks the host until the peer takes part (NVIDIA/nccl#783). Inside a schedule where both
// neighbours send first it would deadlock, so one float goes through every channel here, while
// all ranks walk their links in the same global order.
void CudaBackend::connect_channel(Group g, const Channel& ch) {
    auto* probe = static_cast<float*>(temp_alloc(4));
    if (ch.outgoing) {
        CLEAVE_NCCL_CHECK(ncclSend(probe, 1, ncclFloat, 1, ch.comm, stream_));
    } else {
        CLEAVE_NCCL_CHECK(ncclRecv(probe, 1, ncclFloat, 0, ch.comm, stream_));
    }
    temp_free(probe);
    wait_compute({g,
                  "connecting a point-to-point channel",
                  std::string(ch.outgoing ? "to" : "from") + " rank " + std::to_string(ch.peer)});
}

const CudaBackend::CommGroup& CudaBackend::comm_group(Group g) const {
    CLEAVE_ASSERT(g.id >= 0 && static_cast<size_t>(g.id) < comms_.size(), "unknown group");
    return comms_[static_cast<size_t>(g.id)];
}

const CudaBackend::Channel& CudaBackend::channel(Group g, int peer, bool outgoing) const {
    CLEAVE_ASSERT(peer >= 0 && peer < groups_.size(g), "peer outside the group");
    for (const Channel& ch : comm_group(g).channels) {
        if (ch.peer == peer && ch.outgoing == outgoing) {
            return ch;
        }
    }
    throw BackendError("cuda backend: " + std::string(outgoing ? "send to" : "recv from") +
                       " rank " + std::to_string(peer) + " of group '" + groups_.label(g) +
                       "' from its rank " + std::to_string(groups_.rank(g)) +
                       ": only ring neighbours (rank +-1 mod group size) are connected");
}

void CudaBackend::require_live() const {
    if (aborted_) {
        throw BackendError("cuda backend: the NCCL communicators were aborted after an earlier "
                           "failure; no further communication is possible");
    }
}

// ---- collectives (stream-ordered, then waited for with the timeout) -------------------------

void CudaBackend::all_reduce(Group g, View x, ReduceOp op) {
    require_live();
    if (x.size == 0) {
        return;
    }
    CLEAVE_NCCL_CHECK(ncclAllReduce(x.data,
                                    x.data,
                                    count_of(x),
                                    ncclFloat,
                                    op == ReduceOp::max ? ncclMax : ncclSum,
                                    comm_group(g).comm,
                                    stream_));
    wait_compute({g, "all_reduce", floats(x.size)});
}

void CudaBackend::all_gather(Group g, View in, View out) {
    CLEAVE_ASSERT(out.size == in.size * groups_.size(g), "all_gather: out.size != in.size * n");
    require_live();
    if (in.size == 0) {
        return;
    }
    CLEAVE_NCCL_CHECK(
        ncclAllGather(in.data, out.data, count_of(in), ncclFloat, comm_group(g).comm, stream_));
    wait_compute({g, "all_gather", floats(in.size) + " per rank"});
}

void CudaBackend::reduce_scatter(Group g, View in, View out) {
    CLEAVE_ASSERT(in.size == out.size * groups_.size(g), "reduce_scatter: in.size != out.size * n");
    require_live();
    if (out.size == 0) {
        return;
    }
    CLEAVE_NCCL_CHECK(ncclReduceScatter(
        in.data, out.data, count_of(out), ncclFloat, ncclSum, comm_group(g).comm, stream_));
    wait_compute({g, "reduce_scatter", floats(out.size) + " per rank"});
}

void CudaBackend::broadcast(Group g, View x, int root) {
    CLEAVE_ASSERT(root >= 0 && root < groups_.size(g), "broadcast: root outside the group");
    require_live();
    if (x.size == 0) {
        return;
    }
    CLEAVE_NCCL_CHECK(
        ncclBroadcast(x.data, x.data, count_of(x), ncclFloat, root, comm_group(g).comm, stream_));
    wait_compute({g, "broadcast", "root " + std::to_string(root) + ", " + floats(x.size)});
}

// ---- point to point ------------------------------------------------------------------------
// Every message carries its tag as one trailing float (exact: tags are below 2^15). NCCL matches
// messages between two ranks in order, not by tag, so the receiver checks that the tag is the
// one it asked for and reports a mismatch instead of delivering the wrong tensor.

void CudaBackend::send(Group g, View x, int peer, int tag) {
    CLEAVE_ASSERT(tag >= 0 && tag < 32768, "send: tag out of range");
    require_live();
    retire_completed_sends();
    if (peer == groups_.rank(g)) {
        send_to_self(g, x, tag);
        return;
    }
    const Channel& ch = channel(g, peer, true);
    // Stage a copy on the compute stream so x may be reused at once; the channel's stream waits
    // for the copy, sends, and frees the staging buffer when the send is done.
    auto* staged = static_cast<float*>(temp_alloc((x.size + 1) * 4));
    if (x.size > 0) {
        CLEAVE_CUDA_CHECK(
            cudaMemcpyAsync(staged, x.data, count_of(x) * 4, cudaMemcpyDeviceToDevice, stream_));
    }
    CLEAVE_CUDA_CHECK(launch_fill(staged + x.size, 1, static_cast<float>(tag), stream_));
    cudaEvent_t staged_ready = nullptr;
    CLEAVE_CUDA_CHECK(cudaEventCreateWithFlags(&staged_ready, cudaEventDisableTiming));
    const cudaError_t rc_record = cudaEventRecord(staged_ready, stream_);
    const cudaError_t rc_wait =
        rc_record == cudaSuccess ? cudaStreamWaitEvent(ch.stream, staged_ready, 0) : rc_record;
    CLEAVE_CUDA_CHECK(cudaEventDestroy(staged_ready));  // released once the wait is satisfied
    CLEAVE_CUDA_CHECK(rc_wait);
    CLEAVE_NCCL_CHECK(ncclSend(staged, count_of(x) + 1, ncclFloat, 1, ch.comm, ch.stream));
    CLEAVE_CUDA_CHECK(cudaFreeAsync(staged, ch.stream));
    PendingSend p;
    p.group = g;
    p.peer = peer;
    p.tag = tag;
    CLEAVE_CUDA_CHECK(cudaEventCreateWithFlags(&p.done, cudaEventDisableTiming));
    sends_.push_back(p);  // owned from here on (destroyed by synchronize() or release())
    CLEAVE_CUDA_CHECK(cudaEventRecord(p.done, ch.stream));
}

void CudaBackend::recv(Group g, View x, int peer, int tag) {
    CLEAVE_ASSERT(tag >= 0 && tag < 32768, "recv: tag out of range");
    require_live();
    if (peer == groups_.rank(g)) {
        recv_from_self(g, x, tag);
        return;
    }
    const Channel& ch = channel(g, peer, false);
    CLEAVE_ASSERT(std::none_of(posted_.begin(),
                               posted_.end(),
                               [&](const PostedRecv& r) {
                                   return !r.waited && r.group.id == g.id && r.peer == peer;
                               }),
                  "recv: a recv_start() from the same peer is still pending");
    auto* staged = static_cast<float*>(temp_alloc((x.size + 1) * 4));
    CLEAVE_NCCL_CHECK(ncclRecv(staged, count_of(x) + 1, ncclFloat, 0, ch.comm, stream_));
    if (x.size > 0) {
        CLEAVE_CUDA_CHECK(
            cudaMemcpyAsync(x.data, staged, count_of(x) * 4, cudaMemcpyDeviceToDevice, stream_));
    }
    CLEAVE_CUDA_CHECK(cudaMemcpyAsync(
        pinned_tag_, staged + x.size, sizeof(float), cudaMemcpyDeviceToHost, stream_));
    temp_free(staged);
    const std::string what = "from rank " + std::to_string(peer) + " tag " + std::to_string(tag);
    wait_compute({g, "recv", what + ", " + floats(x.size)});
    if (*pinned_tag_ != static_cast<float>(tag)) {
        throw BackendError(
            describe({g, "recv", what}) + ": the next message from that rank has tag " +
            std::to_string(static_cast<int64_t>(*pinned_tag_)) +
            "; the CUDA backend delivers the messages between two ranks in the order "
            "they were sent, so sends and receives must be issued in the same order");
    }
}

void CudaBackend::send_to_self(Group g, View x, int tag) {
    SelfMessage m;
    m.count = x.size;
    m.tag = tag;
    m.staged = static_cast<float*>(temp_alloc(x.size * 4));
    comms_[static_cast<size_t>(g.id)].to_self.push_back(m);
    if (x.size > 0) {
        CLEAVE_CUDA_CHECK(
            cudaMemcpyAsync(m.staged, x.data, count_of(x) * 4, cudaMemcpyDeviceToDevice, stream_));
    }
}

void CudaBackend::recv_from_self(Group g, View x, int tag) {
    auto& queue = comms_[static_cast<size_t>(g.id)].to_self;
    const auto it = std::find_if(
        queue.begin(), queue.end(), [tag](const SelfMessage& m) { return m.tag == tag; });
    if (it == queue.end() || it->count != x.size) {
        throw BackendError(describe({g, "recv", "from itself, tag " + std::to_string(tag)}) +
                           (it == queue.end() ? ": no such message was sent"
                                              : ": the message has " + floats(it->count) +
                                                    ", the receive expects " + floats(x.size)));
    }
    const SelfMessage m = *it;
    queue.erase(it);
    if (m.count > 0) {
        CLEAVE_CUDA_CHECK(
            cudaMemcpyAsync(x.data, m.staged, count_of(x) * 4, cudaMemcpyDeviceToDevice, stream_));
    }
    temp_free(m.staged);
}

void CudaBackend::retire_completed_sends() {
    for (auto it = sends_.begin(); it != sends_.end();) {
        const cudaError_t rc = cudaEventQuery(it->done);
        if (rc == cudaErrorNotReady) {
            ++it;
            continue;
        }
        if (rc != cudaSuccess) {
            throw BackendError(cuda_error_message(rc, "cudaEventQuery(send)", __FILE__, __LINE__));
        }
        CLEAVE_CUDA_CHECK(cudaEventDestroy(it->done));
        it = sends_.erase(it);
    }
}

// ---- waiting -------------------------------------------------------------------------------

void CudaBackend::synchronize() {
    wait_compute({Group{}, "synchronize", ""});
    while (!sends_.empty()) {
        const PendingSend& s = sends_.front();
        wait_event(s.done,
                   {s.group,
                    "send",
                    "to rank " + std::to_string(s.peer) + " tag " + std::to_string(s.tag)});
        CLEAVE_CUDA_CHECK(cudaEventDestroy(s.done));
        sends_.erase(sends_.begin());
    }
}

double CudaBackend::clock_s() {
    wait_compute({Group{}, "clock", "waiting for queued compute"});
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

void CudaBackend::wait_compute(const WaitFor& what) {
    CLEAVE_CUDA_CHECK(cudaEventRecord(sync_event_, stream_));
    wait_event(sync_event_, what);
    check_received_tags();
}

void CudaBackend::wait_event(cudaEvent_t event, const WaitFor& what) {
    using clock = std::chrono::steady_clock;
    const auto start = clock::now();
    for (int64_t polls = 1;; ++polls) {
        const cudaError_t rc = cudaEventQuery(event);
        if (rc == cudaSuccess) {
            return;
        }
        if (rc != cudaErrorNotReady) {
            throw BackendError(describe(what) + ": " +
                               cuda_error_message(rc, "cudaEventQuery", __FILE__, __LINE__));
        }
        if (polls % 64 == 0) {
            check_async_errors(what);
        }
        const double waited_s = std::chrono::duration<double>(clock::now() - start).count();
        if (timeout_s_ > 0.0 && waited_s > timeout_s_) {
            check_async_errors(what);  // a peer's failure explains the wait better
            abort_all();
            std::ostringstream os;
            os << describe(what) << pending_recv_note() << ": not done after " << timeout_s_
               << " s (NCCL communicators aborted)";
            throw CommTimeout(os.str());
        }
        // The clock_s() around every op waits here, so spin (one rank per GPU has a core to
        // itself) for the first 100 ms, and only then sleep: a sleep's wake-up latency would be
        // added to the measured time of every operation.
        if (waited_s < 0.1) {
            std::this_thread::yield();
        } else {
            std::this_thread::sleep_for(std::chrono::microseconds(100));
        }
    }
}

// A peer that failed or vanished shows up as an asynchronous error on our communicators (for
// instance ncclRemoteError) before any timeout.
void CudaBackend::check_async_errors(const WaitFor& what) {
    for (size_t i = 0; i < comms_.size(); ++i) {
        const CommGroup& cg = comms_[i];
        std::vector<ncclComm_t> all{cg.comm, cg.async_comm};
        for (const Channel& ch : cg.channels) {
            all.push_back(ch.comm);
        }
        for (ncclComm_t c : all) {
            if (c == nullptr) {
                continue;
            }
            ncclResult_t async = ncclSuccess;
            CLEAVE_NCCL_CHECK(ncclCommGetAsyncError(c, &async));
            if (async == ncclSuccess || async == ncclInProgress) {
                continue;
            }
            const char* last = ncclGetLastError(c);
            const std::string msg = describe(what) + ": NCCL error on group '" +
                                    groups_.label(Group{static_cast<int>(i)}) +
                                    "': " + ncclGetErrorString(async) +
                                    (last != nullptr ? std::string(" (") + last + ")" : "") +
                                    " (NCCL communicators aborted)";
            abort_all();
            throw BackendError(msg);
        }
    }
}

std::string CudaBackend::describe(const WaitFor& what) const {
    std::ostringstream os;
    os << "rank " << groups_.world_rank() << ": " << what.op;
    if (what.group.id >= 0) {
        os << " on group '" << groups_.label(what.group) << "' (rank " << groups_.rank(what.group)
           << " of " << groups_.size(what.group) << ")";
    }
    if (!what.detail.empty()) {
        os << ", " << what.detail;
    }
    return os.str();
}

void CudaBackend::abort_all() noexcept {
    for (auto& cg : comms_) {
        for (ncclComm_t* c : {&cg.comm, &cg.async_comm}) {
            if (*c != nullptr) {
                (void)ncclCommAbort(*c);  // best effort: we are already failing
                *c = nullptr;
            }
        }
        for (auto& ch : cg.channels) {
            if (ch.comm != nullptr) {
                (void)ncclCommAbort(ch.comm);
                ch.comm = nullptr;
            }
        }
    }
    aborted_ = true;
}

}  // namespace cleave::executor::gpu

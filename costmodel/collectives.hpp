#pragma once
// Collectives: the nccl-tests bus-bandwidth convention, the mapping of a parallel group onto the
// links it crosses, and the alpha-beta time of one collective. One busbw factor table shared by
// the cost model and calibrate's reports (STYLE S9.3).

#include "core/cluster.hpp"
#include "core/plan.hpp"
#include "core/units.hpp"

#include <cstdint>

namespace cleave {

enum class Collective { all_reduce, all_gather, reduce_scatter, all_to_all, send_recv, broadcast };

/// "all_reduce", "all_gather", ...
[[nodiscard]] const char* to_string(Collective c);

/// busbw / algbw for `n` ranks (nccl-tests doc/PERFORMANCE.md): all-reduce 2(n-1)/n; all-gather,
/// reduce-scatter and all-to-all (n-1)/n; send/recv and broadcast 1. Returns 0 for n <= 1 except
/// send/recv and broadcast. Precondition: n >= 1.
[[nodiscard]] double busbw_factor(Collective c, int64_t n);

/// Sequential latency steps of a ring implementation: all-reduce 2(n-1), all-gather /
/// reduce-scatter / all-to-all n-1, send/recv 1, broadcast n-1 (pipelined ring).
[[nodiscard]] int64_t ring_steps(Collective c, int64_t n);

/// Which kind of link bounds a group.
enum class LinkKind { none, nvlink, xgmi, pcie, network };

[[nodiscard]] const char* to_string(LinkKind k);

/// The link a group of ranks runs on.
/// c's member of `b`; nullptr for a collective without one (all-to-all, broadcast).
[[nodiscard]] const BytesPerSecond* bandwidth_of(const CollectiveBandwidths& b, Collective c);
[[nodiscard]] BytesPerSecond* bandwidth_of(CollectiveBandwidths& b, Collective c);

struct GroupLink {
    LinkKind kind = LinkKind::none;
    BytesPerSecond busbw;  // achievable ring bus bandwidth per rank
    Seconds step_latency;  // alpha per ring step (across nodes: the network's)
    Seconds intra_latency;  // alpha of a step inside an NVLink domain (node.intra_latency)
    int64_t members_per_node = 1;
    int64_t nodes = 1;              // NVLink domains the group spans (hosts on a DGX)
    Seconds sync_wait;              // ClusterSpec::node.sync_wait for groups of 2 or more ranks
    double sync_wait_fraction = 0.0;  // node.sync_wait_fraction, likewise
    CollectiveBandwidths op_busbw;  // inside a node: node.collective_bw (0 = busbw); across: 0

    [[nodiscard]] bool crosses_nodes() const { return nodes > 1; }

    bool operator==(const GroupLink&) const = default;
};

/// Maps a group of `size` ranks whose consecutive members are `stride` global ranks apart onto
/// the cluster (ranks fill NVLink domains in order, nvlink_domain(node) per domain: an 8-GPU
/// host, or 72 GPUs of 18 hosts in an NVL72 rack; Megatron's order puts TP innermost, then CP,
/// EP, DP, PP). Inside one domain: node.intra_bw (PCIe when the node's link is PCIe). Across
/// domains: each contributes k = members_per_node GPUs and their NICs, so the ring bus bandwidth
/// is min(intra_bw, k * network.inter_bw) (reference/hardware.md §6: rail-aligned NICs
/// aggregate; 8 x HDR DGX A100 -> 192 GB/s busbw, NVIDIA/nccl#1576). members_per_node and nodes
/// count per NVLink domain.
[[nodiscard]] GroupLink group_link(const ClusterSpec& c, int64_t size, int64_t stride);

/// Where an all-to-all's bytes go from one GPU: of its n peers (itself included), r share its
/// NVLink domain and n - r sit behind the network.
struct AllToAllLinks {
    int64_t n = 1;             // ranks in the group
    int64_t r = 1;             // ranks inside this GPU's NVLink domain, itself included
    BytesPerSecond nvlink_bw;  // per GPU, one direction (node.intra_bw)
    BytesPerSecond nic_bw;     // per GPU, its own NIC share (network.inter_bw)
    Seconds nvlink_latency;    // node.intra_latency
    Seconds nic_latency;       // network.inter_latency

    bool operator==(const AllToAllLinks&) const = default;
};

/// The all-to-all links of a group of `size` ranks `stride` global ranks apart: r is the group's
/// members per NVLink domain as group_link() places them (the whole group when it fits one
/// domain, else domain / stride, at least 1).
[[nodiscard]] AllToAllLinks all_to_all_links(const ClusterSpec& c, int64_t size, int64_t stride);

/// One all-to-all from one GPU, split by link.
struct AllToAllCost {
    Seconds time;
    Bytes nvlink;  // bytes this GPU sends over NVLink
    Bytes nic;     // bytes this GPU sends through its NIC

    bool operator==(const AllToAllCost&) const = default;
};

/// All-to-all of `sent` bytes from each GPU (its whole send buffer, the 1/n for itself included)
/// spread evenly over the n ranks: (r - 1)/n of it over NVLink, (n - r)/n through the NIC. NCCL
/// posts every peer's send in one group, so the two links run at once (nccl
/// src/collectives.cc ncclAllToAll -> grouped ncclSend / ncclRecv): t = max(nvlink bytes /
/// nvlink_bw, nic bytes / nic_bw) + the latency of the slower link used. While r x nic_bw <=
/// nvlink_bw the NIC side binds.
[[nodiscard]] AllToAllCost all_to_all_cost(const AllToAllLinks& l, Bytes sent);

/// The links of every group of a plan, rank order TP -> CP -> EP -> DP -> PP (TP innermost):
/// TP stride 1, CP stride tp, DP stride tp, PP stride tp*cp*dp. The expert layers run on their
/// own grid over the same ranks, ETP innermost, then EP, then expert DP (Megatron-Core
/// parallel_state.py initialize_model_parallel, expert RankGenerator order tp-ep-dp-pp with
/// tp = expert_tensor_parallel_size, @d98e8a64 lines 871-895): ETP stride 1, EP stride etp,
/// expert DP stride etp*ep.
struct PlanLinks {
    GroupLink tp;
    GroupLink cp;
    GroupLink ep;
    GroupLink dp;          // dense parameters: dp ranks (x cp for the distributed optimizer)
    GroupLink dp_expert;   // expert parameters: expert_dp(p) ranks, stride etp*ep
    GroupLink pp;          // the pipeline (stride tp*cp*dp); busbw of its slowest boundary
    GroupLink etp;         // expert tensor parallel: etp ranks, stride 1 (expert grid)
    GroupLink ep_etp;      // the expert grid's ep*etp ranks (allgather dispatcher), stride 1
    AllToAllLinks ep_a2a;  // EP all-to-all: ep ranks, stride etp (expert grid)

    bool operator==(const PlanLinks&) const = default;
};

[[nodiscard]] PlanLinks plan_links(const ClusterSpec& c, const Plan& p);

/// Time of one collective over `link` for an `n`-rank group. `size` is the nccl-tests size S: the
/// per-rank buffer for all-reduce and send/recv, the whole gathered array (per-rank count * n)
/// for all-gather, reduce-scatter and all-to-all. t = steps * alpha + S * factor / busbw.
/// The latency part of collective_time: ring steps at the link's step latency inside a domain;
/// across domains NCCL's split of the ring's steps into network and NVLink steps, and for an
/// all-reduce the double binary tree's 2 ((ppn - 1) intra + log2(nodes) inter) where smaller.
[[nodiscard]] Seconds collective_latency(Collective c, int64_t n, const GroupLink& link);

[[nodiscard]] Seconds collective_time(Collective c, Bytes size, int64_t n, const GroupLink& link);

/// Bytes one rank sends in that collective: S * factor (ring algorithms), S for send/recv.
[[nodiscard]] Bytes collective_bytes_sent(Collective c, Bytes size, int64_t n);

/// algbw = S / t and busbw = algbw * factor, for reports.
struct Bandwidths {
    BytesPerSecond algbw;
    BytesPerSecond busbw;
};

[[nodiscard]] Bandwidths bandwidths(Collective c, Bytes size, int64_t n, Seconds t);

}  // namespace cleave

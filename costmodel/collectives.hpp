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
    Seconds step_latency;  // alpha per ring step
    int64_t members_per_node = 1;
    int64_t nodes = 1;              // NVLink domains the group spans (hosts on a DGX)
    Seconds sync_wait;              // ClusterSpec::node.sync_wait for groups of 2 or more ranks
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

/// The links of every group of a plan, rank order TP -> CP -> EP -> DP -> PP (TP innermost):
/// TP stride 1, CP stride tp, EP and DP stride tp*cp, expert-DP stride tp*cp*ep, PP stride
/// tp*cp*dp.
struct PlanLinks {
    GroupLink tp;
    GroupLink cp;
    GroupLink ep;
    GroupLink dp;         // dense parameters: dp ranks (x cp for the distributed optimizer)
    GroupLink dp_expert;  // expert parameters: dp*cp/ep ranks
    GroupLink pp;         // the pipeline (stride tp*cp*dp); busbw of its slowest boundary

    bool operator==(const PlanLinks&) const = default;
};

[[nodiscard]] PlanLinks plan_links(const ClusterSpec& c, const Plan& p);

/// Time of one collective over `link` for an `n`-rank group. `size` is the nccl-tests size S: the
/// per-rank buffer for all-reduce and send/recv, the whole gathered array (per-rank count * n)
/// for all-gather, reduce-scatter and all-to-all. t = steps * alpha + S * factor / busbw.
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

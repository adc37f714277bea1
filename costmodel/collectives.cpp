#include "costmodel/collectives.hpp"

#include <algorithm>

namespace cleave {

const char* to_string(Collective c) {
    switch (c) {
    case Collective::all_reduce:
        return "all_reduce";
    case Collective::all_gather:
        return "all_gather";
    case Collective::reduce_scatter:
        return "reduce_scatter";
    case Collective::all_to_all:
        return "all_to_all";
    case Collective::send_recv:
        return "send_recv";
    case Collective::broadcast:
        return "broadcast";
    }
    return "?";
}

const char* to_string(LinkKind k) {
    switch (k) {
    case LinkKind::none:
        return "none";
    case LinkKind::nvlink:
        return "nvlink";
    case LinkKind::xgmi:
        return "xgmi";
    case LinkKind::pcie:
        return "pcie";
    case LinkKind::network:
        return "network";
    }
    return "?";
}

// nccl-tests doc/PERFORMANCE.md: an all-reduce moves 2(n-1) chunks of S/n per rank (n-1
// reductions, n-1 copies); all-gather / reduce-scatter / all-to-all move n-1 chunks of S/n.
double busbw_factor(Collective c, int64_t n) {
    const double nd = static_cast<double>(n);
    switch (c) {
    case Collective::all_reduce:
        return n > 1 ? 2.0 * (nd - 1.0) / nd : 0.0;
    case Collective::all_gather:
    case Collective::reduce_scatter:
    case Collective::all_to_all:
        return n > 1 ? (nd - 1.0) / nd : 0.0;
    case Collective::send_recv:
    case Collective::broadcast:
        return 1.0;
    }
    return 0.0;
}

int64_t ring_steps(Collective c, int64_t n) {
    switch (c) {
    case Collective::all_reduce:
        return 2 * (n - 1);
    case Collective::all_gather:
    case Collective::reduce_scatter:
    case Collective::all_to_all:
    case Collective::broadcast:
        return n - 1;
    case Collective::send_recv:
        return 1;
    }
    return 0;
}

GroupLink group_link(const ClusterSpec& c, int64_t size, int64_t stride) {
    GroupLink g;
    g.intra_latency = c.node.intra_latency;
    if (size <= 1) {
        g.kind = LinkKind::none;
        g.busbw = c.node.intra_bw;
        g.step_latency = c.node.intra_latency;
        return g;
    }
    g.sync_wait = c.node.sync_wait;
    g.sync_wait_fraction = c.node.sync_wait_fraction;
    // The NVLink domain, not the host, decides the link: a GB200 NVL72 rack joins 18 hosts of 4
    // GPUs in one NVLink fabric (NVIDIA GB200 NVL72 spec, hardware.md S39; NCCL runs such a group
    // over NVLink as one multi-node NVLink "node", NVIDIA/nccl docs env.rst NCCL_MNNVL_ENABLE).
    const int64_t dom = nvlink_domain(c.node);
    const int64_t extent = stride * size;
    // Groups tile an 8-GPU host when extent divides it; otherwise (worst case, and always when
    // extent > the domain) some group straddles a boundary. A multi-host domain is filled with
    // whole blocks of `extent` GPUs and the rest left idle (Slurm block topology, as NVL72
    // clusters schedule: 64 of 72 GPUs for TP=16), so any group up to the domain fits one.
    const bool multi_host = dom > std::max<int64_t>(1, c.node.gpus_per_node);
    if (extent <= dom && (dom % extent == 0 || multi_host)) {
        g.members_per_node = size;
        g.nodes = 1;
        g.busbw = c.node.intra_bw;
        g.step_latency = c.node.intra_latency;
        g.op_busbw = c.node.collective_bw;
        switch (c.node.intra_link) {
        case IntraLink::pcie:
            g.kind = LinkKind::pcie;
            break;
        case IntraLink::xgmi:
            g.kind = LinkKind::xgmi;
            break;
        default:
            g.kind = LinkKind::nvlink;
        }
        return g;
    }
    g.members_per_node = stride >= dom ? 1 : std::max<int64_t>(1, dom / stride);
    g.members_per_node = std::min(g.members_per_node, size);
    g.nodes = (size + g.members_per_node - 1) / g.members_per_node;
    g.kind = LinkKind::network;
    // Each domain's k members reach the network through their own NIC share (inter_bw is per
    // GPU, however many GPUs a host holds), and the ring's k channels aggregate them.
    const double k = static_cast<double>(g.members_per_node);
    g.busbw = min(c.node.intra_bw, c.network.inter_bw * k);
    g.step_latency = c.network.inter_latency;
    return g;
}

AllToAllLinks all_to_all_links(const ClusterSpec& c, int64_t size, int64_t stride) {
    AllToAllLinks a;
    a.n = std::max<int64_t>(1, size);
    const GroupLink g = group_link(c, a.n, stride);
    a.r = a.n <= 1 ? 1 : std::clamp<int64_t>(g.members_per_node, 1, a.n);
    a.nvlink_bw = c.node.intra_bw;
    a.nic_bw = c.network.inter_bw;
    a.nvlink_latency = c.node.intra_latency;
    a.nic_latency = c.network.inter_latency;
    return a;
}

// Each GPU sends sent/n to every rank: r - 1 peers over NVLink, n - r through its NIC.
AllToAllCost all_to_all_cost(const AllToAllLinks& l, Bytes sent) {
    AllToAllCost a;
    if (l.n <= 1) {
        return a;
    }
    const double n = static_cast<double>(l.n);
    const double r = static_cast<double>(l.r);
    a.nvlink = sent * ((r - 1.0) / n);
    a.nic = sent * ((n - r) / n);
    Seconds t;
    Seconds alpha;
    if (a.nvlink.value() > 0.0) {
        t = l.nvlink_bw.value() > 0.0 ? a.nvlink / l.nvlink_bw : seconds(1e30);
        alpha = l.nvlink_latency;
    }
    if (a.nic.value() > 0.0) {
        t = max(t, l.nic_bw.value() > 0.0 ? a.nic / l.nic_bw : seconds(1e30));
        alpha = max(alpha, l.nic_latency);
    }
    a.time = t + alpha;
    return a;
}

PlanLinks plan_links(const ClusterSpec& c, const Plan& p) {
    PlanLinks l;
    l.tp = group_link(c, p.tp, 1);
    l.cp = group_link(c, p.cp, p.tp);
    if (l.cp.crosses_nodes()) {
        // Ring attention passes K/V to the next rank with send/recv: a step waits for the pair
        // that crosses nodes, one GPU's NIC (as a pipeline boundary), not the rails of a node.
        l.cp.busbw = min(c.node.intra_bw, c.network.inter_bw);
    }
    const int64_t etp = expert_tp(p);
    const int64_t ep = std::max<int64_t>(1, p.ep);
    l.ep = group_link(c, p.ep, etp);
    l.dp = group_link(c, p.dp * p.cp, p.tp);
    l.dp_expert = group_link(c, std::max<int64_t>(1, expert_dp(p)), etp * ep);
    l.etp = group_link(c, etp, 1);
    l.ep_etp = group_link(c, etp * ep, 1);
    l.ep_a2a = all_to_all_links(c, p.ep, etp);
    if (p.zero >= 3) {
        // ZeRO-3's parameter gathers and gradient reduce-scatters reach one NIC per GPU across
        // nodes, not the rail-aggregated ring: SC21 Table 2 (public_runs.csv rows 12/13, 15/16)
        // keeps the step time when the GPUs double, at 4 x 2 Psi bytes per GPU / 20.9 (175B) and
        // 23.3 GB/s (530B), vs 24 GB/s per HDR NIC; DeepSpeed issues #1174, #1188 (per-parameter
        // all_gather with a host sync and a copy per rank). docs/costmodel.md section 4.
        for (GroupLink* g : {&l.dp, &l.dp_expert}) {
            if (g->crosses_nodes()) {
                g->busbw = min(c.node.intra_bw, c.network.inter_bw);
            }
        }
    }
    // A stage boundary: two ranks tp*cp*dp apart.
    // The whole pipeline: when it spans nodes some stage boundary crosses them, and the slowest
    // boundary paces every micro-batch.
    l.pp = p.pp > 1 ? group_link(c, p.pp, p.tp * p.cp * p.dp) : GroupLink{};
    if (l.pp.crosses_nodes()) {
        l.pp.busbw = min(c.node.intra_bw, c.network.inter_bw);  // one pair, one NIC
    }
    return l;
}

BytesPerSecond* bandwidth_of(CollectiveBandwidths& b, Collective c) {
    switch (c) {
    case Collective::all_reduce:
        return &b.all_reduce;
    case Collective::all_gather:
        return &b.all_gather;
    case Collective::reduce_scatter:
        return &b.reduce_scatter;
    case Collective::send_recv:
        return &b.send_recv;
    default:
        return nullptr;
    }
}

const BytesPerSecond* bandwidth_of(const CollectiveBandwidths& b, Collective c) {
    return bandwidth_of(const_cast<CollectiveBandwidths&>(b), c);
}

namespace {

// The link's bandwidth for collective c: its own inside a node when the profile gives one.
BytesPerSecond busbw_of(Collective c, const GroupLink& link) {
    const BytesPerSecond* own = bandwidth_of(link.op_busbw, c);
    return own != nullptr && own->value() > 0.0 ? *own : link.busbw;
}

}  // namespace

// t = alpha * ring_steps + S * busbw_factor / busbw (nccl-tests PERFORMANCE.md's busbw, inverted).
Seconds collective_latency(Collective c, int64_t n, const GroupLink& link) {
    const int64_t steps = ring_steps(c, n);
    const bool ring_kind = c == Collective::all_reduce || c == Collective::all_gather ||
                           c == Collective::reduce_scatter;
    if (!link.crosses_nodes() || !ring_kind || link.intra_latency <= Seconds{}) {
        return link.step_latency * static_cast<double>(steps);
    }
    // NCCL's ring (src/graph/tuning.cc @5067397c, ncclTopoTuneModel): of the ring's steps, those
    // that cross a node boundary pay the network's latency, 2 (nodes - 1) for an all-reduce and
    // nodes - 1 for an all-gather / reduce-scatter; the rest pay the NVLink step.
    const int64_t inter = (c == Collective::all_reduce ? 2 : 1) * (link.nodes - 1);
    const Seconds ring = link.intra_latency * static_cast<double>(std::max<int64_t>(0, steps - inter)) +
                         link.step_latency * static_cast<double>(std::min(steps, inter));
    if (c != Collective::all_reduce) {
        return ring;
    }
    // An all-reduce may run NCCL's double binary tree instead (the same file: 2 ((ppn - 1) intra
    // + log2(nodes) inter)); NCCL picks by predicted time, and at large messages both reach the
    // ring's bus bandwidth, so the smaller latency stands.
    int64_t lg = 0;
    for (int64_t x = link.nodes; x > 1; x >>= 1) {
        ++lg;
    }
    const Seconds tree = 2.0 * (link.intra_latency * static_cast<double>(link.members_per_node - 1) +
                                link.step_latency * static_cast<double>(lg));
    return min(ring, tree);
}

Seconds collective_time(Collective c, Bytes size, int64_t n, const GroupLink& link) {
    if (n <= 1 && c != Collective::send_recv) {
        return {};
    }
    const BytesPerSecond bw = busbw_of(c, link);
    if (bw.value() <= 0.0) {
        return seconds(1e30);
    }
    return collective_latency(c, n, link) + (size * busbw_factor(c, n)) / bw;
}

Bytes collective_bytes_sent(Collective c, Bytes size, int64_t n) {
    if (n <= 1 && c != Collective::send_recv) {
        return {};
    }
    return size * busbw_factor(c, n);
}

Bandwidths bandwidths(Collective c, Bytes size, int64_t n, Seconds t) {
    if (t.value() <= 0.0) {
        return {};
    }
    const BytesPerSecond alg = size / t;
    return {alg, alg * busbw_factor(c, n)};
}

}  // namespace cleave

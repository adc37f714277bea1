#include "costmodel/risks.hpp"

#include <algorithm>
#include <cstdio>
#include <string>

namespace cleave {

const char* to_string(RiskKind k) {
    switch (k) {
    case RiskKind::oom:
        return "oom";
    case RiskKind::nccl_timeout:
        return "nccl_timeout";
    case RiskKind::slow_network:
        return "slow_network";
    case RiskKind::tp_cross_node:
        return "tp_cross_node";
    case RiskKind::tp_over_pcie:
        return "tp_over_pcie";
    case RiskKind::few_microbatches:
        return "few_microbatches";
    case RiskKind::large_bubble:
        return "large_bubble";
    case RiskKind::shared_communicator:
        return "shared_communicator";
    case RiskKind::ep_cross_domain:
        return "ep_cross_domain";
    case RiskKind::moe_imbalance:
        return "moe_imbalance";
    case RiskKind::moe_fixed_cost:
        return "moe_fixed_cost";
    case RiskKind::count:
        break;
    }
    return "?";
}

namespace {

uint32_t bit(RiskKind k) {
    return 1u << static_cast<unsigned>(k);
}

}  // namespace

uint32_t detect_risks(const ModelSpec& model,
                      const ClusterSpec&,
                      const JobSpec& job,
                      const Plan& plan,
                      const PlanLinks& links,
                      const Estimate& e) {
    uint32_t mask = 0;
    if (!e.fits) {
        mask |= bit(RiskKind::oom);
    }
    if (e.longest_collective.value() >= nccl_timeout_fraction * nccl_watchdog_s) {
        mask |= bit(RiskKind::nccl_timeout);
    }
    if (e.iteration_time.value() > 0 &&
        e.time.dp_comm.value() > slow_network_fraction * e.iteration_time.value()) {
        mask |= bit(RiskKind::slow_network);
    }
    if (plan.tp > 1 && links.tp.crosses_nodes()) {
        mask |= bit(RiskKind::tp_cross_node);
    }
    if (plan.tp > 1 && links.tp.kind == LinkKind::pcie) {
        mask |= bit(RiskKind::tp_over_pcie);
    }
    if (plan.pp > 1 && e.microbatches < plan.pp) {
        mask |= bit(RiskKind::few_microbatches);
    }
    if (e.bubble_ratio > large_bubble_fraction) {
        mask |= bit(RiskKind::large_bubble);
    }
    // shared_communicator is not raised: cleave's executor and exports always create separate PP
    // and DP groups, so on every PP x DP plan it was noise (issue 27); plan_notes() says it once.
    if (plan.ep > 1 && links.ep_a2a.r < links.ep_a2a.n) {
        mask |= bit(RiskKind::ep_cross_domain);
    }
    if (model.moe.enabled() && job.moe_imbalance > moe_imbalance_limit && job.moe_capacity <= 0.0) {
        mask |= bit(RiskKind::moe_imbalance);
    }
    if (e.expert_overhead.value() >= moe_fixed_cost_fraction * e.iteration_time.value() &&
        e.expert_overhead > Seconds{}) {
        mask |= bit(RiskKind::moe_fixed_cost);
    }
    return mask;
}

namespace {

std::string fmt(const char* f, double a) {
    char buf[64];
    std::snprintf(buf, sizeof buf, f, a);
    return buf;
}

std::string gib_str(Bytes b) {
    return fmt("%.1f", to_gib(b)) + " GiB";
}

std::string secs(Seconds t) {
    return t.value() >= 1.0 ? fmt("%.1f", t.value()) + " s" : fmt("%.2f", to_ms(t)) + " ms";
}

std::string num(int64_t v) {
    return std::to_string(v);
}

Risk oom_risk(const Plan& plan, const Estimate& e) {
    const Bytes over = e.memory.total - e.memory_usable;
    return {RiskKind::oom,
            "stage " + num(e.peak_memory_stage) + " of " + num(plan.pp) + " needs " +
                gib_str(e.memory.total) + " per GPU but only " + gib_str(e.memory_usable) +
                " is usable (" + gib_str(over) + " over: weights " + gib_str(e.memory.weights) +
                ", grads " + gib_str(e.memory.grads) + ", optimizer " +
                gib_str(e.memory.optimizer) + ", activations " + gib_str(e.memory.activations) +
                ")",
            "shard the model states (--zero 1, or more --tp/--pp), recompute activations "
            "(--recompute selective|full), or lower --mbs"};
}

Risk timeout_risk(const ClusterSpec& c, const Plan& plan, const PlanLinks& l, const Estimate& e) {
    return {RiskKind::nccl_timeout,
            "one blocking NCCL call takes " + secs(e.longest_collective) + " (DP gradient sync " +
                secs(e.dp_sync) + " over " + to_string(l.dp.kind) + " at " +
                fmt("%.3g", to_gbps(l.dp.busbw)) + " GB/s busbw on " + c.network.kind +
                (plan.pp > 1 ? "; stage 1 waits on it in a p2p recv" : "") +
                "), over half of PyTorch's 10-min NCCL watchdog",
            "use a faster network or fewer DP ranks across it (more TP/PP inside nodes), and "
            "raise init_process_group(timeout=) while diagnosing"};
}

Risk slow_network_risk(const ClusterSpec& c, const PlanLinks& l, const Estimate& e) {
    return {RiskKind::slow_network,
            "exposed DP gradient communication is " + secs(e.time.dp_comm) + " of a " +
                secs(e.iteration_time) + " iteration (" +
                fmt("%.0f", 100.0 * e.time.dp_comm.value() / e.iteration_time.value()) +
                " %; DP group at " + fmt("%.3g", to_gbps(l.dp.busbw)) + " GB/s busbw on " +
                c.network.kind + ")",
            "keep the DP group inside nodes (larger --tp/--pp, smaller --dp), raise --gbs to "
            "amortise the sync, or move to an RDMA network"};
}

Risk ep_risk(const ClusterSpec& c, const Plan& plan, const PlanLinks& l, const Estimate& e) {
    const AllToAllLinks& a = l.ep_a2a;
    return {RiskKind::ep_cross_domain,
            "ep=" + num(plan.ep) + " spans NVLink domains of " + num(nvlink_domain(c.node)) +
                " GPUs: " + num(a.n - a.r) + " of " + num(a.n) +
                " EP ranks sit behind the network, so " +
                fmt("%.0f", 100.0 * static_cast<double>(a.n - a.r) / static_cast<double>(a.n)) +
                " % of each all-to-all goes through one NIC at " + fmt("%.3g", to_gbps(a.nic_bw)) +
                " GB/s (" + gib_str(e.comm_bytes_per_gpu.ep_nic) + " per GPU per iteration, " +
                secs(e.time.ep_comm) + " exposed)",
            "keep ep x etp within the NVLink domain (--ep " + num(std::max<int64_t>(1, a.r)) +
                " or fewer), use a node-deduplicating dispatcher (stack [moe] dispatcher = "
                "\"deepep\"), or overlap the all-to-all (a2a_overlap)"};
}

}  // namespace

std::vector<Risk> describe_risks(const ModelSpec& model,
                                 const ClusterSpec& cluster,
                                 const JobSpec& job,
                                 const Plan& plan,
                                 const Estimate& e) {
    const PlanLinks l = plan_links(cluster, plan);
    std::vector<Risk> out;
    for (unsigned k = 0; k < static_cast<unsigned>(RiskKind::count); ++k) {
        const auto kind = static_cast<RiskKind>(k);
        if (!e.has(kind)) {
            continue;
        }
        switch (kind) {
        case RiskKind::oom:
            out.push_back(oom_risk(plan, e));
            break;
        case RiskKind::nccl_timeout:
            out.push_back(timeout_risk(cluster, plan, l, e));
            break;
        case RiskKind::slow_network:
            out.push_back(slow_network_risk(cluster, l, e));
            break;
        case RiskKind::tp_cross_node:
            out.push_back({kind,
                           "tp=" + num(plan.tp) + " spans " + num(l.tp.nodes) +
                               " NVLink domains of " + num(nvlink_domain(cluster.node)) +
                               " GPUs: every layer's TP collectives run at " +
                               fmt("%.3g", to_gbps(l.tp.busbw)) + " GB/s instead of " +
                               fmt("%.3g", to_gbps(cluster.node.intra_bw)) + " GB/s",
                           "keep --tp <= " + num(nvlink_domain(cluster.node)) +
                               " (GPUs per NVLink domain) and scale with --pp or --dp"});
            break;
        case RiskKind::tp_over_pcie:
            out.push_back({kind,
                           "tp=" + num(plan.tp) + " talks over PCIe at " +
                               fmt("%.3g", to_gbps(l.tp.busbw)) + " GB/s: " + secs(e.time.tp_comm) +
                               " of exposed TP communication",
                           "use --tp 1 and split with --pp (one activation per micro-batch) "
                           "or shard with --zero"});
            break;
        case RiskKind::few_microbatches:
            out.push_back({kind,
                           num(e.microbatches) + " micro-batches for " + num(plan.pp) +
                               " pipeline stages (m < p): stages idle " +
                               fmt("%.0f", 100.0 * e.bubble_ratio) + " % of the iteration",
                           "raise --gbs or lower --mbs / --dp so that m >= p (m >= 4p is better)"});
            break;
        case RiskKind::large_bubble:
            out.push_back({kind,
                           "pipeline bubble " + fmt("%.1f", 100.0 * e.bubble_ratio) +
                               " % (p=" + num(plan.pp) + ", m=" + num(e.microbatches) +
                               ", v=" + num(plan.vpp) + ") costs " + secs(e.time.bubble),
                           "more micro-batches (raise --gbs, lower --mbs), fewer stages, or "
                           "--schedule interleaved --vpp 2+"});
            break;
        case RiskKind::shared_communicator:
            out.push_back({kind,
                           "pp=" + num(plan.pp) + " and dp=" + num(plan.dp) +
                               ": pipeline send/recv and DP all-reduce must not share one NCCL "
                               "communicator, or a large all-reduce blocks the p2p and they "
                               "deadlock (cleave's executor and its Megatron/DeepSpeed output "
                               "always create separate PP and DP groups)",
                           "in hand-written launchers create PP and DP groups with separate "
                           "torch.distributed.new_group() calls"});
            break;
        case RiskKind::ep_cross_domain:
            out.push_back(ep_risk(cluster, plan, l, e));
            break;
        case RiskKind::moe_imbalance:
            out.push_back({kind,
                           "the busiest expert takes " + fmt("%.2f", job.moe_imbalance) +
                               " x the average tokens with no capacity factor: its GEMMs, "
                               "all-to-all receive and buffers grow by that much, and real "
                               "routing can go higher (dropless)",
                           "set --moe-capacity (token dropping, e.g. 1.25) or train with a "
                           "load-balancing loss / aux-loss-free bias that keeps it near 1"});
            break;
        case RiskKind::moe_fixed_cost:
            out.push_back(
                {kind,
                 secs(e.expert_overhead) + " of the " + secs(e.iteration_time) + " step (" +
                     fmt("%.0f", 100.0 * e.expert_overhead.value() / e.iteration_time.value()) +
                     " %) is the quantised expert GEMMs' fixed cost: " +
                     fmt("%.0f",
                         static_cast<double>(model.moe.experts) /
                             static_cast<double>(std::max<int64_t>(1, plan.ep))) +
                     " local experts x " + num(e.microbatches) +
                     " micro-batches x every MoE layer (" +
                     fmt("%.0f",
                         quantised_expert_overhead(cluster.node, job.stack.release).value() * 1e6) +
                     " us each: the profile's fitted value in force for release " +
                     (job.stack.release.empty() ? std::string("(none)") : job.stack.release) + ")",
                 "raise the micro-batch size (fewer, larger micro-batches), spread the experts "
                 "over more EP ranks (fewer local experts), or train the experts in BF16; "
                 "CUDA graphs over the MoE layer need a capacity factor with padding "
                 "(Megatron --moe-expert-capacity-factor --moe-pad-expert-input-to-capacity)"});
            break;
        case RiskKind::count:
            break;
        }
    }
    return out;
}

std::vector<std::string> plan_notes(const Plan& plan) {
    std::vector<std::string> out;
    if (plan.pp > 1 && plan.dp > 1) {
        out.push_back("pp=" + std::to_string(plan.pp) + " and dp=" + std::to_string(plan.dp) +
                      ": in a hand-written launcher create the PP and DP groups with separate "
                      "torch.distributed.new_group() calls; one shared NCCL communicator lets a "
                      "large DP all-reduce block the pipeline's send/recv and deadlock (the seed's "
                      "third failure). cleave's executor and its Megatron / DeepSpeed / torchtitan "
                      "output already do this.");
    }
    return out;
}

}  // namespace cleave

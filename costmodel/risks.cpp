#include "costmodel/estimate.hpp"

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
    case RiskKind::count:
        break;
    }
    return "?";
}

}  // namespace cleave

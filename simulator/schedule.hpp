#pragma once
// The schedule part of the simulator: the one schedule of core/schedule.hpp, under the names
// the simulator and its tests use.

#include "core/schedule.hpp"
#include "simulator/simulate.hpp"

namespace cleave::detail {

using cleave::append_rank_ops;
using cleave::OpKind;
using cleave::SimOp;
using cleave::warmup_forwards;

}  // namespace cleave::detail

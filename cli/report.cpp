#include "cli/report.hpp"

namespace cleave::cli {

namespace {

nlohmann::json memory_json(const MemoryBreakdown& m) {
    return {{"weights", to_gib(m.weights)},
            {"grads", to_gib(m.grads)},
            {"optimizer", to_gib(m.optimizer)},
            {"activations", to_gib(m.activations)},
            {"logits", to_gib(m.logits)},
            {"comm_buffers", to_gib(m.comm_buffers)},
            {"reserved", to_gib(m.reserved)},
            {"total", to_gib(m.total)}};
}

nlohmann::json time_json(const TimeBreakdown& t) {
    return {{"compute", t.compute.value()},
            {"tp_comm", t.tp_comm.value()},
            {"cp_comm", t.cp_comm.value()},
            {"ep_comm", t.ep_comm.value()},
            {"pp_comm", t.pp_comm.value()},
            {"bubble", t.bubble.value()},
            {"dp_comm", t.dp_comm.value()},
            {"optimizer", t.optimizer.value()}};
}

nlohmann::json stages_json(const Plan& p, const Estimate& e) {
    auto out = nlohmann::json::array();
    for (int64_t s = 0; s < p.pp; ++s) {
        const StageCost& c = stage_cost(e, s, p.pp);
        out.push_back({{"stage", s},
                       {"layers", c.layers},
                       {"memory_gib", memory_json(c.memory)},
                       {"fwd_s", c.fwd.value()},
                       {"bwd_s", c.bwd.value()},
                       {"fwd_comm_s", c.fwd_comm.value()},
                       {"bwd_comm_s", c.bwd_comm.value()},
                       {"dp_grad_sync_s", c.dp_grad_sync.value()},
                       {"optimizer_s", c.optimizer.value()}});
    }
    return out;
}

}  // namespace

nlohmann::json plan_to_json(const Plan& p, const JobSpec& job) {
    return {{"dp", p.dp},
            {"tp", p.tp},
            {"pp", p.pp},
            {"cp", p.cp},
            {"ep", p.ep},
            {"vpp", p.vpp},
            {"mbs", p.mbs},
            {"microbatches", num_microbatches(p, job)},
            {"schedule", to_string(p.schedule)},
            {"recompute", to_string(p.recompute)},
            {"sp", p.sp},
            {"zero", p.zero},
            {"flags", to_flags(p)}};
}

nlohmann::json estimate_to_json(const Inputs& in, const Plan& p, const Estimate& e) {
    auto risks = nlohmann::json::array();
    for (const Risk& r : describe_risks(in.model, in.cluster, in.job, p, e)) {
        risks.push_back({{"kind", to_string(r.kind)}, {"message", r.message}, {"fix", r.fix}});
    }
    return {{"plan", plan_to_json(p, in.job)},
            {"iteration_time_s", e.iteration_time.value()},
            {"tokens_per_s", e.tokens_per_s},
            {"tflops_per_gpu", e.tflops_per_gpu},
            {"mfu", e.mfu},
            {"hfu", e.hfu},
            {"bubble_ratio", e.bubble_ratio},
            {"memory_gib", memory_json(e.memory)},
            {"usable_memory_gib", to_gib(e.memory_usable)},
            {"peak_memory_stage", e.peak_memory_stage},
            {"fits", e.fits},
            {"time_s", time_json(e.time)},
            {"comm_bytes_per_gpu",
             {{"dp", e.comm_bytes_per_gpu.dp.value()},
              {"tp", e.comm_bytes_per_gpu.tp.value()},
              {"pp", e.comm_bytes_per_gpu.pp.value()},
              {"cp", e.comm_bytes_per_gpu.cp.value()},
              {"ep", e.comm_bytes_per_gpu.ep.value()}}},
            {"model_flops", e.model_flops.value()},
            {"hardware_flops", e.hardware_flops.value()},
            {"stages", stages_json(p, e)},
            {"risks", risks}};
}

}  // namespace cleave::cli

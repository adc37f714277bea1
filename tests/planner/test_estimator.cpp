// The planner's cached Estimator against the plain estimate(): the same Estimate, bit for bit, for
// every plan a search enumerates; the memory check agrees with estimate()'s memory and fits; and
// the search's answer does not depend on which of the two priced it.
#include "core/job.hpp"
#include "core/load.hpp"
#include "core/stack.hpp"
#include "planner/search.hpp"

#include <limits>
#include <string>
#include <vector>

#include <doctest/doctest.h>

using namespace cleave;

namespace {

std::vector<Plan>& seen() {
    static std::vector<Plan> plans;
    return plans;
}

// A PriceFn that records every plan the enumeration hands it.
Estimate record(const ModelSpec& m, const ClusterSpec& c, const JobSpec& j, const Plan& p) {
    seen().push_back(p);
    return estimate(m, c, j, p);
}

struct Case {
    ModelSpec model;
    ClusterSpec cluster;
    JobSpec job;
};

Case load_case(const char* model, const char* profile, int64_t gpus, int64_t gbs, int64_t seq) {
    Case c;
    c.model = load_model(std::string(CLEAVE_TEST_DATA_DIR "/examples/") + model + ".toml");
    c.cluster = load_cluster(std::string(CLEAVE_TEST_DATA_DIR "/hwprofiles/") + profile + ".toml");
    c.job.gpus = gpus;
    c.job.global_batch = gbs;
    c.job.seq_len = seq;
    return c;
}

// Every enumerated plan: Estimator == estimate(), and if_fits() agrees with it. Returns how
// many plans were compared.
std::size_t compare_all(const Case& c, SearchOptions o = {}) {
    seen().clear();
    o.allow_tp_cross_node = true;
    const SearchResult plain = search_with(c.model, c.cluster, c.job, o, &record);
    const std::vector<Plan> plans = seen();
    // Every candidate, the baseline and each new nearest memory miss priced again.
    REQUIRE(static_cast<int64_t>(plans.size()) > plain.candidates_evaluated);
    Estimator cached(c.model, c.cluster, c.job);
    Estimator checker(c.model, c.cluster, c.job);
    std::size_t fits = 0;
    for (const Plan& p : plans) {
        const Estimate want = estimate(c.model, c.cluster, c.job, p);
        const Estimate got = cached(p);
        CHECK_MESSAGE(got == want, to_string(p));
        MemoryCheck mc;
        const auto e = checker.if_fits(p, mc);
        CHECK(mc.complete);
        CHECK(mc.peak == want.memory.total);
        CHECK(mc.stage == want.peak_memory_stage);
        CHECK(mc.usable == want.memory_usable);
        CHECK(mc.fits == want.fits);
        CHECK(e.has_value() == want.fits);
        if (e) {
            ++fits;
            CHECK_MESSAGE(*e == want, to_string(p));
        }
    }
    CHECK(fits > 0);
    CHECK(fits < plans.size());  // both branches of if_fits were exercised
    // The cached search gives the same answer as the plain one.
    const SearchResult fast = search(c.model, c.cluster, c.job, o);
    CHECK(fast.candidates_evaluated == plain.candidates_evaluated);
    CHECK(fast.feasible == plain.feasible);
    CHECK(fast.plans == plain.plans);
    for (std::size_t r = 0; r < reject_reason_count; ++r) {
        CHECK(fast.rejected[r] == plain.rejected[r]);
    }
    return plans.size();
}

}  // namespace

TEST_SUITE("planner") {
    TEST_CASE("Estimator equals estimate on every plan of a dense search") {
        // GPT-3 175B on 64 DGX A100: tp, pp, cp, mbs, all schedules, recompute, sp, ZeRO.
        const Case c = load_case("gpt3-175b", "dgx-a100-80g", 64, 512, 2048);
        CHECK(compare_all(c) > 1000);
    }

    TEST_CASE("Estimator equals estimate on every plan of a MoE search") {
        // Mixtral 8x7B on 32 H100: ep in addition, MoE layers in every stage.
        const Case c = load_case("mixtral-8x7b", "dgx-h100", 32, 256, 4096);
        CHECK(compare_all(c) > 1000);
    }

    TEST_CASE("Estimator equals estimate on every plan of a DeepSeek-V3 fp8 search") {
        // Dense first layers, MLA, MTP, bf16 first / last layers, fp8 blockwise on the shipped
        // stack: the parts a memory check reads kept apart from the costs, the stages' layers
        // kept per layer map (interleaved maps of uneven chunks included). mbs 1 and cp <= 2
        // keep the plans to some 20,000.
        Case c = load_case("deepseek-v3", "dgx-h100", 128, 256, 4096);
        c.job.stack = load_stack("megatron-core");
        c.job.grads = c.job.stack.grad_dtype;  // as the CLI sets them
        c.job.compute = Dtype::fp8;
        c.job.fp8_recipe = Fp8Recipe::blockwise;
        c.job.bf16_layers_start = 1;
        c.job.bf16_layers_end = 1;
        c.job.mtp = true;
        SearchOptions o;
        o.fixed.mbs = 1;
        o.max_cp = 2;
        CHECK(compare_all(c, o) > 1000);
        // Block recomputation: the layers kept whole priced apart (without MTP, so that some
        // plans fit).
        c.job.mtp = false;
        o.fixed.recompute = Recompute::full;
        o.fixed.recompute_method = RecomputeMethod::block;
        o.fixed.recompute_layers = 2;
        CHECK(compare_all(c, o) > 1000);
    }

    TEST_CASE("Estimator equals estimate with fewer micro-batches than stages") {
        // Global batch 16 on 64 GPUs: m < pp in many plans, so the stages' in-flight
        // micro-batches change with dp and mbs under one layer map (1F1B alone: consecutive
        // plans of one map and another mbs).
        const Case c = load_case("gpt3-175b", "dgx-a100-80g", 64, 16, 2048);
        SearchOptions o;
        o.fixed.schedule = Schedule::one_f_one_b;
        CHECK(compare_all(c, o) > 1000);
    }

    TEST_CASE("Estimator equals estimate on every plan of a DualPipeV search") {
        // Its 2 pp-stage view: the stages' layers kept per view.
        const Case c = load_case("mixtral-8x7b", "dgx-h100", 32, 256, 4096);
        SearchOptions o;
        o.fixed.schedule = Schedule::dualpipev;
        CHECK(compare_all(c, o) > 1000);
    }

    TEST_CASE("Estimator equals estimate on every plan of a hybrid search") {
        // Nemotron-H's Mamba, attention and MoE layers: the hybrid stages' kinds through the
        // same memo and memory parts.
        Case c;
        c.model = load_model(CLEAVE_TEST_DATA_DIR
                             "/examples/hf/nemotron-3-nano-30b-a3b.config.json");
        c.cluster = load_cluster(CLEAVE_TEST_DATA_DIR "/hwprofiles/dgx-h100.toml");
        c.job.gpus = 32;
        c.job.global_batch = 128;
        c.job.seq_len = 4096;
        c.job.stack = load_stack("megatron-core");
        SearchOptions o;
        o.fixed.mbs = 1;  // the kinds do not depend on it; every mbs triples the sanitized run
        CHECK(compare_all(c, o) > 1000);
    }

    TEST_CASE("Estimator equals estimate on every plan of a LoRA search") {
        // Llama 2 70B under --peft lora (costmodel/peft.hpp): the adapters' parameters in the
        // memoised stages, the frozen base's model states (lora_model_states) in the memory
        // check, and no quantised weight copies kept under FP8.
        Case c = load_case("llama-2-70b", "dgx-h100", 64, 128, 4096);
        c.job.stack = load_stack("megatron-core");
        c.job.grads = c.job.stack.grad_dtype;  // as the CLI sets them
        c.job.peft = Peft::lora;
        c.job.lora_dim = 16;
        c.job.lora_alpha = 32.0;
        c.job.lora_targets = lora_target::linear_qkv | lora_target::linear_proj;
        // mbs 1 and 2 apart (every micro-batch size would triple the plans under the
        // sanitizers; the adapters do not depend on it).
        SearchOptions o;
        o.fixed.mbs = 2;
        CHECK(compare_all(c, o) > 1000);
        // Every target, FP8 delayed scaling: column and row adapters, the FP8 base's weights.
        c.job.lora_targets = lora_target::all;
        c.job.compute = Dtype::fp8;
        c.job.weights = Dtype::fp8;
        o.fixed.mbs = 1;
        CHECK(compare_all(c, o) > 1000);
    }

    TEST_CASE("if_fits stops at a stage above stop_above and says the peak is a lower bound") {
        const Case c = load_case("gpt3-175b", "dgx-a100-80g", 64, 512, 2048);
        Plan p;  // tp 8, pp 8, dp 1, mbs 1, 1F1B: stage 0 holds 8 micro-batches, the most
        p.tp = 8;
        p.pp = 8;
        p.dp = 1;
        const Estimate full = estimate(c.model, c.cluster, c.job, p);
        Estimator est(c.model, c.cluster, c.job);
        MemoryCheck mc;
        // A bound below every stage: stage 0 alone exceeds it (and the usable memory when it does
        // not fit): the check stops, unless the plan fits.
        const auto e = est.if_fits(p, mc, bytes(0.0));
        if (full.fits) {
            CHECK(e.has_value());
            CHECK(mc.complete);
        } else {
            CHECK_FALSE(e.has_value());
            CHECK_FALSE(mc.complete);
            CHECK(mc.peak <= full.memory.total);
            CHECK(mc.stage == 0);
        }
        MemoryCheck all;
        (void)est.if_fits(p, all);
        CHECK(all.complete);
        CHECK(all.peak == full.memory.total);
    }
}

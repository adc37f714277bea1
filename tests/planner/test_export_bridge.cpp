// `cleave plan --format bridge`: Megatron-Bridge ConfigContainer overrides (issue 27).
#include "tests/cli_run.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>

namespace {

const std::string src_root = CLEAVE_TEST_DATA_DIR;

std::map<std::string, std::string> overrides(const std::string& text) {
    std::map<std::string, std::string> out;
    std::istringstream in(text);
    std::string line;
    while (std::getline(in, line)) {
        if (line.empty() || line[0] == '#') {
            continue;
        }
        if (line.size() > 2 && line.compare(line.size() - 2, 2, " \\") == 0) {
            line.resize(line.size() - 2);
        }
        const auto eq = line.find('=');
        REQUIRE(eq != std::string::npos);
        out[line.substr(0, eq)] = line.substr(eq + 1);
    }
    return out;
}

// The ConfigContainer override keys Megatron-Bridge takes: tests/data/megatron_bridge_fields.txt,
// every dataclass field under each ConfigContainer section at NVIDIA-NeMo/Megatron-Bridge
// @067f987df with the Megatron-LM it pins (scripts/bridge_fields.py wrote it).
std::set<std::string> bridge_keys() {
    std::ifstream in(src_root + "/tests/data/megatron_bridge_fields.txt");
    std::set<std::string> out;
    std::string line;
    while (std::getline(in, line)) {
        if (!line.empty() && line[0] != '#') {
            out.insert(line);
        }
    }
    return out;
}

bool known(const std::string& key, const std::set<std::string>& keys) {
    return keys.count(key) > 0;
}

}  // namespace

TEST_SUITE("planner") {
    TEST_CASE("bridge: the plan as ConfigContainer overrides Megatron-Bridge takes") {
        const auto flags = bridge_keys();
        REQUIRE(flags.size() > 500);
        // Llama 3 405B on 16384 H100, tp 8 x pp 16 x vpp 8, 7 / 8 / 7 layers: (126 + 2) / 16 = 8
        // per stage, one short at each end -> the account_for_* pair.
        const auto r = cleave::test::run_cleave(
            {"plan", src_root + "/examples/llama-3-405b.toml", "dgx-h100", "--gpus", "16384", "--gbs",
             "2048", "--seq", "8192", "--tp", "8", "--pp", "16", "--vpp", "8", "--cp", "2",
             "--first-stage-layers", "7", "--last-stage-layers", "7", "--format", "bridge"});
        REQUIRE_MESSAGE(r.code == 0, r.err);
        const auto o = overrides(r.out);
        for (const auto& [k, v] : o) {
            CAPTURE(k);
            CHECK(known(k, flags));
        }
        CHECK(o.at("train.global_batch_size") == "2048");
        CHECK(o.at("dataset.seq_length") == "8192");
        CHECK(o.at("model.tensor_model_parallel_size") == "8");
        CHECK(o.at("model.pipeline_model_parallel_size") == "16");
        CHECK(o.at("model.virtual_pipeline_model_parallel_size") == "8");
        CHECK(o.at("model.context_parallel_size") == "2");
        CHECK(o.at("model.account_for_embedding_in_pipeline_split") == "true");
        CHECK(o.at("model.account_for_loss_in_pipeline_split") == "true");
        CHECK(o.at("mixed_precision") == "bf16_mixed");
        CHECK(o.count("model.expert_model_parallel_size") == 0);  // dense
        // What the megatron-core stack priced (stacks/megatron-core.toml): DP overlap on (dp 64),
        // the fused cross entropy, no dropout, TP overlap with SP at tp 8.
        CHECK(o.at("ddp.overlap_grad_reduce") == "true");
        CHECK(o.at("model.cross_entropy_loss_fusion") == "true");
        CHECK(o.at("model.hidden_dropout") == "0.0");
        CHECK(o.at("comm_overlap.tp_comm_overlap") == "true");

        // Qwen3-30B-A3B, FP8 current scaling, the flex dispatcher with a2a overlap.
        const auto q = cleave::test::run_cleave(
            {"plan", src_root + "/examples/hf/qwen3-30b-a3b.config.json", "dgx-h100", "--gpus", "16",
             "--gbs", "1024", "--seq", "4096", "--ep", "8", "--dtype", "fp8", "--fp8-recipe",
             "tensorwise", "--moe-flex-dispatcher-backend", "deepep",
             "--overlap-moe-expert-parallel-comm", "--format", "bridge"});
        REQUIRE_MESSAGE(q.code == 0, q.err);
        const auto m = overrides(q.out);
        for (const auto& [k, v] : m) {
            CAPTURE(k);
            CHECK(known(k, flags));
        }
        CHECK(m.at("model.expert_model_parallel_size") == "8");
        CHECK(m.at("model.moe_token_dispatcher_type") == "flex");
        CHECK(m.at("model.moe_flex_dispatcher_backend") == "deepep");
        CHECK(m.at("comm_overlap.overlap_moe_expert_parallel_comm") == "true");
        CHECK(m.at("mixed_precision") == "bf16_with_fp8_current_scaling_mixed");
        // The recipe keeps 1 + 1 layers bf16 and gathers fp8 params; the price assumed neither:
        // the export says so, since KEY=VALUE cannot set fields of a recipe named by string.
        CHECK(q.out.find("# note: mixed_precision bf16_with_fp8_current_scaling_mixed sets "
                         "fp8_param_gather=true; the price assumed false") != std::string::npos);
        CHECK(q.out.find("keeps 1 + 1 layers bf16; the price assumed 0 + 0") != std::string::npos);
    }

    TEST_CASE("bridge and megatron: the precision-aware optimizer the price assumed is exported") {
        // Llama 3 70B with bf16 Adam moments: 2 + 2 bytes of states instead of 4 + 4.
        const std::vector<std::string> base = {
            "plan", src_root + "/examples/llama-3-70b.toml", "dgx-h100", "--gpus", "64", "--gbs", "256",
            "--tp", "4", "--pp", "2", "--use-precision-aware-optimizer", "--exp-avg-dtype", "bf16",
            "--exp-avg-sq-dtype", "bf16"};
        auto args = base;
        args.insert(args.end(), {"--format", "bridge"});
        const auto r = cleave::test::run_cleave(args);
        REQUIRE_MESSAGE(r.code == 0, r.err);
        const auto o = overrides(r.out);
        const auto keys = bridge_keys();
        for (const auto& [k, v] : o) {
            CAPTURE(k);
            CHECK(known(k, keys));
        }
        CHECK(o.at("optimizer.use_precision_aware_optimizer") == "true");
        CHECK(o.at("optimizer.exp_avg_dtype") == "bf16");
        CHECK(o.at("optimizer.exp_avg_sq_dtype") == "bf16");
        CHECK(o.at("optimizer.main_params_dtype") == "fp32");
        args = base;
        args.insert(args.end(), {"--format", "megatron"});
        const auto m = cleave::test::run_cleave(args);
        REQUIRE_MESSAGE(m.code == 0, m.err);
        CHECK(m.out.find("--use-precision-aware-optimizer") != std::string::npos);
        CHECK(m.out.find("--exp-avg-dtype bf16") != std::string::npos);
        CHECK(m.out.find("--exp-avg-sq-dtype bf16") != std::string::npos);
        // Without the knob, no precision-aware flags.
        const auto plain = cleave::test::run_cleave(
            {"plan", src_root + "/examples/llama-3-70b.toml", "dgx-h100", "--gpus", "64", "--gbs",
             "256", "--tp", "4", "--pp", "2", "--format", "megatron"});
        REQUIRE(plain.code == 0);
        CHECK(plain.out.find("--use-precision-aware-optimizer") == std::string::npos);
    }

    TEST_CASE("deepspeed: the ds_config parses back to the plan") {
        // The seed job under the DeepSpeed stack: train_batch_size = gbs, micro-batch and
        // accumulation steps = gbs / (mbs x dp), ZeRO stage and bf16 as planned.
        const auto r = cleave::test::run_cleave(
            {"plan", src_root + "/examples/seed-13b.toml", "dgx-a100-80g", "--gpus", "32", "--gbs",
             "128", "--stack", "deepspeed-zero3-2021", "--top", "1", "--format", "json"});
        REQUIRE(r.code == 0);
        const auto plan = nlohmann::json::parse(r.out)["plans"][0]["plan"];
        const auto ds = cleave::test::run_cleave(
            {"plan", src_root + "/examples/seed-13b.toml", "dgx-a100-80g", "--gpus", "32", "--gbs",
             "128", "--stack", "deepspeed-zero3-2021", "--format", "deepspeed"});
        REQUIRE(ds.code == 0);
        const auto c = nlohmann::json::parse(ds.out);
        const int64_t dp = plan["dp"].get<int64_t>();
        const int64_t mbs = plan["mbs"].get<int64_t>();
        CHECK(c["train_batch_size"] == 128);
        CHECK(c["train_micro_batch_size_per_gpu"] == mbs);
        CHECK(c["gradient_accumulation_steps"] == 128 / (mbs * dp));
        CHECK(c["zero_optimization"]["stage"] == plan["zero"]);
        CHECK(c["bf16"]["enabled"] == true);
        CHECK(c["pipeline"]["stages"] == plan["pp"]);
    }
}

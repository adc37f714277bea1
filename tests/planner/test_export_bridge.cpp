// `cleave plan --format bridge`: Megatron-Bridge ConfigContainer overrides (issue 27).
#include "tests/cli_run.hpp"

#include <doctest/doctest.h>

#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>

namespace {

const std::string root = CLEAVE_TEST_DATA_DIR;

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

std::set<std::string> megatron_flags() {
    std::ifstream in(root + "/tests/data/megatron_args.txt");
    std::set<std::string> out;
    std::string line;
    while (std::getline(in, line)) {
        if (line.rfind("--", 0) == 0) {
            out.insert(line);
        }
    }
    return out;
}

// A key is one Megatron-Bridge takes: model.* a Megatron-Core config field whose Megatron-LM flag
// (field '_' -> '-') is in tests/data/megatron_args.txt, or one of the fields Bridge's own code
// sets under that name (NVIDIA-NeMo/Megatron-Bridge @067f987df03b: scripts/training/run_recipe.py
// docstring for train.*, dataset.seq_length and the parallel sizes; recipes/common.py for ddp.*;
// scripts/performance/utils/overrides.py for cpu_offloading*, use_megatron_fsdp,
// data_parallel_sharding_strategy and the comm_overlap / moe_shared_expert_overlap trio;
// recipes/deepseek/gb200/deepseek_v4.py for num_layers_in_{first,last}_pipeline_stage and the
// account_for_* pair; training/config.py ConfigContainer.mixed_precision).
bool known(const std::string& key, const std::set<std::string>& flags) {
    static const std::set<std::string> bridge = {
        "train.global_batch_size", "train.micro_batch_size", "dataset.seq_length",
        "model.virtual_pipeline_model_parallel_size", "model.num_layers_in_first_pipeline_stage",
        "model.num_layers_in_last_pipeline_stage", "model.cpu_offloading",
        "model.cpu_offloading_weights", "model.moe_shared_expert_overlap",
        "ddp.use_distributed_optimizer", "ddp.grad_reduce_in_fp32", "ddp.use_megatron_fsdp",
        "ddp.data_parallel_sharding_strategy", "comm_overlap.overlap_moe_expert_parallel_comm",
        "comm_overlap.delay_wgrad_compute", "mixed_precision"};
    if (bridge.count(key) > 0) {
        return true;
    }
    // optimizer.* is Megatron-Core's OptimizerConfig, whose fields arguments.py turns into the
    // same-named flags (optimizer_config.py @d98e8a64: optimizer, muon_num_ns_steps, ...).
    const std::size_t dot = key.find('.');
    const std::string section = dot == std::string::npos ? "" : key.substr(0, dot);
    if (section != "model" && section != "optimizer") {
        return false;
    }
    std::string flag = "--" + key.substr(dot + 1);
    for (char& c : flag) {
        c = c == '_' ? '-' : c;
    }
    return flags.count(flag) > 0;
}

}  // namespace

TEST_SUITE("planner") {
    TEST_CASE("bridge: the plan as ConfigContainer overrides Megatron-Bridge takes") {
        const auto flags = megatron_flags();
        REQUIRE(flags.size() > 100);
        // Llama 3 405B on 16384 H100, tp 8 x pp 16 x vpp 8, 7 / 8 / 7 layers: (126 + 2) / 16 = 8
        // per stage, one short at each end -> the account_for_* pair.
        const auto r = cleave::test::run_cleave(
            {"plan", root + "/examples/llama-3-405b.toml", "dgx-h100", "--gpus", "16384", "--gbs",
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

        // Qwen3-30B-A3B, FP8 current scaling, the flex dispatcher with a2a overlap.
        const auto q = cleave::test::run_cleave(
            {"plan", root + "/examples/hf/qwen3-30b-a3b.config.json", "dgx-h100", "--gpus", "16",
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
    }
}

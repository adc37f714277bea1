// `cleave stack`, --stack, explain JSON `stack` and the exports' stack flags, in process.
#include "cli/app.hpp"
#include "core/plan.hpp"
#include "tests/cli_run.hpp"

#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

namespace {

using Run = cleave::test::CliRun;

Run cleave_cli(std::vector<std::string> args) {
    return cleave::test::run_cleave(std::move(args));
}

std::string data(const std::string& rel) {
    return std::string(CLEAVE_TEST_DATA_DIR) + "/" + rel;
}

/// `cleave CMD` on Llama 2 7B, 8 H100s, gbs 8, seq 4096, --stack deepspeed-zero3, then `more`.
Run hf_7b(const char* cmd, const std::vector<std::string>& more) {
    std::vector<std::string> args{cmd,
                                  data("examples/llama-2-7b.toml"),
                                  "dgx-h100",
                                  "--gpus",
                                  "8",
                                  "--gbs",
                                  "8",
                                  "--seq",
                                  "4096",
                                  "--stack",
                                  "deepspeed-zero3"};
    args.insert(args.end(), more.begin(), more.end());
    return cleave_cli(std::move(args));
}

bool has(const std::string& text, const std::string& what) {
    return text.find(what) != std::string::npos;
}

// A plan every stack can price: tiny model, 8 GPUs, dp 8 with the distributed optimizer.
std::vector<std::string> plan_args(const std::string& stack, const std::string& format) {
    std::vector<std::string> a = {"plan",
                                  data("examples/tiny.toml"),
                                  "dgx-h100",
                                  "--gpus",
                                  "8",
                                  "--gbs",
                                  "64",
                                  "--max-tp",
                                  "1",
                                  "--max-pp",
                                  "1",
                                  "--max-cp",
                                  "1",
                                  "--format",
                                  format};
    if (!stack.empty()) {
        a.push_back("--stack");
        a.push_back(stack);
    }
    return a;
}

}  // namespace

TEST_SUITE("core") {
    TEST_CASE("cmd stack: list names the six shipped stacks, megatron-core the default") {
        const Run r = cleave_cli({"stack", "list", "--format", "json"});
        REQUIRE(r.code == 0);
        const auto j = nlohmann::json::parse(r.out);
        std::vector<std::string> names;
        for (const auto& s : j) {
            names.push_back(s["name"]);
            CHECK(s["default"].get<bool>() == (s["name"] == "megatron-core"));
        }
        CHECK(names == std::vector<std::string>{"deepspeed-zero3",
                                                "deepspeed-zero3-2021",
                                                "llm-foundry-fsdp",
                                                "megatron-2021",
                                                "megatron-core",
                                                "torchtitan-fsdp2"});
        const Run show = cleave_cli({"stack", "show", "torchtitan-fsdp2", "--format", "json"});
        REQUIRE(show.code == 0);
        const auto s = nlohmann::json::parse(show.out);
        CHECK(s["export"]["torch_compile"] == true);
        CHECK(s["data_parallel"]["fsdp_prefetch"] == true);
        CHECK(s["model_code"] == "framework");
        // HF accelerate over DeepSpeed 0.6+: transformers' model code, backward gathers
        // prefetched (DeepSpeed PR #1453), flash-attn 2.
        const Run ds = cleave_cli({"stack", "show", "deepspeed-zero3", "--format", "json"});
        REQUIRE(ds.code == 0);
        const auto d = nlohmann::json::parse(ds.out);
        CHECK(d["model_code"] == "hf-transformers");
        CHECK(d["framework"] == "deepspeed");
        CHECK(d["data_parallel"]["fsdp_prefetch"] == true);
        CHECK(d["attention"]["impl"] == "fused");
        // Its model code splits the data only and checkpoints whole layers (Rule::model_code):
        // the planner searches dp x ZeRO x {none, full}, and a fixed --tp is refused, exit 2.
        const Run pl = hf_7b("plan", {"--top", "50", "--format", "json"});
        REQUIRE(pl.code == 0);
        const auto pj = nlohmann::json::parse(pl.out);
        REQUIRE(!pj["plans"].empty());
        for (const auto& p : pj["plans"]) {
            CHECK(p["plan"]["tp"] == 1);
            CHECK(p["plan"]["pp"] == 1);
            CHECK(p["plan"]["cp"] == 1);
            CHECK(p["plan"]["recompute"] != "selective");
        }
        CHECK(pj["rejected"]["stack"].get<int64_t>() > 0);
        const Run split = hf_7b("explain", {"--tp", "2"});
        CHECK(split.code == 2);
        CHECK(split.err.find("splits the data only") != std::string::npos);
        // Its export: a ds_config for accelerate / the HF Trainer, no PipelineModule section,
        // checkpointing and the LoRA adapters in transformers' names (Bridge's linear_qkv ->
        // q_proj, k_proj, v_proj; linear_proj -> o_proj).
        const Run ex = hf_7b("plan",
                             {"--peft",
                              "lora",
                              "--lora-dim",
                              "16",
                              "--lora-target-modules",
                              "linear_qkv,linear_proj",
                              "--recompute",
                              "full",
                              "--top",
                              "1",
                              "--format",
                              "deepspeed"});
        REQUIRE(ex.code == 0);
        const auto dsj = nlohmann::json::parse(ex.out);
        CHECK_FALSE(dsj.contains("pipeline"));
        CHECK_FALSE(dsj.contains("activation_checkpointing"));
        CHECK(dsj["train_batch_size"] == 8);
        CHECK(has(ex.err, "--gradient_checkpointing True"));
        CHECK(has(ex.err,
                  "LoraConfig(r=16, lora_alpha=32, target_modules=[\"q_proj\", "
                  "\"k_proj\", \"v_proj\", \"o_proj\"])"));
        // Explain says the host's time is not priced (the Juniper rows' gap).
        const Run cau = hf_7b("explain", {"--format", "json"});
        REQUIRE(cau.code == 0);
        const auto cj = nlohmann::json::parse(cau.out);
        bool host = false;
        for (const auto& c : cj["cautions"]) {
            host = host || has(c.get<std::string>(), "not the host's");
        }
        CHECK(host);
        // The rule table is indexed by the enum: its last entries in order.
        CHECK(std::string(cleave::rule_info(cleave::Rule::muon_sharding).name) == "muon_sharding");
        CHECK(std::string(cleave::rule_info(cleave::Rule::model_code).name) == "model_code");
        const Run old = cleave_cli({"stack", "show", "deepspeed-zero3-2021", "--format", "json"});
        REQUIRE(old.code == 0);
        CHECK(nlohmann::json::parse(old.out)["data_parallel"]["fsdp_prefetch"] == false);
        // megatron-core's TP overlap and the userbuffers presets it is priced with.
        const Run core = cleave_cli({"stack", "show", "megatron-core", "--format", "json"});
        REQUIRE(core.code == 0);
        const auto tp = nlohmann::json::parse(core.out)["tensor_parallel"];
        CHECK(tp["comm_overlap"] == true);
        CHECK(tp["overlap_row_fprop"] == "pipeline");
        CHECK(tp["overlap_row_fprop_quantised"] == "ring_exchange");
        CHECK(tp["overlap_pipeline_sm_fraction"] == 0.152);
        CHECK(tp["overlap_pipeline_splits"] == 4);
        CHECK(tp["overlap_bulk_sm_fraction"] == 0.064);
        const Run table = cleave_cli({"stack", "show", "megatron-core"});
        CHECK(has(table.out, "tensor_parallel.overlap_row_fprop_quantised  ring_exchange\n"));
        CHECK(cleave_cli({"stack", "show", "nope"}).code == 2);
    }

    TEST_CASE("cmd stack: explain JSON names the stack it priced with") {
        auto args = std::vector<std::string>{"explain",
                                             data("examples/tiny.toml"),
                                             "dgx-h100",
                                             "--gpus",
                                             "8",
                                             "--gbs",
                                             "64",
                                             "--format",
                                             "json"};
        const Run def = cleave_cli(args);
        REQUIRE(def.code == 0);
        CHECK(nlohmann::json::parse(def.out)["stack"]["name"] == "megatron-core");
        CHECK(nlohmann::json::parse(def.out)["stack"]["attention"] == "fused");
        args.push_back("--stack");
        args.push_back("megatron-2021");
        const Run old = cleave_cli(args);
        REQUIRE(old.code == 0);
        CHECK(nlohmann::json::parse(old.out)["stack"]["name"] == "megatron-2021");
        CHECK(nlohmann::json::parse(old.out)["stack"]["attention"] == "materialized");
    }

    TEST_CASE("cmd stack: --format megatron carries every flag the price assumed") {
        const Run r = cleave_cli(plan_args("", "megatron"));
        REQUIRE(r.code == 0);
        CHECK(has(r.out, "--attention-backend fused"));
        CHECK(has(r.out, "--hidden-dropout 0.0"));
        CHECK(has(r.out, "--cross-entropy-loss-fusion"));
        CHECK(has(r.out, "--grad-reduce-in-bf16"));  // megatron-core's recipe: bf16 main grads
        CHECK(has(r.out, "--overlap-grad-reduce"));  // dp 8
        // --overlap-param-gather exactly when the plan uses the distributed optimizer.
        CHECK(has(r.out, "--use-distributed-optimizer") == has(r.out, "--overlap-param-gather"));
        const Run old = cleave_cli(plan_args("megatron-2021", "megatron"));
        REQUIRE(old.code == 0);
        CHECK(has(old.out, "--attention-backend unfused"));
        CHECK(has(old.out, "--overlap-grad-reduce"));
        CHECK_FALSE(has(old.out, "--overlap-param-gather"));
        CHECK_FALSE(has(old.out, "--hidden-dropout"));
    }

    TEST_CASE("cmd stack: an export for another framework than the stack's stops with exit 2") {
        const Run r = cleave_cli(plan_args("torchtitan-fsdp2", "megatron"));
        CHECK(r.code == 2);
        CHECK(has(r.err, "priced for stack 'torchtitan-fsdp2' (framework torchtitan)"));
        CHECK(cleave_cli(plan_args("megatron-core", "deepspeed")).code == 2);
        const Run ds = cleave_cli(plan_args("deepspeed-zero3-2021", "deepspeed"));
        REQUIRE(ds.code == 0);
        CHECK(nlohmann::json::parse(ds.out)["zero_optimization"]["overlap_comm"] == true);
    }
}

// Software-stack loader: every shipped stack loads, values reach the struct, bad input names
// file:line:col and key.
#include "core/errors.hpp"
#include "core/job.hpp"
#include "core/load.hpp"
#include "core/stack.hpp"
#include "tests/core/diag_helpers.hpp"

#include <string>

#include <doctest/doctest.h>

using namespace cleave;
using cleave::test::diagnostics_of;
using cleave::test::expect_diagnostics;

namespace {

const char* const good_stack = R"([stack]
name = "s"
framework = "megatron"
year = 2025

[attention]
impl = "fused"
causal_skip = true
step_overhead_us = 10

[[attention.curve]]
gpu = "H100"
head_dim = 128
seq = [1024, 4096]
fwd_efficiency = [0.4, 0.5]
bwd_efficiency = [0.3, 0.45]

[memory]
hidden_dropout = false
fused_cross_entropy = true
grad_dtype = "bf16"

[data_parallel]
overlap_grad_reduce = true
overlap_param_gather = true
bucket_mparams = 40
fsdp_prefetch = true
reshard_after_forward = false
comm_sm_fraction = 0.15

[tensor_parallel]
comm_overlap = true
overlap_row_fprop = "pipeline"
overlap_row_fprop_quantised = "ring_exchange"
overlap_pipeline_sm_fraction = 0.152
overlap_pipeline_splits = 4
overlap_bulk_sm_fraction = 0.064

[pipeline]
p2p_overhead_us = 20

[export]
torch_compile = true
recompute_modules = ["core_attn", "mlp"]
)";

// The [tensor_parallel] keys good_stack's comm_overlap = true requires, as it writes them.
const char* const userbuffers_keys =
    "overlap_row_fprop = \"pipeline\"\n"
    "overlap_row_fprop_quantised = \"ring_exchange\"\n"
    "overlap_pipeline_sm_fraction = 0.152\n"
    "overlap_pipeline_splits = 4\n"
    "overlap_bulk_sm_fraction = 0.064\n";

std::string replace(std::string text, const std::string& from, const std::string& to) {
    const auto at = text.find(from);
    REQUIRE(at != std::string::npos);
    return text.replace(at, from.size(), to);
}

}  // namespace

TEST_SUITE("core") {
    TEST_CASE("stack: every key reaches SoftwareStack") {
        const SoftwareStack s = parse_stack_toml(good_stack, "s.toml");
        CHECK(s.name == "s");
        CHECK(s.display_name == "s");
        CHECK(s.source == "s.toml");
        CHECK(s.framework == StackFramework::megatron);
        CHECK(s.year == 2025);
        CHECK(s.attention == AttentionImpl::fused);
        CHECK(s.causal_skip);
        CHECK(s.attention_step_overhead_us == 10.0);
        REQUIRE(s.attention_curves.size() == 1);
        CHECK(s.attention_curves[0].gpu == "H100");
        CHECK(s.attention_curves[0].head_dim == 128.0);
        CHECK(s.attention_curves[0].seq == std::vector<double>{1024, 4096});
        CHECK(s.attention_curves[0].fwd == std::vector<double>{0.4, 0.5});
        CHECK(s.attention_curves[0].bwd == std::vector<double>{0.3, 0.45});
        CHECK_FALSE(s.hidden_dropout);
        CHECK(s.fused_cross_entropy);
        CHECK(s.grad_dtype == Dtype::bf16);
        CHECK(s.overlap_grad_reduce);
        CHECK(s.overlap_param_gather);
        CHECK(s.bucket_mparams == 40.0);
        CHECK(s.fsdp_prefetch);
        CHECK_FALSE(s.reshard_after_forward);
        CHECK(s.comm_sm_fraction == 0.15);
        CHECK(s.tp_comm_overlap);
        CHECK(s.tp_overlap_row_fprop == UbMethod::pipeline);
        CHECK(s.tp_overlap_row_fprop_quantised == UbMethod::ring_exchange);
        CHECK(s.tp_overlap_sm_fraction == 0.152);
        CHECK(s.tp_overlap_pipeline_splits == 4);
        CHECK(s.tp_overlap_bulk_sm_fraction == 0.064);
        CHECK(s.p2p_overhead_us == 20.0);
        CHECK(s.torch_compile);
        CHECK(s.recompute_modules == std::vector<std::string>{"core_attn", "mlp"});
    }

    TEST_CASE("stack: unknown keys, bad values and a short curve name their line:col") {
        std::string text = replace(good_stack, "causal_skip = true", "causal_skp = true");
        text = replace(text, "framework = \"megatron\"", "framework = \"jax\"");
        text = replace(text, "bwd_efficiency = [0.3, 0.45]", "bwd_efficiency = [0.3]");
        expect_diagnostics(
            [&] { (void)parse_stack_toml(text, "bad.toml"); },
            {{3,
              13,
              "'stack.framework' must be one of \"megatron\", \"deepspeed\", \"torchtitan\", "
              "\"llm-foundry\", got \"jax\""},
             {8, 1, "unknown key 'attention.causal_skp' (did you mean 'causal_skip'?)"},
             {16,
              18,
              "'attention.curve.bwd_efficiency' must have one value per 'attention.curve.seq' "
              "entry (2)"}});
    }

    TEST_CASE("stack: [stack] model_code reaches SoftwareStack, a bad one names line:col") {
        CHECK(parse_stack_toml(good_stack, "s.toml").model_code == ModelCode::framework);
        const std::string fw = "framework = \"megatron\"";
        CHECK(parse_stack_toml(replace(good_stack, fw, fw + "\nmodel_code = \"hf-transformers\""),
                               "s.toml")
                  .model_code == ModelCode::hf_transformers);
        CHECK(std::string(to_string(ModelCode::hf_transformers)) == "hf-transformers");
        expect_diagnostics(
            [&] {
                (void)parse_stack_toml(replace(good_stack, fw, fw + "\nmodel_code = \"hf\""),
                                       "bad.toml");
            },
            {{4,
              14,
              "'stack.model_code' must be one of \"framework\", \"hf-transformers\", got "
              "\"hf\""}});
    }

    TEST_CASE("stack: [memory] loss and loss_chunks reach SoftwareStack, bad ones name line:col") {
        CHECK(parse_stack_toml(good_stack, "s.toml").loss == LossImpl::unset);  // optional
        CHECK(parse_stack_toml(good_stack, "s.toml").loss_chunks == 1);
        const std::string dtype = "grad_dtype = \"bf16\"";
        const SoftwareStack s = parse_stack_toml(
            replace(good_stack, dtype, dtype + "\nloss = \"compiled\"\nloss_chunks = 8"), "s.toml");
        CHECK(s.loss == LossImpl::torch_compiled);
        CHECK(s.loss_chunks == 8);
        CHECK(std::string(to_string(LossImpl::te)) == "te");
        expect_diagnostics(
            [&] {
                (void)parse_stack_toml(replace(good_stack, dtype, dtype + "\nloss = \"fused\""),
                                       "bad.toml");
            },
            {{22,
              8,
              "'memory.loss' must be one of \"unfused\", \"native\", \"te\", \"eager\", "
              "\"compiled\", got \"fused\""}});
    }

    TEST_CASE("stack: the [moe] table reaches SoftwareStack, and absent it prices alltoall") {
        const SoftwareStack none = parse_stack_toml(good_stack, "s.toml");
        CHECK(none.moe_dispatcher == MoeDispatcher::alltoall);
        CHECK_FALSE(none.moe_a2a_overlap);
        CHECK(none.moe_grouped_gemm);
        CHECK(none.moe_sync_us == 0.0);
        const std::string moe = "[moe]\ndispatcher = \"deepep\"\na2a_overlap = true\n"
                                "grouped_gemm = false\nsync_us = 35\ngrouped_gemm_streams = 4\n\n"
                                "[export]";
        const SoftwareStack s = parse_stack_toml(replace(good_stack, "[export]", moe), "s.toml");
        CHECK(s.moe_dispatcher == MoeDispatcher::deepep);
        CHECK(s.moe_a2a_overlap);
        CHECK_FALSE(s.moe_grouped_gemm);
        CHECK(s.moe_sync_us == 35.0);
        CHECK(s.moe_grouped_gemm_streams == 4);
        CHECK(none.moe_grouped_gemm_streams == 0);
        CHECK_FALSE(s.moe_probs_in_experts);  // optional; absent = the combine scales outputs
        const SoftwareStack w = parse_stack_toml(
            replace(good_stack, "[export]", replace(moe, "sync_us = 35", "sync_us = 35\nprobs_in_experts = true")),
            "s.toml");
        CHECK(w.moe_probs_in_experts);
        // A dispatcher Megatron does not have, and an unknown key: file:line:col and key.
        std::string bad = replace(good_stack, "[export]", moe);
        bad = replace(bad, "\"deepep\"", "\"ring\"");
        bad = replace(bad, "sync_us = 35", "sync_us = 35\ncapacity = 1.25");
        expect_diagnostics([&] { (void)parse_stack_toml(bad, "bad.toml"); },
                           {{43,
                             14,
                             "'moe.dispatcher' must be one of \"alltoall\", \"allgather\", "
                             "\"deepep\", got \"ring\""},
                            {47, 1, "unknown key 'moe.capacity'"}});
    }

    TEST_CASE("stack: a missing required table and key are errors, not defaults") {
        std::string text = replace(
            good_stack, std::string("[tensor_parallel]\ncomm_overlap = true\n") + userbuffers_keys, "");
        text = replace(text, "grad_dtype = \"bf16\"\n", "");
        const auto ds = diagnostics_of([&] { (void)parse_stack_toml(text, "m.toml"); });
        REQUIRE(ds.size() == 2);
        CHECK(ds[0].message == "missing required key 'tensor_parallel' at the top level");
        CHECK(ds[1].message == "missing required key 'memory.grad_dtype' in [memory]");
        CHECK(ds[1].where.file == "m.toml");
        CHECK(ds[1].where.line == 18);
    }

    TEST_CASE("stack: TP overlap needs what it costs its GEMMs, without it the keys may go") {
        // comm_overlap = true: the userbuffers methods, SM shares and splits are required.
        const std::string bare = replace(good_stack, userbuffers_keys, "");
        const auto ds = diagnostics_of([&] { (void)parse_stack_toml(bare, "t.toml"); });
        REQUIRE(ds.size() == 5);
        CHECK(ds[0].message ==
              "missing required key 'tensor_parallel.overlap_row_fprop' in [tensor_parallel]");
        CHECK(ds[4].message ==
              "missing required key 'tensor_parallel.overlap_pipeline_splits' in [tensor_parallel]");
        // comm_overlap = false: none is needed, and the shares stay at what prices nothing.
        const SoftwareStack off =
            parse_stack_toml(replace(bare, "comm_overlap = true", "comm_overlap = false"), "t.toml");
        CHECK_FALSE(off.tp_comm_overlap);
        CHECK(off.tp_overlap_sm_fraction == 0.0);
        CHECK(off.tp_overlap_bulk_sm_fraction == 0.0);
        CHECK(off.tp_overlap_pipeline_splits == 1);
        // A share of all the SMs or more, and a method TE does not have, are refused with their line.
        std::string worse = replace(good_stack, "overlap_pipeline_sm_fraction = 0.152",
                                    "overlap_pipeline_sm_fraction = 1.5");
        worse = replace(worse, "overlap_row_fprop = \"pipeline\"", "overlap_row_fprop = \"bulk\"");
        const auto bad = diagnostics_of([&] { (void)parse_stack_toml(worse, "t.toml"); });
        REQUIRE(bad.size() == 2);
        CHECK(bad[0].message ==
              "'tensor_parallel.overlap_row_fprop' must be one of \"pipeline\", "
              "\"ring_exchange\", got \"bulk\"");
        CHECK(bad[0].where.line == 33);
        CHECK(bad[1].message.find("overlap_pipeline_sm_fraction") != std::string::npos);
        CHECK(bad[1].message.find("must be below 1") != std::string::npos);
        CHECK(bad[1].where.line == 35);
    }

    TEST_CASE(
        "stack: every shipped stack loads, and megatron-2021 prices as the built-in default") {
        const auto names = shipped_stacks();
        for (const char* want : {"megatron-core",
                                 "megatron-2021",
                                 "deepspeed-zero3-2021",
                                 "torchtitan-fsdp2",
                                 "llm-foundry-fsdp"}) {
            CAPTURE(want);
            CHECK(std::find(names.begin(), names.end(), want) != names.end());
            const SoftwareStack s = load_stack(want);
            CHECK(s.name == want);
            CHECK(!s.source.empty());
        }
        // Every field the cost model reads equals SoftwareStack{}: the published fit is unmoved.
        SoftwareStack legacy = load_stack("megatron-2021");
        legacy.display_name.clear();
        legacy.source.clear();
        // It names its loss (issue 48), which prices as unset does without a fused cross entropy:
        // 3 logits' worth (costmodel/loss.hpp, memory.cpp loss_buffer_count).
        CHECK(legacy.loss == LossImpl::megatron_unfused);
        legacy.loss = LossImpl::unset;
        CHECK(legacy == SoftwareStack{});
        const SoftwareStack core = load_stack("megatron-core");
        CHECK(core.attention == AttentionImpl::fused);
        CHECK(core.overlap_param_gather);
        CHECK(load_stack("torchtitan-fsdp2").torch_compile);
        CHECK(load_stack("torchtitan-fsdp2").framework == StackFramework::torchtitan);
        CHECK(load_stack("deepspeed-zero3-2021").framework == StackFramework::deepspeed);
        CHECK_FALSE(load_stack("deepspeed-zero3-2021").fsdp_prefetch);
    }

    TEST_CASE("stack: an unknown name lists the shipped stacks, [job] stack loads one") {
        CHECK_THROWS_WITH_AS((void)load_stack("nope"),
                             doctest::Contains("unknown software stack 'nope'"),
                             ConfigError);
        const JobSpec job = parse_job_toml(
            "[job]\ngpus = 8\nglobal_batch = 16\nstack = \"torchtitan-fsdp2\"\n", "j.toml");
        CHECK(job.stack.name == "torchtitan-fsdp2");
        const auto ds = diagnostics_of([] {
            (void)parse_job_toml("[job]\ngpus = 8\nglobal_batch = 16\nstack = \"nope\"\n",
                                 "j.toml");
        });
        REQUIRE(ds.size() == 1);
        CHECK(ds[0].where.line == 4);
        CHECK(ds[0].where.column == 9);
        CHECK(ds[0].message.find("'job.stack' cannot be loaded: unknown software stack 'nope'") ==
              0);
    }
}

// A layer's kernel launches, the GPU's gap between them and what CUDA graphs capture
// (costmodel/launches.hpp); the flags, their exports and the published rows' graphs. Values
// worked by hand in the comments.
#include "core/load.hpp"
#include "core/stack.hpp"
#include "costmodel/collectives.hpp"
#include "costmodel/compute.hpp"
#include "costmodel/launches.hpp"
#include "published/published.hpp"
#include "tests/cli_run.hpp"
#include "tests/costmodel/fixtures.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <sstream>

using namespace cleave;

namespace {

JobSpec megatron_job() {
    JobSpec j;
    j.gpus = 1;
    j.global_batch = 1;
    j.seq_len = 1024;
    j.stack = load_stack("megatron-core");
    return j;
}

Plan launch_plan() {
    Plan p;
    p.mbs = 1;
    return p;
}

LaunchInputs inputs_of(const ModelSpec& m, const JobSpec& j, const Plan& p) {
    const LayerTraffic tr = layer_traffic(m, j, p, false);
    LaunchInputs in;
    in.memory_fwd = tr.fwd_launches.total();
    in.memory_bwd = tr.bwd_launches.total();
    return in;
}

}  // namespace

TEST_SUITE("costmodel") {
    TEST_CASE("launches: a dense layer's launches by block, and what each graph scope leaves") {
        const ModelSpec m = test::gqa_1024();
        JobSpec j = megatron_job();
        const Plan p = launch_plan();
        const LaunchInputs in = inputs_of(m, j, p);
        // layer_traffic's memory-bound launches: 2 norms, 2 residual adds, RoPE on q and k, the
        // SwiGLU: 7 forward, 7 backward (no dropout, no extra gradient sums).
        CHECK(in.memory_fwd == 7.0);
        CHECK(in.memory_bwd == 7.0);
        const LayerLaunches l = layer_launches(m, j, p, false, true, true, in);
        // Attention block forward: QKV and projection GEMMs 2 + the core 1 + its norm, add and
        // RoPE 4 = 7; backward: 4 GEMMs (dgrad, wgrad) + the core + 7 x 4/7 = 9. The FFN block:
        // FC1, FC2 + the other 3 memory launches = 5; backward 4 + 3 = 7.
        CHECK(l.attn_fwd == doctest::Approx(7.0));
        CHECK(l.attn_bwd == doctest::Approx(9.0));
        CHECK(l.ffn_fwd == doctest::Approx(5.0));
        CHECK(l.ffn_bwd == doctest::Approx(7.0));
        // Eager: 12 + 16 launches at a 2 us gap = 56 us.
        GpuSpec gpu = test::dgx_a100().gpu;
        gpu.launch_gap = Seconds{2e-6};
        CHECK((launch_gap_time(gpu, j, l, false, true) + launch_gap_time(gpu, j, l, false, false))
                  .value() == doctest::Approx(56e-6));
        // Graphs: attn leaves the FFN block (5, 7); mlp the attention block (7, 9); the whole layer
        // or the whole step nothing.
        j.cuda_graph_impl = CudaGraphImpl::transformer_engine;
        j.cuda_graph_scope = cuda_graph_scope::attn;
        CHECK(uncaptured_launches(j, l, false, true) == doctest::Approx(5.0));
        CHECK(uncaptured_launches(j, l, false, false) == doctest::Approx(7.0));
        j.cuda_graph_scope = cuda_graph_scope::mlp;
        CHECK(uncaptured_launches(j, l, false, true) == doctest::Approx(7.0));
        j.cuda_graph_scope = cuda_graph_scope::layer;
        CHECK(uncaptured_launches(j, l, false, false) == 0.0);
        j.cuda_graph_impl = CudaGraphImpl::local;
        j.cuda_graph_scope = cuda_graph_scope::full_iteration;
        CHECK(uncaptured_launches(j, l, false, true) == 0.0);
        // A frozen base (LoRA on qkv and proj) has no wgrad: backward GEMMs halve, and each
        // adapter adds 4 launches forward and 6 backward: attention 7 + 8, 2 + 1 + 4 + 12.
        JobSpec lora = megatron_job();
        lora.peft = Peft::lora;
        lora.lora_targets = lora_target::linear_qkv | lora_target::linear_proj;
        const LayerLaunches ll = layer_launches(m, lora, p, false, true, true, in);
        CHECK(ll.attn_fwd == doctest::Approx(15.0));
        CHECK(ll.attn_bwd == doctest::Approx(2.0 + 1.0 + 4.0 + 12.0));
        CHECK(ll.ffn_bwd == doctest::Approx(2.0 + 3.0));
        // FP8: 4 casts a pass, shared by the blocks' GEMM counts (2 of 4 each).
        LaunchInputs q = in;
        q.casts = 4.0;
        const LayerLaunches lq = layer_launches(m, megatron_job(), p, false, true, true, q);
        CHECK(lq.attn_fwd == doctest::Approx(9.0));
        CHECK(lq.ffn_bwd == doctest::Approx(9.0));
    }

    TEST_CASE("launches: an MoE layer's router part is what moe_router / moe_preprocess capture") {
        ModelSpec m = test::gqa_1024();
        m.moe.experts = 8;
        m.moe.top_k = 2;
        m.moe.expert_ffn_hidden = 1024;
        JobSpec j = megatron_job();
        LaunchInputs in;
        in.memory_fwd = 12.0;
        in.memory_bwd = 12.0;
        in.local_experts = 8.0;
        in.batched_experts = true;
        const LayerLaunches l = layer_launches(m, j, launch_plan(), true, true, true, in);
        // FFN forward: the router GEMM 1 + the experts as one grouped call each for FC1 and FC2, 2,
        // + 12 - 4 memory launches = 11; the router part 5 (GEMM, softmax, top-k, preprocessing).
        CHECK(l.ffn_fwd == doctest::Approx(11.0));
        CHECK(l.router_fwd == 5.0);
        j.cuda_graph_impl = CudaGraphImpl::transformer_engine;
        j.cuda_graph_scope = cuda_graph_scope::attn | cuda_graph_scope::moe_router;
        CHECK(uncaptured_launches(j, l, true, true) == doctest::Approx(6.0));
        // A loop over the local experts: 2 x 8 expert GEMMs instead of 2.
        in.batched_experts = false;
        CHECK(layer_launches(m, j, launch_plan(), true, true, true, in).ffn_fwd == doctest::Approx(25.0));
    }

    TEST_CASE("launches: the graph flags, their exports, and the published rows' graphs") {
        const std::string model = std::string(CLEAVE_TEST_DATA_DIR) + "/examples/llama-3-70b.toml";
        const std::vector<std::string> base = {"plan", model, "dgx-h100", "--gpus", "64", "--gbs",
                                               "128", "--seq", "4096", "--top", "1"};
        const auto with = [&base](std::vector<std::string> extra) {
            std::vector<std::string> a = base;
            a.insert(a.end(), extra.begin(), extra.end());
            return test::run_cleave(a);
        };
        const auto mg = with({"--cuda-graph-impl", "transformer_engine", "--cuda-graph-scope",
                              "attn,mlp", "--format", "megatron"});
        REQUIRE(mg.code == 0);
        CHECK(mg.out.find("--cuda-graph-impl transformer_engine") != std::string::npos);
        CHECK(mg.out.find("--cuda-graph-scope attn mlp") != std::string::npos);
        const auto br = with({"--cuda-graph-impl", "local", "--format", "bridge"});
        REQUIRE(br.code == 0);
        CHECK(br.out.find("model.cuda_graph_impl=local") != std::string::npos);
        CHECK(br.out.find("model.cuda_graph_scope=[]") != std::string::npos);
        // The table says what it priced; JSON carries it.
        const auto txt = with({"--cuda-graph-impl", "transformer_engine", "--cuda-graph-scope", "attn,mlp"});
        REQUIRE(txt.code == 0);
        CHECK(txt.out.find("# cuda graphs: transformer_engine over attn,mlp: the launch gaps of their "
                           "scope not paid (2 us a launch on this GPU)") != std::string::npos);
        const auto js = test::run_cleave({"explain", model, "dgx-h100", "--gpus", "64", "--gbs", "128",
                                          "--seq", "4096", "--cuda-graph-impl", "local", "--format", "json"});
        REQUIRE(js.code == 0);
        const auto jj = nlohmann::json::parse(js.out);
        CHECK(jj["cuda_graphs"]["impl"] == "local");
        CHECK(jj["cuda_graphs"]["scope"] == "full");
        const auto no_impl = with({"--cuda-graph-scope", "attn"});
        CHECK(no_impl.code == 2);
        CHECK(no_impl.err.find("--cuda-graph-impl") != std::string::npos);
        const auto bad = with({"--cuda-graph-impl", "transformer_engine", "--cuda-graph-scope", "attn,layers"});
        CHECK(bad.code == 2);
        CHECK(bad.err.find("'layers'") != std::string::npos);
        const auto te_iter = with({"--cuda-graph-impl", "transformer_engine", "--cuda-graph-scope", "full_iteration"});
        CHECK(te_iter.code == 2);
        // The rows: MLPerf v4.1's "CUDA graphs (layer/mcore)" (row 5122) capture each layer; the
        // 2025 presets' "impl=transformer_engine scope=[moe_router, moe_preprocess]"; a v4.0 row
        // (5092) runs eager.
        std::ifstream in(std::string(CLEAVE_TEST_DATA_DIR) + "/tests/data/public_runs_mlperf.csv");
        REQUIRE(in.good());
        std::stringstream ss;
        ss << in.rdbuf();
        int graphs = 0;
        for (const auto& c : parse_public_runs(ss.str(), "public_runs_mlperf.csv")) {
            if (c.row_id == 5122) {
                CHECK(c.job.cuda_graph_impl == CudaGraphImpl::local);
                CHECK(c.job.cuda_graph_scope == cuda_graph_scope::layer);
            }
            if (c.row_id == 5092) {
                CHECK(c.job.cuda_graph_impl == CudaGraphImpl::none);
            }
            graphs += c.job.cuda_graph_impl != CudaGraphImpl::none ? 1 : 0;
        }
        CHECK(graphs == 11);
        std::ifstream in25(std::string(CLEAVE_TEST_DATA_DIR) + "/tests/data/public_runs_2025.csv");
        std::stringstream s25;
        s25 << in25.rdbuf();
        int te_router = 0;
        int full_iteration = 0;
        for (const auto& c : parse_public_runs(s25.str(), "public_runs_2025.csv")) {
            te_router += c.job.cuda_graph_impl == CudaGraphImpl::transformer_engine &&
                                 c.job.cuda_graph_scope ==
                                     (cuda_graph_scope::moe_router | cuda_graph_scope::moe_preprocess)
                             ? 1
                             : 0;
            full_iteration += c.job.cuda_graph_scope == cuda_graph_scope::full_iteration ? 1 : 0;
        }
        CHECK(te_router == 3);
        CHECK(full_iteration == 5);
    }
}

// The trace beside the price: cleave's layer cost by the trace's kernel classes
// (costmodel/kernel_classes.hpp), explain --trace, calibrate --from-trace and the overlay it
// writes (--calibration, [gpu] gemm_efficiency_factor_<dtype>, attention_factor).
#include "api/trace.hpp"
#include "core/calibration.hpp"
#include "core/errors.hpp"
#include "core/load.hpp"
#include "costmodel/collectives.hpp"
#include "costmodel/kernel_classes.hpp"
#include "tests/cli_run.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace {

using namespace cleave;

const std::string kDeepSeek =
    std::string(CLEAVE_TEST_DATA_DIR) + "/../shared/traces/deepseek-v3-train-h800.json";
const std::string kDeepSeekModel = std::string(CLEAVE_TEST_DATA_DIR) + "/examples/hf/deepseek-v3.config.json";

// DeepSeek-V3 as trained (issue 47's command): EP 64, PP 16, FP8 blockwise, DeepEP, 1F1B.
std::vector<std::string> deepseek_job() {
    return {kDeepSeekModel, "h800", "--gpus", "2048", "--gbs", "15360", "--seq", "4096", "--pp", "16",
            "--ep", "64", "--etp", "1", "--mbs", "1", "--zero", "1", "--dtype", "fp8",
            "--fp8-recipe", "blockwise", "--first-stage-layers", "3", "--last-stage-layers", "2",
            "--recompute-modules", "layernorm,mla_up_proj,moe_act", "--moe-router-num-groups", "8",
            "--moe-router-group-topk", "4", "--moe-token-dispatcher-type", "flex",
            "--moe-flex-dispatcher-backend", "deepep", "--schedule", "1f1b"};
}

std::vector<std::string> with(std::vector<std::string> head, const std::vector<std::string>& tail) {
    head.insert(head.end(), tail.begin(), tail.end());
    return head;
}

Seconds s(double x) { return Seconds{x}; }

}  // namespace

// By hand: gemm 3 + recompute_gemm 0.4 = 3.4; attention 1 + softmax 0.1 + recompute 0.3 = 1.4;
// norm 0.3 + 0.1 = 0.4; activation 0.4 + 0.1 = 0.5; elementwise: memory 2 less the named 1.5 =
// 0.5, plus the recompute not named (1 - 0.9 = 0.1) = 0.6; communication 0.2 + 0.3 + 0.1 = 0.6;
// other = the expert overhead 0.05. compute() = 3.4 + 1.4 + 0.5 + 0.4 + 0.5 + 0.6 + 0.2 + 0.05 =
// 7.05 = gemm + attention + memory + recompute + expert overhead (3 + 1 + 2 + 1 + 0.05).
TEST_CASE("layer_class_times splits a layer's cost by the trace's classes, as worked by hand") {
    LayerCost lc;
    LayerClasses k;
    lc.gemm = s(3.0);
    lc.attention = s(1.0);
    lc.memory = s(2.0);
    k.quantize = s(0.5);
    k.norm = s(0.3);
    k.activation = s(0.4);
    k.softmax = s(0.1);
    k.permute = s(0.2);
    lc.recompute = s(1.0);
    k.recompute_gemm = s(0.4);
    k.recompute_attention = s(0.3);
    k.recompute_norm = s(0.1);
    k.recompute_activation = s(0.1);
    lc.tp_fwd = s(0.2);
    lc.tp_bwd = s(0.3);
    lc.ep_fwd = s(0.1);
    lc.expert_overhead = s(0.05);
    const ClassTimes t = layer_class_times(lc, k);
    CHECK(t.gemm.value() == doctest::Approx(3.4));
    CHECK(t.attention.value() == doctest::Approx(1.4));
    CHECK(t.quantize.value() == doctest::Approx(0.5));
    CHECK(t.norm.value() == doctest::Approx(0.4));
    CHECK(t.activation.value() == doctest::Approx(0.5));
    CHECK(t.moe_permute.value() == doctest::Approx(0.2));
    CHECK(t.elementwise.value() == doctest::Approx(0.6));
    CHECK(t.communication.value() == doctest::Approx(0.6));
    CHECK(t.other.value() == doctest::Approx(0.05));
    CHECK(t.compute().value() == doctest::Approx(7.05));
    CHECK((t * 2.0).gemm.value() == doctest::Approx(6.8));
}

TEST_CASE("a priced layer's classes add up to its forward, backward and recompute") {
    // Llama 3 8B on an H100 and DeepSeek-V3's MoE layer under FP8 with selective recompute.
    struct Case {
        std::string model;
        std::string cluster;
        Dtype dtype;
        Recompute rc;
        uint16_t modules;
        bool moe;
    };
    const std::string hf = std::string(CLEAVE_TEST_DATA_DIR) + "/examples/";
    for (const Case& c : {Case{hf + "llama-3-8b.toml", "dgx-h100", Dtype::bf16, Recompute::none, 0, false},
                          Case{hf + "llama-3-8b.toml", "dgx-h100", Dtype::bf16, Recompute::full, 0, false},
                          Case{kDeepSeekModel, "h800", Dtype::fp8, Recompute::selective,
                               static_cast<uint16_t>(recompute_module::layernorm | recompute_module::moe_act |
                                                     recompute_module::mla_up_proj),
                               true}}) {
        CAPTURE(c.model);
        const ModelSpec m = load_model(c.model);
        const ClusterSpec cl = load_cluster(c.cluster);
        JobSpec job;
        job.seq_len = 4096;
        job.compute = c.dtype;
        job.gpus = 64;
        job.global_batch = 64;
        Plan p;
        p.tp = c.moe ? 1 : 2;
        p.ep = c.moe ? 8 : 1;
        p.mbs = 1;
        p.recompute = c.rc;
        p.recompute_modules = c.modules;
        LayerClasses k;
        const LayerCost lc = layer_cost(m, cl, job, p, plan_links(cl, p), c.moe, LayerShape::full, &k);
        const ClassTimes t = layer_class_times(lc, k);
        // The planner's call (no classes asked for) prices the layer the same.
        CHECK(layer_cost(m, cl, job, p, plan_links(cl, p), c.moe, LayerShape::full) == lc);
        // The kernels' classes and the gaps between the launches (no kernel's) add up.
        CHECK((t.compute() + t.gaps).value() ==
              doctest::Approx((lc.fwd + lc.bwd + lc.recompute).value()).epsilon(1e-9));
        CHECK(t.gemm.value() > 0.0);
        CHECK(t.norm.value() > 0.0);
        if (c.dtype == Dtype::fp8) {
            CHECK(t.quantize.value() > 0.0);
            CHECK(t.moe_permute.value() > 0.0);
        }
    }
}

TEST_CASE("explain --trace: DeepSeek's trace beside the price of 4 MoE layers") {
    if (!std::filesystem::exists(kDeepSeek)) {
        MESSAGE("skipped: " << kDeepSeek << " is not here");
        return;
    }
    const auto r = test::run_cleave(
        with(with({"explain"}, deepseek_job()), {"--trace", kDeepSeek, "--trace-scope", "layers=4", "--format", "json"}));
    INFO(r.err);
    REQUIRE(r.code == 0);
    const auto j = nlohmann::json::parse(r.out)["trace"];
    CHECK(j["scope"] == "layers=4");
    CHECK(j["measured_ms"]["gemm"].get<double>() == doctest::Approx(75.06).epsilon(0.001));
    CHECK(j["measured_ms"]["compute"].get<double>() == doctest::Approx(130.60).epsilon(0.001));
    // The classes cleave prices add up to its compute; communication kernels are not priced as such.
    double sum = 0.0;
    for (const char* k : {"gemm", "attention", "quantize", "norm", "activation", "elementwise", "moe_permute", "other"}) {
        sum += j["predicted_ms"][k].get<double>();
    }
    CHECK(j["predicted_ms"]["compute"].get<double>() == doctest::Approx(sum));
    CHECK(j["predicted_ms"]["communication"].is_null());
    const auto np = j["not_priced"];
    CHECK(std::find(np.begin(), np.end(), "communication") != np.end());
    // The table prints the same rows.
    const auto t = test::run_cleave(with(with({"explain"}, deepseek_job()), {"--trace", kDeepSeek, "--trace-scope", "layers=4"}));
    CHECK(t.out.find("The trace beside the price (--trace-scope layers=4)") != std::string::npos);
    CHECK(t.out.find("not priced") != std::string::npos);
    // Scopes cleave cannot price are refused with the reason.
    const auto bad = test::run_cleave(with(with({"explain"}, deepseek_job()), {"--trace", kDeepSeek, "--trace-scope", "layers=99"}));
    CHECK(bad.code == 2);
    CHECK(bad.err.find("holds") != std::string::npos);
    const auto bad2 = test::run_cleave(with(with({"explain"}, deepseek_job()), {"--trace", kDeepSeek, "--trace-scope", "layer4"}));
    CHECK(bad2.code == 2);
    CHECK(bad2.err.find("--trace-scope") != std::string::npos);
}

TEST_CASE("calibrate --from-trace: GEMM, attention and casts within 5 % of DeepSeek's trace after") {
    if (!std::filesystem::exists(kDeepSeek)) {
        MESSAGE("skipped: " << kDeepSeek << " is not here");
        return;
    }
    const std::string out = (std::filesystem::temp_directory_path() / "cleave_test_ds_overlay.toml").string();
    const auto r = test::run_cleave(with(with({"calibrate", "--from-trace", kDeepSeek}, deepseek_job()),
                                         {"--trace-scope", "layers=4", "--out", out}));
    INFO(r.out << r.err);
    REQUIRE(r.code == 0);
    std::ifstream f(out);
    std::stringstream text;
    text << f.rdbuf();
    const Calibration cal = parse_calibration_toml(text.str(), out);
    CHECK(cal.profile == "h800");
    CHECK(cal.trace_crc32 == "b9ebe1c7");  // crc32 of the 3,132,978-byte file as stored
    REQUIRE(cal.gemm_factor_by_dtype.size() == 1);
    CHECK(cal.gemm_factor_by_dtype[0].first == "fp8");
    CHECK(cal.gemm_factor_by_dtype[0].second < 1.0);  // the trace's GEMMs are slower than priced
    CHECK(cal.attention_factor.has_value());
    CHECK_FALSE(cal.not_informed.empty());
    // The same plan priced with the overlay: GEMM, attention and quantise match the trace.
    const auto e = test::run_cleave(with(with({"explain"}, deepseek_job()),
                                         {"--calibration", out, "--trace", kDeepSeek, "--trace-scope", "layers=4", "--format", "json"}));
    REQUIRE(e.code == 0);
    const auto j = nlohmann::json::parse(e.out)["trace"];
    for (const char* k : {"gemm", "attention", "quantize"}) {
        CAPTURE(k);
        CHECK(j["predicted_ms"][k].get<double>() == doctest::Approx(j["measured_ms"][k].get<double>()).epsilon(0.05));
    }
    // An overlay for another profile is refused with the reason.
    std::vector<std::string> job = deepseek_job();
    job[1] = "dgx-h100";
    const auto wrong = test::run_cleave(with(with({"explain"}, job), {"--calibration", out}));
    CHECK(wrong.code == 2);
    CHECK(wrong.err.find("profile = \"h800\"") != std::string::npos);
}

// By hand: h800's fp8 curve (or, where it has none, its 16-bit one) times 0.5 at every point;
// the 16-bit curve is left as it was.
TEST_CASE("an overlay's gemm_efficiency_factor_fp8 scales the fp8 curve alone") {
    const ClusterSpec before = load_cluster("h800");
    const Calibration cal = parse_calibration_toml(
        "[calibration]\nprofile = \"h800\"\nfitted_on = \"t.json\"\n[gpu]\ngemm_efficiency_factor_fp8 = 0.5\n"
        "attention_factor = 0.8\nquantize_efficiency = 0.3\n",
        "o.toml");
    ClusterSpec after = before;
    apply_calibration(cal, after);
    const auto& f0 = gemm_curve(before.gpu, Dtype::fp8);
    const auto& f1 = gemm_curve(after.gpu, Dtype::fp8);
    REQUIRE(f0.size() == f1.size());
    for (size_t i = 0; i < f0.size(); ++i) {
        CHECK(f1[i].efficiency == doctest::Approx(f0[i].efficiency * 0.5));
    }
    CHECK(after.gpu.gemm_efficiency == before.gpu.gemm_efficiency);
    CHECK(after.gpu.attention_factor == doctest::Approx(0.8));
    CHECK(after.gpu.quantize_efficiency == doctest::Approx(0.3));
    CHECK_THROWS_AS((void)parse_calibration_toml(
                        "[calibration]\nprofile = \"h800\"\nfitted_on = \"t.json\"\n[trace]\nfile = \"x\"\n", "o.toml"),
                    ConfigError);  // [trace] without its crc32
}

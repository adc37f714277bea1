// torchao Float8 as torchtitan runs it, release by release (costmodel/float8.hpp): the stack's
// [[float8.release]] rows, what each recipe keeps for backward, what the FSDP all-gather moves,
// the cast kernels, and the --float8-* flags. Values worked by hand in the comments.
#include "core/load.hpp"
#include "core/stack.hpp"
#include "costmodel/compute.hpp"
#include "costmodel/float8.hpp"
#include "costmodel/flops.hpp"
#include "costmodel/memory.hpp"
#include "costmodel/precision.hpp"
#include "tests/cli_run.hpp"

#include <doctest/doctest.h>

using namespace cleave;

namespace {

ModelSpec llama8b() {
    return load_model(std::string(CLEAVE_TEST_DATA_DIR) + "/examples/llama-3-8b.toml");
}

/// Llama 3 8B on 8 GPUs, fp8 under torchtitan at `release` ("" = the stack's own, b5bcd76c66).
JobSpec titan_fp8(const std::string& release) {
    JobSpec j;
    j.gpus = 8;
    j.global_batch = 16;
    j.seq_len = 8192;
    j.stack = load_stack("torchtitan-fsdp2");
    j.stack.release = release;
    j.grads = j.stack.grad_dtype;
    j.compute = Dtype::fp8;
    return j;
}

Plan fsdp8() {
    Plan p;
    p.dp = 8;
    p.mbs = 2;
    p.zero = 3;
    return p;
}

// Llama 3 8B, one layer, t = 1: attention 4096 x (4096 + 2 x 1024) + 4096 x 4096 = 41,943,040;
// MLP 3 x 4096 x 14,336 = 176,160,768: 218,103,808 converted weights.
constexpr double layer_linear = 218103808.0;

}  // namespace

TEST_SUITE("costmodel") {
    TEST_CASE("float8: the stack's releases, the row in force, the defaults of each") {
        const SoftwareStack s = load_stack("torchtitan-fsdp2");
        REQUIRE(s.float8_releases.size() == 4);
        CHECK(s.float8_releases[0].release == "24.12");
        CHECK(s.float8_releases[0].commit == "9dec370");
        CHECK(s.float8_releases[0].saves_float8_input);
        CHECK(s.float8_releases[1].saves_float8_weight);
        CHECK_FALSE(s.float8_releases[1].saves_float8_input);
        CHECK(s.float8_releases[3].recipes.front() == Float8Recipe::rowwise);
        CHECK(float8_release(s)->release == "26.04");  // no --release: the stack's torchtitan
        SoftwareStack at = s;
        at.release = "25.03";
        CHECK(float8_release(at)->release == "25.02");  // the latest row not after it
        at.release = "23.01";
        CHECK(float8_release(at)->release == "24.12");  // before all: the oldest
        CHECK(load_stack("megatron-core").float8_releases.empty());

        const Float8Run now = float8_run(titan_fp8(""));
        CHECK(now.active);
        CHECK(now.recipe == Float8Recipe::rowwise);
        CHECK_FALSE(now.fsdp_all_gather);
        CHECK_FALSE(now.saves_float8_weight);
        const Float8Run old = float8_run(titan_fp8("24.12"));
        CHECK(old.recipe == Float8Recipe::tensorwise);
        CHECK(old.saves_float8_input);
        CHECK(old.saves_float8_weight);
        JobSpec bf16 = titan_fp8("");
        bf16.compute = Dtype::bf16;
        CHECK_FALSE(float8_run(bf16).active);
        JobSpec te = titan_fp8("");
        te.stack = load_stack("megatron-core");
        CHECK_FALSE(float8_run(te).active);  // Transformer Engine's fp8 (precision.hpp)
    }

    TEST_CASE("float8: what each release accepts") {
        JobSpec j = titan_fp8("");
        CHECK(float8_settings_error(j).empty());
        j.float8.recipe = Float8Recipe::tensorwise;  // gone at 6348d93d1
        CHECK(float8_settings_error(j).find("not one torchtitan 6348d93d1") != std::string::npos);
        j = titan_fp8("25.02");
        j.float8.recipe = Float8Recipe::rowwise;
        j.float8.fsdp_all_gather = true;  // torchao: tensorwise only
        CHECK(float8_settings_error(j).find("tensorwise recipe only") != std::string::npos);
        j.float8.recipe = Float8Recipe::tensorwise;
        CHECK(float8_settings_error(j).empty());
        j.float8.force_recompute_weight = true;  // a key from 473674acf to 1fefaee08
        CHECK(float8_settings_error(j).empty());
        j.stack.release = "25.07";
        CHECK(float8_settings_error(j).find("not a key of torchtitan 1fefaee08") != std::string::npos);
        j = titan_fp8("24.12");
        j.float8.precompute_scale = true;  // without the all-gather
        CHECK(float8_settings_error(j).find("needs the FSDP float8 all-gather") != std::string::npos);
    }

    TEST_CASE("float8: saved for backward per recipe, one Linear and one layer") {
        // wq of Llama 3 8B, one micro-batch of 2 x 8192 = 16,384 tokens, K = 4096: its input kept
        // for the weight gradient. 24.12 tensorwise (torchao eab345c saves input_fp8):
        // 1 B x 16,384 x 4096 = 67,108,864 B; from 25.02 every recipe saves input_hp:
        // 2 B x 16,384 x 4096 = 134,217,728 B.
        const double mk = 16384.0 * 4096.0;
        CHECK(float8_saved_input_bytes(titan_fp8("24.12")) * mk == 67108864.0);
        for (const char* rel : {"25.02", "25.07", ""}) {
            CAPTURE(rel);
            CHECK(float8_saved_input_bytes(titan_fp8(rel)) * mk == 134217728.0);
        }
        JobSpec gw = titan_fp8("");
        gw.float8.recipe = Float8Recipe::rowwise_with_gw_hp;
        CHECK(float8_saved_input_bytes(gw) * mk == 134217728.0);
        // Its weight, 4096 x 4096: tensorwise to torchao c6de9b42a (rows 24.12, 25.02) saves the
        // unsharded weight_fp8_t, 16,777,216 B, unless it is the float8 all-gather's own
        // parameter (FSDP frees it) or recast in backward (force_recompute); later none.
        JobSpec j = titan_fp8("24.12");
        CHECK(float8_saved_weight_bytes_per_param(j) * 4096.0 * 4096.0 == 16777216.0);
        j.float8.fsdp_all_gather = true;
        CHECK(float8_saved_weight_bytes_per_param(j) == 0.0);
        j = titan_fp8("25.02");
        CHECK(float8_saved_weight_bytes_per_param(j) * 4096.0 * 4096.0 == 16777216.0);
        j.float8.force_recompute_weight = true;
        CHECK(float8_saved_weight_bytes_per_param(j) == 0.0);
        CHECK(float8_saved_weight_bytes_per_param(titan_fp8("25.07")) == 0.0);

        // One layer, no checkpointing, compiled blocks (the norms keep their 16-bit input), per
        // token, t = 1: bf16 keeps norm inputs 2 x 2h, QKV and MLP inputs 2 x 2h, Q K V and the
        // attention output 2 x (4096 + 1024 + 1024 + 4096), up output 2 x 2f, down input 2f and
        // the fp32 log-sum-exp 4 x 32: 16,384 + 16,384 + 20,480 + 86,016 + 128 = 139,392 B.
        // 24.12 tensorwise: QKV and MLP inputs 1 B (8,192), the projection's fp8 copy beside
        // the attention output (+4,096), the down input f at 1 B (71,680 for the MLP):
        // 16,384 + 8,192 + 24,576 + 71,680 + 128 = 120,960 B, plus the layer's fp8 weights.
        const ModelSpec m = llama8b();
        Plan p = fsdp8();
        const double tok = 16384.0;
        JobSpec bf = titan_fp8("");
        bf.compute = Dtype::bf16;
        CHECK(activation_per_layer(m, bf, p, false, Recompute::none).value() ==
              doctest::Approx(139392.0 * tok));
        CHECK(activation_per_layer(m, titan_fp8(""), p, false, Recompute::none).value() ==
              doctest::Approx(139392.0 * tok));  // rowwise keeps bf16
        CHECK(activation_per_layer(m, titan_fp8("24.12"), p, false, Recompute::none).value() ==
              doctest::Approx(120960.0 * tok + layer_linear));
        JobSpec ag = titan_fp8("24.12");
        ag.float8.fsdp_all_gather = true;
        CHECK(activation_per_layer(m, ag, p, false, Recompute::none).value() ==
              doctest::Approx(120960.0 * tok));
        // A checkpointed block keeps its input alone: 2 B x 4096 per token, fp8 or not.
        CHECK(activation_per_layer(m, titan_fp8("24.12"), p, false, Recompute::full).value() ==
              doctest::Approx(8192.0 * tok));
    }

    TEST_CASE("float8: the FSDP all-gather moves float8 weights, half the bytes of bf16") {
        const ModelSpec m = llama8b();
        const Plan p = fsdp8();
        CHECK(float8_linear_params(m, p, 1.0) == layer_linear);
        // Two blocks gathered (the running one and the prefetched one), block = the converted
        // weights + 2 RMSNorm weights of 4096: bf16 2 x 2 x 218,112,000 = 872,448,000 B; float8
        // all-gather 2 x (218,103,808 x 1 + 8192 x 2) = 436,240,384 B.
        JobSpec j = titan_fp8("24.12");
        CHECK(float8_gather_bytes_per_param(j) == 2.0);
        CHECK(zero3_gather_bytes(m, j, p).value() == doctest::Approx(872448000.0));
        j.float8.fsdp_all_gather = true;
        j.float8.precompute_scale = true;
        CHECK(float8_gather_bytes_per_param(j) == 1.0);
        CHECK(zero3_gather_bytes(m, j, p).value() == doctest::Approx(436240384.0));
    }

    TEST_CASE("float8: cast bytes and kernels per recipe, weights recast every micro-batch") {
        const GpuSpec h100 = load_cluster("dgx-h100").gpu;
        const GpuSpec b200 = load_cluster("dgx-b200").gpu;
        JobSpec tw = titan_fp8("25.02");  // tensorwise, the release's default
        JobSpec rw = titan_fp8("");       // rowwise
        JobSpec gw = titan_fp8("");
        gw.float8.recipe = Float8Recipe::rowwise_with_gw_hp;
        // Per activation element: tensorwise 2 (amax) + 2 (cast) + 2 layouts x 1 on Hopper = 6,
        // one layout on Blackwell = 5; rowwise 2 axes x (2 + 1) = 6; with_gw_hp 2 + 1 = 3.
        CHECK(quantise_bytes_per_element(h100, tw) == 6.0);
        CHECK(quantise_bytes_per_element(b200, tw) == 5.0);
        CHECK(quantise_bytes_per_element(h100, rw) == 6.0);
        CHECK(quantise_bytes_per_element(h100, gw) == 3.0);
        // Kernels per layer and pass: one per GEMM's operand (QKV, projection, MLP up, down:
        // 4), rowwise two (one per axis): 8.
        const ModelSpec m = llama8b();
        const Plan p = fsdp8();
        CHECK(layer_quantise_bytes(h100, tw, layer_gemms(m, tw, p, false)).tensors == 4.0);
        CHECK(layer_quantise_bytes(h100, rw, layer_gemms(m, rw, p, false)).tensors == 8.0);
        // No cached float8 weight copies (TE keeps them; torchao recasts at each use).
        CHECK(weight_copy_bytes_per_param(h100, tw) == 0.0);
        // One layer's weights per micro-batch on Hopper: 24.12 casts once (the forward's fp8
        // weight is saved for backward): 6 x 218,103,808 = 1,308,622,848 B; from torchao
        // c6de9b42a backward recasts: 2 x 6 x 218,103,808 = 2,617,245,696 B; under the float8 all-gather each
        // gather casts the local shard, / 8: 327,155,712 B.
        CHECK(float8_weight_cast_bytes(h100, titan_fp8("24.12"), layer_linear, 8.0).value() ==
              doctest::Approx(1308622848.0));
        CHECK(float8_weight_cast_bytes(h100, rw, layer_linear, 8.0).value() ==
              doctest::Approx(2617245696.0));
        tw.float8.fsdp_all_gather = true;
        CHECK(float8_weight_cast_bytes(h100, tw, layer_linear, 8.0).value() ==
              doctest::Approx(327155712.0));
        // TP gathers float8 inputs under tensorwise only (rowwise communicates in bf16).
        CHECK(gathered_bytes_per_element(tw, 2.0) == 1.0);
        CHECK(gathered_bytes_per_element(rw, 2.0) == 2.0);
    }

    TEST_CASE("float8: the --float8-* flags, checked against the release") {
        const std::string model = std::string(CLEAVE_TEST_DATA_DIR) + "/examples/llama-3-8b.toml";
        const auto plan = [&](std::vector<std::string> extra) {
            std::vector<std::string> a = {"plan", model, "dgx-h100", "--gpus", "8", "--gbs", "16",
                                          "--seq", "8192", "--stack", "torchtitan-fsdp2",
                                          "--dtype", "fp8", "--top", "1", "--format", "json"};
            a.insert(a.end(), extra.begin(), extra.end());
            return test::run_cleave(a);
        };
        CHECK(plan({}).code == 0);
        CHECK(plan({"--float8-recipe", "rowwise_with_gw_hp"}).code == 0);
        const test::CliRun gone = plan({"--float8-recipe", "tensorwise"});
        CHECK(gone.code == 2);
        CHECK(gone.err.find("rowwise, rowwise_with_gw_hp") != std::string::npos);
        CHECK(plan({"--release", "24.12", "--float8-fsdp-all-gather", "on",
                    "--float8-precompute-scale", "on"})
                  .code == 0);
        CHECK(plan({"--release", "25.02", "--float8-recipe", "rowwise", "--float8-fsdp-all-gather",
                    "on"})
                  .code == 2);
        const test::CliRun bf = test::run_cleave(
            {"plan", model, "dgx-h100", "--gpus", "8", "--gbs", "16", "--seq", "8192", "--stack",
             "torchtitan-fsdp2", "--float8-recipe", "rowwise"});
        CHECK(bf.code == 2);
        CHECK(bf.err.find("--float8-* flags need --dtype fp8") != std::string::npos);
    }
}

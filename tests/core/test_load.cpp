// Model and job TOML loaders: good files, and every class of bad input with the exact line and
// column of each diagnostic (STYLE S4, S7.3).
#include "core/errors.hpp"
#include "core/load.hpp"
#include "tests/core/diag_helpers.hpp"

#include <functional>
#include <string>
#include <vector>

#include <doctest/doctest.h>

using namespace cleave;
using cleave::test::diagnostics_of;
using cleave::test::Expect;
using cleave::test::expect_diagnostics;

namespace {

const char* const gpt_small = R"(# a small GPT
[model]
name = "gpt-small"
arch = "gpt"
layers = 12
hidden = 768
heads = 12
ffn_hidden = 3072
vocab = 50257
seq_len = 1024
)";

}  // namespace

TEST_SUITE("core") {
    TEST_CASE("load: a GPT model TOML takes the GPT defaults") {
        const ModelSpec m = parse_model_toml(gpt_small, "inline.toml");
        CHECK(m.name == "gpt-small");
        CHECK(m.layers == 12);
        CHECK(m.hidden == 768);
        CHECK(m.heads == 12);
        CHECK(m.kv_heads == 12);  // defaults to heads
        CHECK(m.ffn_hidden == 3072);
        CHECK(m.vocab == 50257);
        CHECK(m.seq_len == 1024);
        CHECK(m.mlp == MlpKind::gelu);
        CHECK(m.norm == NormKind::layernorm);
        CHECK(m.positions == PositionKind::learned);
        CHECK(m.tied_embeddings);
        CHECK(m.linear_bias);
        CHECK_FALSE(m.moe.enabled());
        // GPT-2 small: V*h 38,597,376 + s*h 786,432 + 12 * (12h^2 + 13h = 7,087,872) + 2h 1,536
        CHECK(params_total(m) == 124439808);
    }

    TEST_CASE(
        "load: the llama arch sets SwiGLU, RMSNorm, RoPE, untied, no bias, and keys override") {
        const ModelSpec m = parse_model_toml(R"([model]
arch = "llama"
layers = 2
hidden = 64
heads = 8
kv_heads = 2
ffn_hidden = 96
vocab = 100
seq_len = 16
tied_embeddings = true
)",
                                             "dir/tiny-llama.toml");
        CHECK(m.name == "tiny-llama");  // the file stem when no name is given
        CHECK(m.kv_heads == 2);
        CHECK(m.mlp == MlpKind::swiglu);
        CHECK(m.norm == NormKind::rmsnorm);
        CHECK(m.positions == PositionKind::rope);
        CHECK(m.tied_embeddings);  // overridden
        CHECK_FALSE(m.linear_bias);
    }

    TEST_CASE("load: an MoE table is read and expert_ffn_hidden defaults to ffn_hidden") {
        const ModelSpec m = parse_model_toml(R"([model]
arch = "llama"
layers = 4
hidden = 64
heads = 4
ffn_hidden = 128
vocab = 100
seq_len = 16
[model.moe]
experts = 8
top_k = 2
layer_freq = 2
first_dense_layers = 1
)",
                                             "inline.toml");
        CHECK(m.moe.experts == 8);
        CHECK(m.moe.top_k == 2);
        CHECK(m.moe.expert_ffn_hidden == 128);
        CHECK(m.moe.layer_freq == 2);
        CHECK(m.moe.first_dense_layers == 1);
        CHECK_FALSE(is_moe_layer(m, 0));
        CHECK(is_moe_layer(m, 1));
        CHECK_FALSE(is_moe_layer(m, 2));
        CHECK(is_moe_layer(m, 3));
    }

    TEST_CASE("load: a TOML syntax error is reported at its line and column") {
        const auto ds = diagnostics_of(
            [] { (void)parse_model_toml("[model]\nlayers = 12\nhidden = = 4\n", "bad.toml"); });
        REQUIRE(ds.size() == 1);
        CHECK(ds[0].where.file == "bad.toml");
        CHECK(ds[0].where.line == 3);
        CHECK(ds[0].where.column == 10);
        CHECK(ds[0].message.find("TOML syntax") != std::string::npos);
    }

    TEST_CASE("load: a missing required key points at its table header") {
        // Line 2 is the [model] header; 'vocab' is absent.
        expect_diagnostics(
            [] {
                (void)parse_model_toml(R"(
[model]
arch = "gpt"
layers = 2
hidden = 64
heads = 4
ffn_hidden = 256
seq_len = 32
)",
                                       "m.toml");
            },
            {{2, 1, "missing required key 'model.vocab' in [model]"}});
    }

    TEST_CASE("load: a missing model table points at the top of the file") {
        expect_diagnostics([] { (void)parse_model_toml("[modle]\nlayers = 1\n", "m.toml"); },
                           {{1, 1, "missing required key 'model' at the top level"},
                            {1, 2, "unknown key 'modle' (did you mean 'model'?)"}});
    }

    TEST_CASE("load: wrong types, bad sizes, bad enums and unknown keys come together, by line") {
        const auto ds = diagnostics_of([] {
            (void)parse_model_toml(R"([model]
arch = "gpt"
layers = "twelve"
hidden = 64.0
heads = 0
ffn_hidden = -4
vocab = 512
seq_len = 32
mlp = "relu"
tied_embeddings = 1
layrs = 12
)",
                                   "m.toml");
        });
        REQUIRE(ds.size() == 7);
        // layers is a string -> the value's position (line 3, column 10).
        CHECK(ds[0].where.line == 3);
        CHECK(ds[0].where.column == 10);
        CHECK(ds[0].message == "'model.layers' must be an integer, got a string");
        CHECK(ds[1].where.line == 4);
        CHECK(ds[1].message == "'model.hidden' must be an integer, got a float");
        CHECK(ds[2].where.line == 5);
        CHECK(ds[2].where.column == 9);
        CHECK(ds[2].message == "'model.heads' must be positive, got 0");
        CHECK(ds[3].where.line == 6);
        CHECK(ds[3].message == "'model.ffn_hidden' must be positive, got -4");
        CHECK(ds[4].where.line == 9);
        CHECK(ds[4].where.column == 7);
        CHECK(ds[4].message == R"('model.mlp' must be one of "gelu", "swiglu", got "relu")");
        CHECK(ds[5].where.line == 10);
        CHECK(ds[5].message == "'model.tied_embeddings' must be a boolean (true or false), got "
                               "an integer");
        // The unknown key points at the key itself (line 11, column 1) and suggests a fix.
        CHECK(ds[6].where.line == 11);
        CHECK(ds[6].where.column == 1);
        CHECK(ds[6].message == "unknown key 'model.layrs' (did you mean 'layers'?)");
    }

    TEST_CASE("load: heads must divide hidden and kv_heads must divide heads") {
        expect_diagnostics(
            [] {
                (void)parse_model_toml(R"([model]
arch = "llama"
layers = 2
hidden = 100
heads = 8
kv_heads = 3
ffn_hidden = 256
vocab = 512
seq_len = 32
)",
                                       "m.toml");
            },
            {{5, 9, "'heads' = 8 does not divide 'hidden' = 100"},
             {6, 12, "'kv_heads' = 3 does not divide 'heads' = 8"}});
    }

    TEST_CASE("load: MoE inconsistencies point at the MoE keys") {
        expect_diagnostics(
            [] {
                (void)parse_model_toml(R"([model]
arch = "llama"
layers = 4
hidden = 64
heads = 4
ffn_hidden = 128
vocab = 100
seq_len = 16
[model.moe]
experts = 4
top_k = 6
first_dense_layers = 4
capacity = 1.0
)",
                                       "m.toml");
            },
            {{11, 9, "'top_k' = 6 must be between 1 and 'experts' = 4"},
             {12,
              22,
              "'first_dense_layers' = 4 leaves no MoE layer: it must be in [0, 'layers' = 4)"},
             {13, 1, "unknown key 'model.moe.capacity'"}});
    }

    TEST_CASE("load: an MoE table without experts reports the missing key at its header") {
        expect_diagnostics(
            [] {
                (void)parse_model_toml(R"([model]
arch = "llama"
layers = 4
hidden = 64
heads = 4
ffn_hidden = 128
vocab = 100
seq_len = 16
moe = { top_k = 2 }
)",
                                       "m.toml");
            },
            {{9, 7, "missing required key 'model.moe.experts' in [model.moe]"}});
    }

    TEST_CASE("load: sandwich_norms in [model], and its type checked") {
        const ModelSpec m = parse_model_toml(std::string(gpt_small) + "sandwich_norms = true\n",
                                             "s.toml");
        CHECK(m.sandwich_norms);
        CHECK_FALSE(parse_model_toml(gpt_small, "g.toml").sandwich_norms);  // default
        // GPT-2 small with a LayerNorm (weight + bias) after each block too: 12 x 2 x 2 x 768
        // = 36,864 more than 124,439,808.
        CHECK(params_total(m) == 124439808 + 36864);
        const auto d = diagnostics_of(
            [] { (void)parse_model_toml(std::string(gpt_small) + "sandwich_norms = 2\n", "b.toml"); });
        REQUIRE(d.size() == 1);
        CHECK(d[0].message.find("sandwich_norms") != std::string::npos);
        CHECK(d[0].where.line == 11);
    }

    TEST_CASE("load: a hybrid model's layer pattern and Mamba-2 table") {
        const ModelSpec m = parse_model_toml(R"([model]
arch = "llama"
mlp = "gelu"
squared_relu = true
layers = 4
hidden = 64
heads = 4
ffn_hidden = 128
vocab = 100
seq_len = 16
hybrid_layer_pattern = "M*-E"
[model.mamba]
heads = 8
head_dim = 16
state = 32
groups = 2
[model.moe]
experts = 4
top_k = 2
latent = 32
)",
                                             "h.toml");
        REQUIRE(m.layer_kinds.size() == 4);
        CHECK(m.layer_kinds[0] == LayerKind::mamba);
        CHECK(m.layer_kinds[1] == LayerKind::attention);
        CHECK(m.layer_kinds[2] == LayerKind::mlp);
        CHECK(m.layer_kinds[3] == LayerKind::moe);
        CHECK(m.squared_relu);
        CHECK(m.mamba.heads == 8);
        CHECK(m.mamba.d_inner() == 128);
        CHECK(m.mamba.state == 32);
        CHECK(m.mamba.groups == 2);
        CHECK(m.mamba.conv_kernel == 4);  // defaults
        CHECK(m.mamba.chunk == 128);
        CHECK(is_moe_layer(m, 3));
        CHECK_FALSE(is_moe_layer(m, 0));
        CHECK(m.moe.latent == 32);
        // The MoE layer: router 64 x 4; latent projections 2 x 64 x 32 = 4096; 4 experts of
        // up + down on the latent, 2 x 32 x 128 = 8192 each (expert_ffn_hidden = ffn_hidden
        // 128); its norm 64: 256 + 4096 + 32,768 + 64 = 37,184.
        CHECK(params_layer(m, 3) == 37184);
    }

    TEST_CASE("load: hybrid pattern and Mamba-2 errors point at their keys") {
        const std::string head = R"([model]
arch = "llama"
layers = 4
hidden = 64
heads = 4
ffn_hidden = 128
vocab = 100
seq_len = 16
)";
        // A stage boundary, then a pattern of the wrong length with a table missing a key and
        // groups that do not divide heads.
        expect_diagnostics(
            [&] {
                (void)parse_model_toml(head + "hybrid_layer_pattern = \"M*|M\"\n[model.mamba]\n"
                                              "heads = 4\nhead_dim = 8\nstate = 8\ngroups = 2\n",
                                       "h.toml");
            },
            {{9,
              24,
              "'model.hybrid_layer_pattern' has '|': cleave reads M (Mamba-2), * (attention), - "
              "(MLP), E (MoE) and G (gated DeltaNet); a stage boundary '|' belongs to the plan's "
              "layer map"}});
        expect_diagnostics(
            [&] {
                (void)parse_model_toml(head + "hybrid_layer_pattern = \"M*M\"\n[model.mamba]\n"
                                              "heads = 4\nstate = 8\ngroups = 3\n",
                                       "h.toml");
            },
            {{9, 24, "'model.hybrid_layer_pattern' has 3 layers, 'layers' = 4"},
             {10, 1, "missing required key 'model.mamba.head_dim' in [model.mamba]"},
             {13, 10, "'model.mamba.groups' = 3 does not divide 'heads' = 4 (heads share B and C "
                      "within a group)"}});
        expect_diagnostics(
            [&] { (void)parse_model_toml(head + "hybrid_layer_pattern = \"M*-E\"\n", "h.toml"); },
            {{9, 24, "'model.hybrid_layer_pattern' has Mamba-2 layers (M) but no [model.mamba] "
                     "table"}});
        expect_diagnostics(
            [&] {
                (void)parse_model_toml(head + "hybrid_layer_pattern = \"**-E\"\n", "h.toml");
            },
            {{9, 24, "'model.hybrid_layer_pattern' has MoE layers (E) but no [model.moe] table"}});
        expect_diagnostics(
            [&] {
                (void)parse_model_toml(
                    head + "[model.mamba]\nheads = 4\nhead_dim = 8\nstate = 8\ngroups = 2\n",
                    "h.toml");
            },
            {{1,
              1,
              "'model.hybrid_layer_pattern' is missing: [model.mamba] is set, so the model needs "
              "the kind of each layer (M Mamba-2, * attention, - MLP, E MoE, G gated DeltaNet)"}});
        expect_diagnostics(
            [&] { (void)parse_model_toml(head + "squared_relu = true\n", "h.toml"); },
            {{9, 16, "'model.squared_relu' = true needs an ungated MLP (mlp = \"gelu\" shapes: up + "
                     "down)"}});
    }

    TEST_CASE("load: the rendered message is file:line:col: error: ... 'key'") {
        try {
            (void)parse_model_toml("[model]\narch = \"gpt\"\nlayers = 0\n", "x.toml");
            FAIL("expected ConfigError");
        } catch (const ConfigError& e) {
            const std::string what = e.what();
            CHECK(what.find("x.toml:3:10: error: 'model.layers' must be positive, got 0") !=
                  std::string::npos);
            CHECK(what.find("x.toml:1:1: error: missing required key 'model.hidden' in [model]") !=
                  std::string::npos);
        }
    }

    TEST_CASE("load: validate() lists every problem of a ModelSpec") {
        ModelSpec m;
        m.layers = 2;
        m.hidden = 64;
        m.heads = 6;
        m.kv_heads = 4;
        m.ffn_hidden = 128;
        m.vocab = 0;
        m.seq_len = 16;
        const auto problems = validate(m);
        REQUIRE(problems.size() == 3);
        CHECK(problems[0] == "'vocab' must be positive, got 0");
        CHECK(problems[1] == "'heads' = 6 does not divide 'hidden' = 64");
        CHECK(problems[2] == "'kv_heads' = 4 does not divide 'heads' = 6");
    }

    TEST_CASE("load: a job TOML maps dtypes and optimizer") {
        const JobSpec j = parse_job_toml(R"([job]
gpus = 32
global_batch = 128
seq_len = 2048
dtype_compute = "bf16"
dtype_weights = "bf16"
dtype_grads = "bf16"
dtype_optimizer_states = "fp32"
master_weights = true
optimizer = "sgd"
)",
                                         "job.toml");
        CHECK(j.gpus == 32);
        CHECK(j.global_batch == 128);
        CHECK(j.seq_len == 2048);
        CHECK(j.grads == Dtype::bf16);
        CHECK(j.optimizer == Optimizer::sgd);
        // 2 (bf16 weights) + 2 (bf16 grads) + 4 (master) + 1 moment * 4 = 12
        CHECK(model_state_bytes_per_param(j) == 12.0);
    }

    TEST_CASE("job: the optimizer's bytes per parameter by master and moment dtypes") {
        JobSpec j;  // bf16 weights, fp32 master, Adam with fp32 moments: 4 + 4 + 4
        CHECK(optimizer_state_bytes(j) == 12.0);
        // Megatron --use-precision-aware-optimizer --exp-avg-dtype bf16 --exp-avg-sq-dtype bf16:
        // 4 + 2 + 2 = 8; with --main-params-dtype fp16 the fp16 master is kept: 2 + 2 + 2 = 6.
        j.optimizer_states = Dtype::bf16;
        j.optimizer_states_sq = Dtype::bf16;
        CHECK(optimizer_state_bytes(j) == 8.0);
        j.master_dtype = Dtype::fp16;
        CHECK(optimizer_state_bytes(j) == 6.0);
        // Apex DistributedFusedAdam dtype=bf16 (store_params): a bf16 shard + m + v = 6.
        j.master_dtype = Dtype::bf16;
        CHECK(optimizer_state_bytes(j) == 6.0);
        // fp32 weights are their own master: 4 + 4 only.
        j = JobSpec{};
        j.weights = Dtype::fp32;
        CHECK(optimizer_state_bytes(j) == 8.0);
    }

    TEST_CASE("load: job errors (bad dtype, missing gpus, unknown key) come together") {
        expect_diagnostics(
            [] {
                (void)parse_job_toml(R"([job]
global_batch = 128
dtype_compute = "int4"
optimiser = "adam"
)",
                                     "job.toml");
            },
            {{1, 1, "missing required key 'job.gpus' in [job]"},
             {3,
              17,
              R"('job.dtype_compute' must be one of "fp32", "tf32", "bf16", "fp16", "fp8", "mxfp8", "nvfp4", got "int4")"},
             {4, 1, "unknown key 'job.optimiser' (did you mean 'optimizer'?)"}});
    }

    TEST_CASE("load: load_model on a missing file names the file") {
        const auto ds = diagnostics_of([] { (void)load_model("/nonexistent/model.toml"); });
        REQUIRE(ds.size() == 1);
        CHECK(ds[0].message.find("/nonexistent/model.toml") != std::string::npos);
    }
}

// Every refusal names its reason (issue 49): when the fixed flags leave no plan, cleave plan's
// table, JSON "why_empty" and stderr name the flag and the plan rule that rules it out.
#include "planner/why_empty.hpp"
#include "tests/cli_run.hpp"

#include <string>
#include <vector>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

using namespace cleave;

namespace {

const std::string hf = std::string(CLEAVE_TEST_DATA_DIR) + "/examples/hf/";
const std::string qwen3_8b = hf + "qwen3-8b.config.json";        // 36 layers, 32 / 8 heads
const std::string qwen3_moe = hf + "qwen3-30b-a3b.config.json";  // 48 layers, 128 experts

struct Refusal {
    int code = -1;
    std::string table;  // stdout of the table
    std::string err;    // stderr of the table run
    std::string json;   // "why_empty" of --format json
};

/// `cleave plan MODEL dgx-h100 --gpus 64 --gbs 256 --seq 4096 FLAGS` as a table and as JSON.
Refusal refuse(const std::string& model, const std::vector<std::string>& flags) {
    std::vector<std::string> args = {
        "plan", model, "dgx-h100", "--gpus", "64", "--gbs", "256", "--seq", "4096", "--top", "1"};
    args.insert(args.end(), flags.begin(), flags.end());
    const test::CliRun t = test::run_cleave(args);
    args.insert(args.end(), {"--format", "json"});
    const test::CliRun j = test::run_cleave(args);
    Refusal r{t.code, t.out, t.err, ""};
    CHECK(j.code == t.code);
    r.json = nlohmann::json::parse(j.out).at("why_empty").get<std::string>();
    return r;
}

/// The refusal exits 1 and says `said` in the table ("# why empty: "), on stderr and in JSON.
void says(const Refusal& r, const std::string& said) {
    CAPTURE(r.table);
    CHECK(r.code == 1);
    CHECK(r.table.find("# why empty: ") != std::string::npos);
    CHECK(r.table.find(said) != std::string::npos);
    CHECK(r.err.find(said) != std::string::npos);
    CHECK(r.json.find(said) != std::string::npos);
}

Estimate fits(const ModelSpec&, const ClusterSpec&, const JobSpec&, const Plan&) {
    Estimate e;
    e.fits = true;
    e.memory_usable = gib(78.0);
    return e;
}

}  // namespace

TEST_SUITE("planner") {
    TEST_CASE("why_empty: a fixed value the search never builds is named with its rules") {
        // A tiny dense model (heads = kv_heads 2, ffn 16) on one 4-GPU node: tp 3 divides
        // neither the GPUs nor any width, and its group would leave the node.
        ModelSpec m;
        m.name = "tiny";
        m.layers = 4;
        m.hidden = 16;
        m.heads = 2;
        m.kv_heads = 2;
        m.ffn_hidden = 16;
        m.vocab = 64;
        m.seq_len = 4;
        ClusterSpec c;
        c.name = "test";
        c.node.gpus_per_node = 4;
        JobSpec j;
        j.gpus = 4;
        j.global_batch = 4;
        j.seq_len = 4;
        SearchOptions o;
        o.fixed.tp = 3;
        const SearchResult r = search_with(m, c, j, o, &fits);
        REQUIRE(r.candidates_evaluated == 0);
        CHECK(why_empty(m, c, j, o, r) ==
              "--tp 3: tp=3 does not divide gpus=4 (rule gpus); tp=3 does not divide heads=2 "
              "(rule tp_heads); tp=3 does not divide kv_heads=2 (rule tp_kv_heads); tp=3 does not "
              "divide ffn_hidden=16 (rule tp_ffn); tp=3 leaves the NVLink domain of 4 GPUs (TP "
              "across nodes is off; --allow-tp-cross-node prices it)");
        o.fixed.tp = 2;
        const SearchResult ok = search_with(m, c, j, o, &fits);
        REQUIRE(ok.feasible > 0);
        CHECK(why_empty(m, c, j, o, ok).empty());
    }

    TEST_CASE("why_empty: --tp 3 names the GPUs and the heads it does not divide") {
        const Refusal r = refuse(qwen3_8b, {"--tp", "3"});
        says(r, "--tp 3: tp=3 does not divide gpus=64 (rule gpus)");
        says(r, "tp=3 does not divide heads=32 (rule tp_heads)");
        says(r, "tp=3 does not divide kv_heads=8 (rule tp_kv_heads)");
        CHECK(r.err.find("cleave plan: no feasible plan among 0 candidates:") != std::string::npos);
    }

    TEST_CASE("why_empty: --pp more than the layers names the stage split") {
        says(refuse(qwen3_8b, {"--pp", "64"}),
             "--pp 64: pp=64 is more than layers=36 (rule stage_split)");
    }

    TEST_CASE("why_empty: --pp whose stages split no layer map names the layers") {
        // GPT-3's 96 layers over 64 stages: 1.5 a stage, no map within a layer of balance and
        // no even one.
        says(refuse(std::string(CLEAVE_TEST_DATA_DIR) + "/examples/gpt3-175b.toml",
                    {"--pp", "64"}),
             "--pp 64: pp=64 does not divide layers=96");
    }

    TEST_CASE("why_empty: --cp 3 names ring attention's 2 cp chunks") {
        says(refuse(qwen3_8b, {"--cp", "3"}),
             "2*cp=6 does not divide seq=4096 (ring attention splits the sequence into 2*cp "
             "chunks) (rule cp_seq)");
    }

    TEST_CASE("why_empty: --ep on a dense model and --ep that divides no experts") {
        says(refuse(qwen3_8b, {"--ep", "8"}),
             "--ep 8: ep=8 needs an MoE model (experts > 0) (rule ep_moe)");
        says(refuse(qwen3_moe, {"--ep", "3"}),
             "--ep 3: ep=3 does not divide experts=128 (rule ep_experts)");
    }

    TEST_CASE("why_empty: --etp 3 names the expert grid's fold over the GPUs") {
        says(refuse(qwen3_moe, {"--etp", "3"}),
             "--etp 3: etp=3 does not divide the 64 GPUs of a pipeline stage (tp*cp*dp) (rule "
             "ep_dp)");
    }

    TEST_CASE("why_empty: --vpp without the interleaved schedule") {
        says(refuse(qwen3_8b, {"--vpp", "2", "--schedule", "1f1b"}),
             "--vpp 2 --schedule 1f1b: vpp > 1 needs --schedule interleaved, not 1f1b (rule "
             "vpp_schedule)");
    }

    TEST_CASE("why_empty: --mbs that divides no global batch share") {
        says(refuse(qwen3_8b, {"--mbs", "3"}),
             "--mbs 3: mbs=3 does not divide the global batch 256");
        says(refuse(qwen3_8b, {"--mbs", "3"}), "(rule batch)");
    }

    TEST_CASE("why_empty: --schedule interleaved with --pp 1") {
        says(refuse(qwen3_8b, {"--pp", "1", "--schedule", "interleaved"}),
             "--pp 1 --schedule interleaved: the interleaved schedule needs pp > 1 (rule "
             "interleave_pp)");
    }

    TEST_CASE("why_empty: --zero 3 with a pipeline under Megatron") {
        says(refuse(qwen3_8b, {"--pp", "2", "--zero", "3"}),
             "--pp 2 --zero 3: zero=3 cannot be combined with pipeline parallelism (pp > 1)");
        says(refuse(qwen3_8b, {"--pp", "2", "--zero", "3"}), "(rule zero_pipeline)");
    }

    TEST_CASE("why_empty: empty when a plan is found, the memory miss when none fits") {
        const test::CliRun ok = test::run_cleave({"plan",
                                                  qwen3_8b,
                                                  "dgx-h100",
                                                  "--gpus",
                                                  "64",
                                                  "--gbs",
                                                  "256",
                                                  "--top",
                                                  "1",
                                                  "--format",
                                                  "json"});
        REQUIRE(ok.code == 0);
        CHECK(nlohmann::json::parse(ok.out).at("why_empty") == "");
        // GPT-3 175B on one 8-GPU node: every candidate is priced and none fits.
        const test::CliRun big =
            test::run_cleave({"plan",
                              std::string(CLEAVE_TEST_DATA_DIR) + "/examples/gpt3-175b.toml",
                              "dgx-a100-80g",
                              "--gpus",
                              "8",
                              "--gbs",
                              "8",
                              "--tp",
                              "8"});
        CHECK(big.code == 1);
        CHECK(big.out.find("# why empty: with --tp 8, none of the") != std::string::npos);
        CHECK(big.out.find("candidates fits in memory; the nearest") != std::string::npos);
    }
}

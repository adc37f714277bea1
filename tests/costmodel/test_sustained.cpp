// Issue 25: what a GPU sustains in a training loop (the power-limited tensor clock) and the
// slowest GPU of a synchronous job (the straggler factor).
#include "core/cluster.hpp"
#include "costmodel/collectives.hpp"
#include "costmodel/compute.hpp"
#include "costmodel/estimate.hpp"
#include "published/published.hpp"
#include "tests/costmodel/fixtures.hpp"

#include <doctest/doctest.h>

using namespace cleave;

namespace {

// The DGX H100 profile's 16-bit curve ends (sizes 2.147 and 70368.7 GFLOP).
ClusterSpec h100_like() {
    ClusterSpec c = test::dgx_a100();
    c.gpu.peak_bf16 = tflops(989);
    c.gpu.peak_fp16 = tflops(989);
    c.gpu.gemm_efficiency = {{flop(2.147e9), 0.157}, {flop(70368.7e9), 0.791}};
    return c;
}

Plan plan_tp8() {
    Plan p = test::plan(1, 8, 1);
    p.mbs = 1;
    return p;
}

}  // namespace

TEST_SUITE("costmodel") {
    TEST_CASE("sustained: the power-limited clock caps tensor-core efficiency, not small GEMMs") {
        ClusterSpec c = h100_like();
        // No clocks: the curve's own values.
        CHECK(tensor_clock_ceiling(c.gpu) == 1.0);
        CHECK(gemm_efficiency(c.gpu, flop(70368.7e9)) == doctest::Approx(0.791));
        // H100 at 700 W: 1300 MHz held of the 1830 the peak assumes -> 1300 / 1830 = 0.71038.
        c.gpu.peak_clock_mhz = 1830.0;
        c.gpu.sustained_clock_mhz = 1300.0;
        CHECK(tensor_clock_ceiling(c.gpu) == doctest::Approx(0.710383).epsilon(1e-5));
        CHECK(gemm_efficiency(c.gpu, flop(70368.7e9)) == doctest::Approx(0.710383).epsilon(1e-5));
        CHECK(gemm_efficiency(c.gpu, flop(70368.7e9), Dtype::fp8) ==
              doctest::Approx(0.710383).epsilon(1e-5));
        // A 2.147 GFLOP GEMM (0.157 on the curve) does not reach the cap: unchanged.
        CHECK(gemm_efficiency(c.gpu, flop(2.147e9)) == doctest::Approx(0.157));
        // A clock above the peak's does not raise anything: the cap is at most 1.
        c.gpu.sustained_clock_mhz = 1980.0;
        CHECK(tensor_clock_ceiling(c.gpu) == 1.0);
    }

    TEST_CASE("sustained: E[max] of n standard normals by Blom's formula") {
        CHECK(expected_max_normal(1) == 0.0);
        // n = 2: Phi^-1(1.625 / 2.25 = 0.72222) = 0.58946 (exact E[max] = 1 / sqrt(pi) = 0.5642)
        CHECK(expected_max_normal(2) == doctest::Approx(0.58946).epsilon(1e-4));
        // n = 8: Phi^-1(7.625 / 8.25 = 0.924242) = 1.43420 (exact 1.4236)
        CHECK(expected_max_normal(8) == doctest::Approx(1.43420).epsilon(1e-4));
        // n = 2048: Phi^-1(2047.625 / 2048.25 = 0.999695) = 3.42701
        CHECK(expected_max_normal(2048) == doctest::Approx(3.42701).epsilon(1e-4));
    }

    TEST_CASE("sustained: the slowest of the job's GPUs sets the pace of its kernels") {
        ClusterSpec c = h100_like();
        CHECK(straggler_factor(c.gpu, 2048) == 1.0);  // no spread in the profile: not priced
        c.gpu.throughput_spread = 0.0176;
        // 1 + 0.0176 x 1.43420 = 1.025242 on 8 GPUs; 1 + 0.0176 x 3.42701 = 1.060315 on 2048.
        CHECK(straggler_factor(c.gpu, 8) == doctest::Approx(1.025242).epsilon(1e-5));
        CHECK(straggler_factor(c.gpu, 2048) == doctest::Approx(1.060315).epsilon(1e-5));
        CHECK(straggler_factor(c.gpu, 1) == 1.0);

        // In an estimate: the kernels (compute) grow by the factor, the comm does not, and the
        // breakdown names the share.
        const ModelSpec m = test::gpt3();
        const JobSpec j = test::job(8, 64);
        const Estimate base = estimate(m, h100_like(), j, plan_tp8());
        const Estimate slow = estimate(m, c, j, plan_tp8());
        const double f = straggler_factor(c.gpu, 8);
        CHECK(slow.time.compute.value() == doctest::Approx(base.time.compute.value() * f).epsilon(1e-9));
        CHECK(base.time.tp_comm.value() > 0.0);
        CHECK(slow.time.tp_comm.value() == doctest::Approx(base.time.tp_comm.value()).epsilon(1e-9));
        CHECK(slow.time.straggler.value() ==
              doctest::Approx(slow.time.compute.value() * (1.0 - 1.0 / f)).epsilon(1e-9));
        CHECK(base.time.straggler.value() == 0.0);
    }

    TEST_CASE("sustained: one micro-batch's fwd + bwd splits into gemm, attention, memory and comm") {
        // A dense TP-8 stage without recomputation: fwd + bwd = gemm + attention + memory-bound
        // + the exposed TP comm, nothing else (no MoE overhead, no offload).
        const ModelSpec m = test::gpt3();
        const JobSpec j = test::job(8, 64);
        const Estimate e = estimate(m, h100_like(), j, plan_tp8());
        const StageCost& s = e.stage[0];
        CHECK(s.gemm.value() > 0.0);
        CHECK(s.attention.value() > 0.0);
        CHECK(s.memory_bound.value() > 0.0);
        CHECK(s.recompute.value() == 0.0);
        CHECK(s.fwd_comm.value() > 0.0);
        const Seconds parts = s.gemm + s.attention + s.memory_bound + s.fwd_comm + s.bwd_comm;
        CHECK(parts.value() == doctest::Approx((s.fwd + s.bwd).value()).epsilon(1e-9));
        // The GEMMs are 3x the forward's: the layers' forward GEMM FLOPs at the curve's value.
        CHECK(s.gemm.value() > 2.0 * s.attention.value());
    }

    TEST_CASE("published: the signed mean beside the MAPE") {
        // +10 and -20: MAPE (10 + 20) / 2 = 15, signed mean (10 - 20) / 2 = -5 (too fast).
        const ErrorSummary s = summarize_errors({{1, 10.0}, {2, -20.0}});
        CHECK(s.mape_pct == doctest::Approx(15.0));
        CHECK(s.mean_signed_pct == doctest::Approx(-5.0));
        CHECK(summarize_errors({}).mean_signed_pct == 0.0);
    }
}

#include "core/calibration.hpp"
#include "core/errors.hpp"
#include "core/load.hpp"
#include "tests/cli_run.hpp"

#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <nlohmann/json.hpp>
#include <sstream>
#include <tuple>

namespace {
std::string file_text(const std::string& path) {
    std::ifstream in(path);
    std::ostringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

/// A case's error (%) priced with its stack as the row loads it, then changed by `change`.
double error_with(PublishedCase c, const std::function<void(SoftwareStack&)>& change) {
    load_case_stack(c);
    change(c.job.stack);
    return evaluate_published(c, load_cluster(c.profile)).error_pct;
}

/// The cases of tests/data/<file> by row id.
std::map<int64_t, PublishedCase> cases_by_row(const std::string& file) {
    std::map<int64_t, PublishedCase> rows;
    for (auto& c : parse_public_runs(
             file_text(std::string(CLEAVE_TEST_DATA_DIR) + "/tests/data/" + file), file)) {
        rows[c.row_id] = c;
    }
    return rows;
}
}  // namespace

TEST_SUITE("costmodel") {
    TEST_CASE("published: several CSVs as one set, each source held out of what it fitted") {
        const std::string root = std::string(CLEAVE_TEST_DATA_DIR) + "/tests/data/";
        const auto r = test::run_cleave({"published", root + "public_runs_2024.csv",
                                         root + "public_runs_2025.csv", "--format", "json"});
        REQUIRE(r.code == 0);
        const auto j = nlohmann::json::parse(r.out);
        const auto& held = j["held_out"];
        // DGXC (2024): no constant was fitted on its rows, so held out = as shipped.
        REQUIRE(held.contains("DGXC_LLAMA31_8B"));
        CHECK(held["DGXC_LLAMA31_8B"]["how"] == nlohmann::json::array({"as shipped"}));
        CHECK(held["DGXC_LLAMA31_8B"]["mape_pct"].get<double>() ==
              doctest::Approx(j["sources"]["DGXC_LLAMA31_8B"]["not_fitted"]["mape_pct"].get<double>()));
        // MBRIDGE_2511 alone fitted the Blackwell GEMM factors and the MoE expert overheads: held
        // out, its 29 rows are priced on the datasheet profiles. Recomputed here row by row.
        const auto& mb = held["MBRIDGE_2511"];
        CHECK(mb["values"] == 29);
        std::vector<std::pair<int64_t, double>> errs;
        std::map<std::string, ClusterSpec> raw;
        for (auto& c : parse_public_runs(file_text(root + "public_runs_2025.csv"),
                                         "public_runs_2025.csv")) {
            if (!c.expressible || !c.in_mape || c.source_key != "MBRIDGE_2511") {
                continue;
            }
            load_case_stack(c);
            if (!raw.count(c.profile)) {
                raw.emplace(c.profile, load_cluster_uncalibrated(c.profile));
            }
            errs.emplace_back(c.row_id, evaluate_published(c, raw.at(c.profile)).error_pct);
        }
        const ErrorSummary s = summarize_errors(errs);
        CHECK(s.count == 29);
        CHECK(mb["mape_pct"].get<double>() == doctest::Approx(s.mape_pct));
        CHECK(mb["mean_signed_pct"].get<double>() == doctest::Approx(s.mean_signed_pct));
        bool removed = false;
        for (const auto& how : mb["how"]) {
            removed = removed || how.get<std::string>() == "dgx-b200 overlay removed";
        }
        CHECK(removed);
        // The shipped fit is far better than held out: the Blackwell factors are fitted, not a
        // mechanism (issue 25). Measured 2026-12-02: 35.5 % held out vs 8.8 % shipped.
        CHECK(mb["mape_pct"].get<double>() > 20.0);

        // The 26.02 per-expert entries were fitted on rows of two sources (MBRIDGE_2602 and
        // _2604): holding one out refits the entry on the other's rows of it when two or more
        // remain (dgx-b200: 2018, 2020, 2021 for 2604 held out), else removes it (dgx-h100: only
        // 2005 is left when 2604 is held out).
        const auto r2 = test::run_cleave({"published", root + "public_runs_2025.csv",
                                          root + "public_runs_2026h1.csv", "--format", "json"});
        REQUIRE(r2.code == 0);
        const auto held2 = nlohmann::json::parse(r2.out)["held_out"];
        std::set<std::string> how;
        for (const auto& x : held2["MBRIDGE_2604"]["how"]) {
            how.insert(x.get<std::string>());
        }
        bool refit_b200 = false;
        for (const auto& x : how) {
            refit_b200 = refit_b200 || x.rfind("dgx-b200 26.02 expert cost refitted without it", 0) == 0;
        }
        CHECK(refit_b200);
        CHECK(how.count("dgx-h100 26.02 expert cost removed") == 1);
    }
}

#include "core/stack.hpp"

TEST_SUITE("costmodel") {
    TEST_CASE("release: the per-expert cost fitted under a release is in force from it on") {
        // dgx-h100's overlay: 1210 us fitted under 25.11, 500 us from 26.02 on.
        const Calibration cal = parse_calibration_toml(
            "[calibration]\nprofile = \"x\"\nfitted_on = [\"a.csv\", \"b.csv\"]\n"
            "fitted_rows = [[1, 2], [5, 6]]\n"
            "[moe]\nquantised_expert_overhead_us = 1210\nrecipe = \"fp8-tensorwise\"\n"
            "release = \"25.11\"\n"
            "[[moe.from_release]]\nrelease = \"26.02\"\nquantised_expert_overhead_us = 500\n",
            "x.toml");
        CHECK(cal.fitted_on == "a.csv");
        CHECK(cal.fitted_on_all == std::vector<std::string>{"a.csv", "b.csv"});
        REQUIRE(cal.quantised_expert_from_release.size() == 1);
        ClusterSpec c = test::dgx_a100();
        apply_calibration(cal, c);
        std::string under;
        CHECK(quantised_expert_overhead(c.node, "25.11", &under).value() == doctest::Approx(1210e-6));
        CHECK(under == "25.11");
        CHECK(quantised_expert_overhead(c.node, "26.02", &under).value() == doctest::Approx(500e-6));
        CHECK(under == "26.02");
        CHECK(quantised_expert_overhead(c.node, "26.04").value() == doctest::Approx(500e-6));
        // Older than every fit, or not stated: the base value.
        CHECK(quantised_expert_overhead(c.node, "24.09").value() == doctest::Approx(1210e-6));
        CHECK(quantised_expert_overhead(c.node, "").value() == doctest::Approx(1210e-6));
        // Entries out of order or not after the base release are errors naming the key.
        CHECK_THROWS_WITH_AS(
            (void)parse_calibration_toml(
                "[calibration]\nprofile = \"x\"\nfitted_on = \"a.csv\"\n[moe]\n"
                "quantised_expert_overhead_us = 1\nrelease = \"26.02\"\n"
                "[[moe.from_release]]\nrelease = \"25.11\"\nquantised_expert_overhead_us = 2\n",
                "x.toml"),
            doctest::Contains("moe.from_release"), cleave::ConfigError);
        CHECK_THROWS_WITH_AS(
            (void)parse_calibration_toml(
                "[calibration]\nprofile = \"x\"\nfitted_on = \"a.csv\"\n[moe]\nrelease = \"2602\"\n",
                "x.toml"),
            doctest::Contains("release"), cleave::ConfigError);
    }

    TEST_CASE("release: the stack names its release, the CLI overrides it, an unknown one is said") {
        const SoftwareStack s = load_stack("megatron-core");
        CHECK(s.release == "26.04");
        CHECK(s.known_releases == std::vector<std::string>{"25.11", "26.02", "26.04"});
        const std::string qwen =
            std::string(CLEAVE_TEST_DATA_DIR) + "/examples/hf/qwen3-30b-a3b.config.json";
        const auto run = [&](const char* release) {
            std::vector<std::string> a = {"explain", qwen, "dgx-h100", "--gpus", "16", "--gbs",
                                          "1024", "--seq", "4096", "--ep", "16", "--etp", "1",
                                          "--mbs", "1", "--dtype", "fp8", "--fp8-recipe",
                                          "tensorwise", "--zero", "1", "--format", "json"};
            if (release != nullptr) {
                a.insert(a.end(), {"--release", release});
            }
            const test::CliRun r = test::run_cleave(a);
            REQUIRE(r.code == 0);
            return nlohmann::json::parse(r.out);
        };
        // 48 layers x 64 micro-batches x 8 local experts: 1210 us under 25.11, 500 us from 26.02
        // (the default, 26.04) -> 29.74 s and 12.29 s.
        CHECK(run("25.11")["expert_overhead_s"].get<double>() ==
              doctest::Approx(48.0 * 64 * 8 * 1210e-6));
        const auto now = run(nullptr);
        CHECK(now["expert_overhead_s"].get<double>() == doctest::Approx(48.0 * 64 * 8 * 500e-6));
        // Only the Hopper caution (every H100 plan carries it): no release caution.
        REQUIRE(now.contains("cautions"));
        CHECK(now["cautions"].size() == 1);
        CHECK(now["cautions"][0].get<std::string>().rfind("Hopper:", 0) == 0);
        // 26.06 is not known: priced as 26.04, and said.
        const auto later = run("26.06");
        CHECK(later["expert_overhead_s"].get<double>() == doctest::Approx(48.0 * 64 * 8 * 500e-6));
        REQUIRE(later.contains("cautions"));
        REQUIRE(later["cautions"].size() == 2);
        CHECK(later["cautions"][1].get<std::string>().find("priced as 26.04, the nearest earlier") !=
              std::string::npos);
        const test::CliRun bad = test::run_cleave({"explain", qwen, "dgx-h100", "--gpus", "16",
                                                   "--release", "2604"});
        CHECK(bad.code == 2);
    }

    TEST_CASE("release: a published row's release comes from its framework column") {
        const std::string root = std::string(CLEAVE_TEST_DATA_DIR) + "/tests/data/";
        std::map<int64_t, std::string> rel;
        for (const auto& c : parse_public_runs(file_text(root + "public_runs_2026h1.csv"),
                                               "public_runs_2026h1.csv")) {
            rel[c.row_id] = c.release;
        }
        CHECK(rel.at(2005) == "26.02");  // "NeMo 26.02 container (Megatron-Bridge 0.3.0)"
        CHECK(rel.at(2025) == "26.04");
        for (const auto& c : parse_public_runs(file_text(root + "public_runs_2024.csv"),
                                               "public_runs_2024.csv")) {
            CAPTURE(c.row_id);
            CHECK((c.release == "24.09" || c.release == "24.11"));
        }
    }

    TEST_CASE("release: a release the stack does not know is said, in explain and in published") {
        SoftwareStack s = load_stack("megatron-core");  // knows 25.11, 26.02, 26.04
        s.release = "26.04";
        CHECK(unknown_release_caution(s).empty());
        s.release = "26.08";  // later than every known one: the nearest earlier is 26.04
        CHECK(unknown_release_caution(s) ==
              "release 26.08 is not one the stack 'megatron-core' knows (25.11, 26.02, 26.04): "
              "priced as 26.04, the nearest earlier; what differs between the two releases is "
              "not in the model (docs/stacks.md)");
        s.release = "26.03";  // between two known ones
        CHECK(unknown_release_caution(s).find("priced as 26.02, the nearest earlier") !=
              std::string::npos);
        s.release = "24.09";  // older than every known one
        CHECK(unknown_release_caution(s).find("priced as 25.11, the oldest") != std::string::npos);
        s.release.clear();
        CHECK(unknown_release_caution(s).empty());
        // published: the NeMo 24.x rows say they are priced as 25.11; the 26.02 / 26.04 rows
        // (known) say nothing of it.
        const std::string root = std::string(CLEAVE_TEST_DATA_DIR) + "/tests/data/";
        for (const char* f : {"public_runs_2024.csv", "public_runs_2026h1.csv"}) {
            for (auto c : parse_public_runs(file_text(root + f), f)) {
                if (!c.reason.empty() && c.stack.empty()) {
                    continue;  // not expressed
                }
                load_case_stack(c);
                CAPTURE(c.row_id);
                const bool said = c.reason.find("priced as 25.11, the oldest") != std::string::npos;
                CHECK(said == (std::string(f) == "public_runs_2024.csv"));
                CHECK((c.reason.find("is not one the stack") != std::string::npos) == said);
            }
        }
    }
}

TEST_SUITE("costmodel") {
    TEST_CASE("moe: group-limited routing cuts the dedup dispatcher's NIC copies") {
        // EP 64 over 8-GPU domains, top-8 (DeepSeek-V3). Plain all-to-all: 8 x 56/64 = 7 copies
        // through the NIC per token. DeepEP dedup: 8 (1 - 0.875^8) 7/8 = 4.5945 -> 0.65636 of 7.
        // Limited to 4 of 8 groups (one group per domain): R = 4, any = 1 - 0.75^8 = 0.899887,
        // hit 3.59955, remote 3.59955 - 0.5 x 0.899887 = 3.14960 -> 0.449943 of 7.
        AllToAllLinks l;
        l.n = 64;
        l.r = 8;
        CHECK(nic_copy_ratio(l, 8.0, 0, 0) == doctest::Approx(4.59453 / 7.0).epsilon(1e-4));
        CHECK(nic_copy_ratio(l, 8.0, 8, 4) == doctest::Approx(3.14960 / 7.0).epsilon(1e-4));
        // M = G is not limited; groups finer than the domains are not priced (the unlimited
        // formula); the whole group inside one domain sends nothing through the NIC (ratio 1).
        CHECK(nic_copy_ratio(l, 8.0, 8, 8) == doctest::Approx(nic_copy_ratio(l, 8.0, 0, 0)));
        CHECK(nic_copy_ratio(l, 8.0, 16, 4) == doctest::Approx(nic_copy_ratio(l, 8.0, 0, 0)));
        l.n = 8;
        CHECK(nic_copy_ratio(l, 8.0, 8, 4) == 1.0);
    }

    TEST_CASE("moe: the dispatcher, a2a overlap and group-limited routing are flags, and exported") {
        const std::string ds = std::string(CLEAVE_TEST_DATA_DIR) + "/examples/hf/deepseek-v3.config.json";
        const auto run = [&](std::vector<std::string> extra) {
            std::vector<std::string> a = {"explain", ds,     "h800",   "--gpus", "2048", "--gbs",
                                          "15360",   "--seq", "4096",  "--pp",   "16",   "--ep",
                                          "64",      "--etp", "1",     "--mbs",  "1",    "--zero",
                                          "1",       "--dtype", "fp8", "--fp8-recipe", "blockwise",
                                          "--recompute", "selective", "--first-stage-layers", "3",
                                          "--last-stage-layers", "2", "--format", "json"};
            a.insert(a.end(), extra.begin(), extra.end());
            const test::CliRun r = test::run_cleave(a);
            REQUIRE(r.code == 0);
            return nlohmann::json::parse(r.out);
        };
        const auto plain = run({});
        // The config's n_group 8 / topk_group 4 are the model's: the flex dispatcher alone prices
        // them; 8 of 8 groups is unlimited routing.
        const auto flex = run({"--moe-token-dispatcher-type", "flex"});
        const auto unlimited = run({"--moe-flex-dispatcher-backend", "deepep",
                                    "--moe-router-num-groups", "8", "--moe-router-group-topk", "8"});
        const auto limited = run({"--moe-flex-dispatcher-backend", "deepep", "--moe-router-num-groups",
                                  "8", "--moe-router-group-topk", "4"});
        const auto over = run({"--moe-flex-dispatcher-backend", "deepep", "--moe-router-num-groups",
                               "8", "--moe-router-group-topk", "4",
                               "--overlap-moe-expert-parallel-comm"});
        const double a = plain["time_s"]["ep_comm"].get<double>();
        const double b = flex["time_s"]["ep_comm"].get<double>();
        const double u = unlimited["time_s"]["ep_comm"].get<double>();
        const double c = limited["time_s"]["ep_comm"].get<double>();
        const double d = over["time_s"]["ep_comm"].get<double>();
        CAPTURE(a);
        CAPTURE(b);
        CAPTURE(u);
        CAPTURE(c);
        CAPTURE(d);
        CHECK(u < a);
        CHECK(b < u);
        CHECK(c == doctest::Approx(b));
        CHECK(d < c);
        // Exported as Megatron-LM flags.
        const test::CliRun p = test::run_cleave(
            {"plan", ds, "h800", "--gpus", "2048", "--gbs", "15360", "--seq", "4096", "--pp", "16",
             "--ep", "64", "--etp", "1", "--dtype", "fp8", "--fp8-recipe", "blockwise",
             "--moe-flex-dispatcher-backend", "deepep", "--moe-router-num-groups", "8",
             "--moe-router-group-topk", "4", "--overlap-moe-expert-parallel-comm", "--top", "1",
             "--format", "megatron", "--memory-headroom", "0"});
        CAPTURE(p.out);
        CAPTURE(p.err);
        REQUIRE(p.code == 0);
        CHECK(p.out.find("--moe-router-num-groups 8") != std::string::npos);
        CHECK(p.out.find("--moe-router-group-topk 4") != std::string::npos);
        CHECK(p.out.find("--moe-token-dispatcher-type flex") != std::string::npos);
        CHECK(p.out.find("--overlap-moe-expert-parallel-comm") != std::string::npos);
        const test::CliRun bad = test::run_cleave({"explain", ds, "h800", "--gpus", "2048",
                                                   "--moe-router-num-groups", "8"});
        CHECK(bad.code == 2);
    }
}

TEST_SUITE("costmodel") {
    TEST_CASE("collectives: NCCL's ring latency across nodes, and the tree for an all-reduce") {
        // 128 ranks on 16 nodes of 8 (a DP group of DGX H100s): intra step 1.86 us, network 10.8 us.
        GroupLink l;
        l.kind = LinkKind::network;
        l.busbw = gbps(47.0 * 8.0);
        l.step_latency = us(10.8);
        l.intra_latency = us(1.86);
        l.members_per_node = 8;
        l.nodes = 16;
        // Ring all-reduce: 2 x 127 = 254 steps, 2 x 15 = 30 of them across nodes:
        // 224 x 1.86 + 30 x 10.8 = 416.64 + 324 = 740.64 us; tree: 2 (7 x 1.86 + 4 x 10.8) =
        // 112.44 us, the smaller. (All steps at 10.8 us, as before: 2743.2 us.)
        CHECK(collective_latency(Collective::all_reduce, 128, l).value() ==
              doctest::Approx(112.44e-6).epsilon(1e-9));
        // All-gather (ring only): 127 steps, 15 across: 112 x 1.86 + 15 x 10.8 = 370.32 us.
        CHECK(collective_latency(Collective::all_gather, 128, l).value() ==
              doctest::Approx(370.32e-6).epsilon(1e-9));
        // Two nodes of 8: ring 14 x 1.86 + 2 x 10.8 = 47.64 us; tree 2 (7 x 1.86 + 1 x 10.8) =
        // 47.64 us too.
        l.nodes = 2;
        CHECK(collective_latency(Collective::all_reduce, 16, l).value() ==
              doctest::Approx(47.64e-6).epsilon(1e-9));
        // Inside one node: every step at the link's own latency.
        GroupLink in;
        in.kind = LinkKind::nvlink;
        in.step_latency = us(1.86);
        in.intra_latency = us(1.86);
        CHECK(collective_latency(Collective::all_reduce, 8, in).value() ==
              doctest::Approx(14 * 1.86e-6).epsilon(1e-9));
    }
}

#include "costmodel/flops.hpp"

TEST_SUITE("costmodel") {
    TEST_CASE("published: the DGXC recipes' own settings (Grok-1 GeGLU, TP overlap off)") {
        // NVIDIA/dgxc-benchmarking @35a9aec: grok1/grok1_314b.yaml (activation fast-geglu,
        // rmsnorm, rope, bias false, untied, Llama 3 tokenizer, moe_grouped_gemm false,
        // moe_pad_expert_input_to_capacity with capacity factor 1.0, ub_tp_comm_overlap false)
        // and nemotron/nemotron4-340b-synth.yaml (ub_tp_comm_overlap False, squared-relu,
        // layernorm1p, untied).
        const std::map<int64_t, PublishedCase> rows = cases_by_row("public_runs_2024.csv");
        PublishedCase grok = rows.at(128);
        CHECK(grok.model.mlp == MlpKind::swiglu);  // GeGLU: three matrices, SwiGLU's shapes
        CHECK(grok.model.norm == NormKind::rmsnorm);
        CHECK(grok.model.vocab == 128256);
        CHECK_FALSE(grok.model.tied_embeddings);
        CHECK_FALSE(grok.model.linear_bias);
        CHECK(grok.job.moe_pad);
        CHECK(grok.job.moe_capacity == doctest::Approx(1.0));
        CHECK(grok.recipe.tp_comm_overlap == std::optional<bool>(false));
        CHECK(grok.recipe.moe_grouped_gemm == std::optional<bool>(false));
        load_case_stack(grok);
        CHECK_FALSE(grok.job.stack.tp_comm_overlap);
        CHECK_FALSE(grok.job.stack.moe_grouped_gemm);
        // Parameters by hand: attention q 6144^2 = 37,748,736 + k,v 2 x 6144 x 1024 = 12,582,912
        // + o 37,748,736 = 88,080,384; 8 experts x 3 x 6144 x 32768 = 4,831,838,208; router
        // 8 x 6144 = 49,152; two RMSNorms 12,288: 4,919,980,032 a layer, x 64 =
        // 314,878,722,048; + 2 x 128256 x 6144 = 1,576,009,728 + 6,144 = 316,454,737,920: the
        // row's 314B, +0.8 % (with GeLU's two matrices it would be 213.4B).
        CHECK(params_total(grok.model) == 316454737920);
        // Model FLOPs per sample by hand: per token 6 x (64 x (88,080,384 + 2 x 3 x 6144 x 32768
        // + 49,152) + 6144 x 128256) = 6 x (82,949,701,632 + 788,004,864) = 502,426,238,976;
        // attention over all s keys (model_flops' convention) 3 x 64 x 4 x 8192 x 6144 =
        // 38,654,705,664: per sample 541,080,944,640 x 8192 = 4.43254e15. Causal attention at
        // half (the README's count) takes 8192 x 19,327,352,832 off: 4.2742e15, the README's
        // 4.27E+15 flops/sample.
        const double per_sample = model_flops(grok.model, grok.job).value() /
                                  static_cast<double>(grok.job.global_batch);
        CHECK(per_sample == doctest::Approx(541080944640.0 * 8192.0).epsilon(1e-9));
        CHECK(per_sample - 8192.0 * 19327352832.0 == doctest::Approx(4.27e15).epsilon(0.002));
        // Nemotron-4 340B: the row's notes and recipe turn TE userbuffers off.
        PublishedCase n340 = rows.at(123);
        CHECK(n340.recipe.tp_comm_overlap == std::optional<bool>(false));
        CHECK(n340.model.squared_relu);
        CHECK(n340.model.norm == NormKind::layernorm);
        CHECK_FALSE(n340.model.tied_embeddings);
        load_case_stack(n340);
        CHECK_FALSE(n340.job.stack.tp_comm_overlap);
        // Nemotron-4 15B keeps the overlap (ub_tp_comm_overlap True in nemotron4-15b-synth.yaml).
        PublishedCase n15 = rows.at(115);
        CHECK_FALSE(n15.recipe.tp_comm_overlap.has_value());
        // Measured 2026-12-06: Grok-1 -37.2 % -> -11.3 % (row 128), Nemotron-4 340B -12.7 % ->
        // -3.9 % (row 123), both rows' settings above.
        for (const auto& [r, lo, hi] :
             {std::tuple{128, -15.0, -7.0}, std::tuple{123, -7.0, 0.0}}) {
            CAPTURE(r);
            PublishedCase c = rows.at(r);
            load_case_stack(c);
            const PublishedResult res = evaluate_published(c, load_cluster(c.profile));
            CHECK(res.error_pct > lo);
            CHECK(res.error_pct < hi);
        }
    }
}

TEST_SUITE("costmodel") {
    TEST_CASE("published: Megatron-Bridge's Llama perf scripts run NVFP4 without TP overlap") {
        // scripts/performance/configs/llama/llama3_llm_pretrain.py, llama31_llm_pretrain.py
        // @v0.3.0 / v0.4.0: tp_comm_overlap = False if precision == "nvfp4". Rows 2011, 2014, 2017
        // (NVFP4, TP 4 / 2 / 4) lose the overlap; 2008 (NVFP4, TP 1) has none to lose; the FP8
        // rows 2001 and 2022 keep it.
        const std::map<int64_t, PublishedCase> rows = cases_by_row("public_runs_2026h1.csv");
        for (const int64_t r : {2011, 2014, 2017}) {
            CAPTURE(r);
            CHECK(rows.at(r).job.compute == Dtype::nvfp4);
            CHECK(rows.at(r).recipe.tp_comm_overlap == std::optional<bool>(false));
            PublishedCase c = rows.at(r);
            load_case_stack(c);
            CHECK_FALSE(c.job.stack.tp_comm_overlap);
        }
        CHECK_FALSE(rows.at(2008).recipe.tp_comm_overlap.has_value());
        CHECK_FALSE(rows.at(2001).recipe.tp_comm_overlap.has_value());
        CHECK_FALSE(rows.at(2022).recipe.tp_comm_overlap.has_value());
        // Row 2014 (70B, GB200, TP 2, NVFP4): exposed, the TP all-gathers and reduce-scatters
        // lengthen the step: -24.2 % with the overlap (quantised GEMMs: ring exchange, their
        // chunks priced, compute.cpp userbuffers_extra), -20.8 % without (2026-12-07: autograd's
        // gradient sums, compute.cpp layer_traffic).
        const double off = error_with(rows.at(2014), [](SoftwareStack&) {});
        const double on = error_with(rows.at(2014), [](SoftwareStack& s) { s.tp_comm_overlap = true; });
        CHECK(off == doctest::Approx(-20.84).epsilon(0.002));
        CHECK(on == doctest::Approx(-24.24).epsilon(0.002));
    }
}

TEST_SUITE("costmodel") {
    TEST_CASE("published: the 25.11 perf scripts gather MXFP8 weights before the forward") {
        // Megatron-Bridge @v0.2.0 scripts/performance/configs: overlap_param_gather = False under
        // fp8_mx in deepseek_v3_gb300/_gb200_config, llama3_70b_* and llama31_405b_* (GB300,
        // GB200, B200) and qwen3_235b_a22b_b200_config. Rows 1006 (DeepSeek-V3 GB300), 1015
        // (DeepSeek-V3 GB200), 1022 (Llama 3.1 405B B200) and 1026 (Qwen3-235B B200); not the
        // Llama 3 8B (1002), the Qwen3-30B (1008) nor DeepSeek-V3 on B200 (1023), nor FP8-CS.
        const std::map<int64_t, PublishedCase> rows = cases_by_row("public_runs_2025.csv");
        for (const int64_t r : {1006, 1015, 1022, 1026}) {
            CAPTURE(r);
            CHECK(rows.at(r).recipe.overlap_param_gather == std::optional<bool>(false));
            PublishedCase c = rows.at(r);
            load_case_stack(c);
            CHECK_FALSE(c.job.stack.overlap_param_gather);
        }
        for (const int64_t r : {1002, 1008, 1023, 1021, 1005}) {
            CAPTURE(r);
            CHECK_FALSE(rows.at(r).recipe.overlap_param_gather.has_value());
        }
        // Row 1029's preset (QWEN3_235B_A22B_H100_FP8_CS_BASE_CONFIG @v0.2.0) sets
        // tp_comm_overlap=False, its notes say: TP 2 with SP, the collectives exposed.
        CHECK(rows.at(1029).recipe.tp_comm_overlap == std::optional<bool>(false));
        CHECK_FALSE(rows.at(1028).recipe.tp_comm_overlap.has_value());  // TP 1
        // The gather, exposed, lengthens the step: row 1022 measured -7.9 % overlapped, -7.2 %
        // gathered first (2026-12-06).
        const double first = error_with(rows.at(1022), [](SoftwareStack&) {});
        const double behind =
            error_with(rows.at(1022), [](SoftwareStack& s) { s.overlap_param_gather = true; });
        CHECK(first > behind + 0.3);
    }
}

TEST_SUITE("costmodel") {
    TEST_CASE("published: the DGXC FP8 tables, the BF16 rows' layouts priced in FP8") {
        // tests/data/public_runs_2024_fp8.csv (scripts/make_dgxc_fp8_csv.py): the FP8 table of each
        // README of NVIDIA/dgxc-benchmarking @35a9aec, row id = the BF16 row's + 3000. The
        // recipes' model.fp8=true runs Transformer Engine's delayed scaling.
        const std::map<int64_t, PublishedCase> bf = cases_by_row("public_runs_2024.csv");
        const std::map<int64_t, PublishedCase> f8 = cases_by_row("public_runs_2024_fp8.csv");
        REQUIRE(f8.size() == 38);
        REQUIRE(bf.size() == 38);
        for (const auto& [id, c] : f8) {
            CAPTURE(id);
            REQUIRE(bf.count(id - 3000) == 1);
            const PublishedCase& b = bf.at(id - 3000);
            CHECK(c.source_key == b.source_key + "_FP8");
            CHECK(c.job.compute == Dtype::fp8);
            CHECK(c.job.fp8_recipe == Fp8Recipe::delayed);
            CHECK(b.job.compute == Dtype::bf16);
            // Same layout, batch and model: only the precision differs.
            CHECK(c.plan.tp == b.plan.tp);
            CHECK(c.plan.pp == b.plan.pp);
            CHECK(c.plan.dp == b.plan.dp);
            CHECK(c.plan.cp == b.plan.cp);
            CHECK(c.plan.vpp == b.plan.vpp);
            CHECK(c.plan.mbs == b.plan.mbs);
            CHECK(c.job.global_batch == b.job.global_batch);
            CHECK(c.model.layers == b.model.layers);
            // Every FP8 step was measured faster than its BF16 twin (Llama 3.1 8B on 8 GPUs:
            // 12.91 -> 9.67 s), by less than the 2x of the peaks.
            CHECK(c.published_s < b.published_s);
            CHECK(c.published_s > 0.5 * b.published_s);
        }
        // The prices the Hopper caution quotes for FP8 (api/explain.cpp): measured 2026-12-07 on
        // all 38 rows, signed mean -12.10 %, worst -22.97 % (row 3096, GPT-3 175B on 1,024 GPUs;
        // -13.02 / -24.10 before the 2 us launch gaps of costmodel/launches.hpp); the BF16 file
        // -9.5 %, so FP8 is priced further from the measurement than BF16.
        const std::string root = std::string(CLEAVE_TEST_DATA_DIR) + "/tests/data/";
        const auto r = test::run_cleave(
            {"published", root + "public_runs_2024_fp8.csv", "--format", "json"});
        REQUIRE(r.code == 0);
        const auto j = nlohmann::json::parse(r.out);
        const auto& it = j["iteration_time"];
        CHECK(it["rows"] == 38);
        CHECK(it["worst_row"] == 3096);
        CHECK(it["mean_signed_pct"].get<double>() == doctest::Approx(-12.1).epsilon(0.05));
        CHECK(it["worst_pct"].get<double>() == doctest::Approx(23.0).epsilon(0.05));
        // The pair by term (scripts/dgxc_precision_pair.py): FP8 shrinks the priced GEMMs and not
        // the attention core. Llama 3.1 8B on 8 GPUs (rows 98 / 3098): GEMMs 8.63 -> 5.04 s,
        // attention 2.04 s in both.
        std::map<int64_t, nlohmann::json> kinds;
        for (const auto& row : j["rows"]) {
            kinds[row["row_id"].get<int64_t>()] = row["predicted_by_kind_s"];
        }
        const auto rb = test::run_cleave(
            {"published", root + "public_runs_2024.csv", "--format", "json"});
        REQUIRE(rb.code == 0);
        const auto jb = nlohmann::json::parse(rb.out);
        for (const auto& row : jb["rows"]) {
            const int64_t id = row["row_id"].get<int64_t>();
            REQUIRE(kinds.count(id + 3000) == 1);
            const auto& kb = row["predicted_by_kind_s"];
            const auto& kf = kinds.at(id + 3000);
            CAPTURE(id);
            const double ratio = kb["gemm"].get<double>() / kf["gemm"].get<double>();
            CHECK(ratio > 1.4);
            CHECK(ratio < 2.0);
            CHECK(kf["attention"].get<double>() ==
                  doctest::Approx(kb["attention"].get<double>()).epsilon(1e-9));
        }
    }

    TEST_CASE("explain: the Hopper caution quotes the FP8 twins under fp8") {
        const std::string model = std::string(CLEAVE_TEST_DATA_DIR) + "/examples/llama-3-8b.toml";
        const auto said = [&](const char* dtype) {
            const auto r = test::run_cleave({"explain", model, "dgx-h100", "--gpus", "8", "--gbs",
                                             "128", "--cp", "2", "--zero", "1", "--dtype", dtype,
                                             "--format", "json"});
            REQUIRE(r.code == 0);
            return test::joined_cautions(r.out);
        };
        const std::string f8 = said("fp8");
        CHECK(f8.find("in FP8 the same 38 DGX Cloud layouts are 12 % slower") != std::string::npos);
        CHECK(f8.find("public_runs_2024_fp8.csv") != std::string::npos);
        CHECK(f8.find("up to about 20 % optimistic") != std::string::npos);
        const std::string b16 = said("bf16");
        CHECK(b16.find("in FP8") == std::string::npos);
        CHECK(b16.find("up to about 15 % optimistic") != std::string::npos);
    }
}

// `cleave run` under mpirun: the correctness matrix (every plan of the tiny models gives the
// loss and updated weights of the single-rank run, relative tolerance 1e-5) and the fault test
// (a rank that dies or hangs takes the whole job down within the timeout, with a message that
// names what failed). Each case launches mpirun (CLEAVE_MPIEXEC) on the cleave binary.
#include "tests/shell_run.hpp"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <string>
#include <sys/wait.h>
#include <utility>
#include <vector>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

namespace {

using Result = cleave::test::ShellResult;
using cleave::test::shell;

std::string data(const std::string& file) {
    return std::string(CLEAVE_TEST_DATA_DIR) + "/tests/executor/data/" + file;
}

std::string mpirun(int ranks) {
    return std::string(CLEAVE_MPIEXEC) + " --allow-run-as-root --oversubscribe -np " +
           std::to_string(ranks) + " " + CLEAVE_BIN + " run ";
}

nlohmann::json run_json(const std::string& model, int ranks, const std::string& flags) {
    const std::string cmd = mpirun(ranks) + data(model) + " dgx-a100-80g --gbs 4 --seq 16 " +
                            "--warmup 0 --iters 2 --timeout 60 --format json " + flags;
    const Result r = shell(cmd);
    INFO(cmd);
    INFO(r.output);
    REQUIRE(r.status == 0);
    // mpirun may add lines of its own; the JSON object is the output's last {...} block.
    const auto start = r.output.find('{');
    REQUIRE(start != std::string::npos);
    return nlohmann::json::parse(r.output.substr(start));
}

void same_as_single_rank(const std::string& model, int ranks, const std::string& flags) {
    const nlohmann::json ref = run_json(model, 1, "");
    const nlohmann::json got = run_json(model, ranks, flags);
    CAPTURE(flags);
    const double loss = ref["loss"];
    const double checksum = ref["weights_checksum"];
    CHECK(loss > 3.0);  // about ln(64) = 4.16 for near-uniform logits
    CHECK(got["loss"].get<double>() == doctest::Approx(loss).epsilon(1e-5));
    CHECK(got["weights_checksum"].get<double>() == doctest::Approx(checksum).epsilon(1e-5));
    CHECK(got["world_size"].get<int>() == ranks);
    CHECK(got["iteration_time_s"].get<double>() > 0.0);
    CHECK(got["peak_memory_gib"].get<double>() > 0.0);
    CHECK(got["ranks"].size() == static_cast<size_t>(ranks));
}

// Issue 16: as same_as_single_rank, and every tensor: its probe (Params::probes) weighs each
// weight by its own pseudo-random number, so one weight of a tensor off by an Adam step shows
// even where the plain sum (dominated by the norm gains near 1) would hide it.
// Returns the multi-rank run's JSON for further checks (one mpirun launch less per case).
nlohmann::json probes_same_as_single_rank(const std::string& model,
                                          int ranks,
                                          const std::string& flags,
                                          size_t tensors) {
    const nlohmann::json ref = run_json(model, 1, "");
    const nlohmann::json got = run_json(model, ranks, flags);
    CAPTURE(flags);
    const double loss = ref["loss"];
    const double probe = ref["weights_probe"];
    CHECK(loss > 3.0);  // about ln(64) = 4.16, plus the load-balancing terms (about 0.01 each)
    CHECK(std::abs(probe) > 1e-2);
    CHECK(got["loss"].get<double>() == doctest::Approx(loss).epsilon(1e-5));
    CHECK(got["weights_checksum"].get<double>() ==
          doctest::Approx(ref["weights_checksum"].get<double>()).epsilon(1e-5));
    CHECK(got["weights_probe"].get<double>() == doctest::Approx(probe).epsilon(1e-5));
    CHECK(ref["weights_probes"].size() == tensors);
    CHECK(got["weights_probes"].size() == ref["weights_probes"].size());
    for (const auto& [name, value] : ref["weights_probes"].items()) {
        CAPTURE(name);
        REQUIRE(got["weights_probes"].contains(name));
        CHECK(got["weights_probes"][name].get<double>() ==
              doctest::Approx(value.get<double>()).epsilon(1e-5));
    }
    CHECK(got["world_size"].get<int>() == ranks);
    return got;
}

void moe_same_as_single_rank(int ranks, const std::string& flags) {
    // 4 layers: 4 norm pairs, q k v o; layer 0 gate up down; layers 1-3 a router and 4
    // experts x 3 matrices; embedding, output, final norm = 4 * 6 + 3 + 3 * 13 + 3 = 69.
    const nlohmann::json got = probes_same_as_single_rank("tiny_moe.toml", ranks, flags, 69);
    CHECK(got["phases_s"]["ep_comm"].get<double>() > 0.0);
}

// Issue 26: tiny_hybrid's layers M E * M - E. Tensors: each Mamba-2 layer 17 (pre-norm, five
// in_proj matrices, conv taps and bias for x, B and C, dt_bias, A_log, D, gated-norm gain,
// out_proj), each MoE layer 10 (norm, router, 4 experts x fc1 fc2), the attention layer 5
// (norm, q k v o), the MLP layer 3 (norm, fc1, fc2); embedding, output, final norm:
// 2 * 17 + 2 * 10 + 5 + 3 + 3 = 65.
void hybrid_same_as_single_rank(int ranks, const std::string& flags) {
    probes_same_as_single_rank("tiny_hybrid.toml", ranks, flags, 65);
}

}  // namespace

TEST_SUITE("executor") {
    TEST_CASE("run: the weights move, so the matrix compares something") {
        const nlohmann::json a = run_json("tiny_gpt.toml", 1, "");
        const nlohmann::json b = run_json("tiny_gpt.toml", 1, "--lr 1e-3");
        CHECK(a["weights_checksum"].get<double>() !=
              doctest::Approx(b["weights_checksum"].get<double>()).epsilon(1e-5));
        CHECK(a["losses"].size() == 2);
    }
    TEST_CASE("run: dp2 matches 1x1x1") {
        same_as_single_rank("tiny_gpt.toml", 2, "--dp 2");
    }
    TEST_CASE("run: dp2 with DP gradient buckets (--dp-overlap on) matches 1x1x1") {
        // Issue 17: every element of the gradient buffer is reduced exactly once (twice would
        // double it, never would leave it unsummed), so the result equals the whole-buffer one.
        same_as_single_rank("tiny_gpt.toml", 2, "--dp 2 --dp-overlap on");
        const nlohmann::json got = run_json("tiny_gpt.toml", 2, "--dp 2 --dp-overlap on");
        // The CPU backend runs each bucket at once: nothing is hidden, all DP time is exposed.
        CHECK(got["phases_s"]["dp_comm"].get<double>() > 0.0);
        CHECK(got["phases_s"]["dp_exposed"].get<double>() ==
              got["phases_s"]["dp_comm"].get<double>());
    }
    TEST_CASE("run: llama dp2 interleaved pp2 with DP gradient buckets matches 1x1x1") {
        same_as_single_rank("tiny_llama.toml", 4, "--dp 2 --pp 2 --vpp 2 --dp-overlap on");
    }
    TEST_CASE("run: dp2 tp2 sp with DP gradient buckets matches 1x1x1") {
        same_as_single_rank("tiny_gpt.toml", 4, "--dp 2 --tp 2 --sp --dp-overlap on");
    }
    TEST_CASE("run: asking the CPU backend for bf16 or fused attention is exit 2") {
        // Issue 17: the CPU backend is the fp32 reference and prices fp32 (--dtype defaults to
        // fp32 there); bf16 or fused attention on it is an error that says so, not a silent
        // fp32 run priced as bf16.
        const std::string cmd = std::string(CLEAVE_BIN) + " run " + data("tiny_gpt.toml") +
                                " dgx-a100-80g --gbs 2 --seq 16 --warmup 0 --iters 1 ";
        const Result bf16 = shell(cmd + "--dtype bf16");
        CHECK(bf16.status == 2);
        CHECK(bf16.output.find("--dtype bf16: the CPU backend computes in fp32 only") !=
              std::string::npos);
        const Result fused = shell(cmd + "--attention fused");
        CHECK(fused.status == 2);
        CHECK(fused.output.find("--attention fused: the CPU backend runs unfused attention") !=
              std::string::npos);
        const nlohmann::json ok = run_json("tiny_gpt.toml", 1, "--dtype fp32");
        CHECK(ok["dtype"] == "fp32");
        CHECK(ok["attention"] == "unfused");
        CHECK(run_json("tiny_gpt.toml", 1, "")["dtype"] == "fp32");  // the CPU default
    }
    TEST_CASE("run: dp2 zero1 matches 1x1x1") {
        same_as_single_rank("tiny_gpt.toml", 2, "--dp 2 --zero 1");
    }
    TEST_CASE("run: tp2 matches 1x1x1") {
        same_as_single_rank("tiny_gpt.toml", 2, "--tp 2");
    }
    TEST_CASE("run: tp2 sp matches 1x1x1") {
        same_as_single_rank("tiny_gpt.toml", 2, "--tp 2 --sp");
    }
    TEST_CASE("run: pp2 matches 1x1x1") {
        same_as_single_rank("tiny_gpt.toml", 2, "--pp 2");
    }
    TEST_CASE("run: dp2 tp2 matches 1x1x1") {
        same_as_single_rank("tiny_gpt.toml", 4, "--dp 2 --tp 2");
    }
    TEST_CASE("run: tp2 pp2 matches 1x1x1") {
        same_as_single_rank("tiny_gpt.toml", 4, "--tp 2 --pp 2");
    }
    TEST_CASE("run: 7 layers on pp2, a first stage with the embedding and fewer layers") {
        // 3 + 4: stage 0 holds the embedding and 3 layers, stage 1 4 layers and the loss.
        same_as_single_rank("tiny_gpt7.toml", 2, "--pp 2 --first-stage-layers 3");
        // The same map in Megatron's layout notation, interleaved: stage 0 chunks 1 + 2 (the
        // embedding's chunk one short), stage 1 chunks 2 + 2.
        same_as_single_rank("tiny_gpt7.toml", 2, "--pp 2 --pipeline-layout 'Et|tt|tt|ttL'");
    }
    TEST_CASE("run: interleaved with micro-batches not a multiple of pp matches 1x1x1") {
        // 7 layers on pp 3 as 3 / 2 / 2 over vpp 2; gbs 4: m = 4 on pp 3, Megatron's one group
        // of 4 micro-batches (interleave_group(3, 4) = 4).
        same_as_single_rank("tiny_gpt7.toml", 3, "--pp 3 --vpp 2 --first-stage-layers 3");
    }
    TEST_CASE("run: pp2 interleaved matches 1x1x1") {
        same_as_single_rank("tiny_gpt.toml", 2, "--pp 2 --vpp 2");
    }
    TEST_CASE("run: pp4 gpipe matches 1x1x1") {
        same_as_single_rank("tiny_gpt.toml", 4, "--pp 4 --schedule gpipe");
    }
    TEST_CASE("run: pp4 1f1b with full recompute matches 1x1x1") {
        same_as_single_rank("tiny_gpt.toml", 4, "--pp 4 --schedule 1f1b --recompute full");
    }
    TEST_CASE("run: llama tp2 sp selective recompute matches 1x1x1") {
        same_as_single_rank("tiny_llama.toml", 2, "--tp 2 --sp --recompute selective");
    }
    TEST_CASE("run: llama pp2 dp2 zero1 matches 1x1x1") {
        same_as_single_rank("tiny_llama.toml", 4, "--pp 2 --dp 2 --zero 1");
    }

    TEST_CASE("run: MoE ep2 (dp2) matches 1x1x1, and the trace shows its all-to-alls") {
        moe_same_as_single_rank(2, "--dp 2 --ep 2");
        const std::string trace = std::string(CLEAVE_BINARY_DIR) + "/executor_test_moe_trace.json";
        run_json("tiny_moe.toml", 2, "--dp 2 --ep 2 --trace " + trace);
        FILE* f = std::fopen(trace.c_str(), "r");
        REQUIRE(f != nullptr);
        const nlohmann::json t = nlohmann::json::parse(f);
        std::fclose(f);
        // Per rank: 2 iterations x 2 micro-batches x 3 MoE layers; each forward has a counts
        // exchange, a dispatch and a combine, each backward a dispatch and a combine.
        std::map<std::string, int> count;
        for (const auto& e : t["traceEvents"]) {
            if (e["ph"] == "X" && e.value("cat", "") == "ep" && e["pid"] == 0) {
                CHECK(e["tid"] == 6);
                ++count[e.value("name", "")];
            }
        }
        CHECK(count["ep all_to_all counts"] == 12);
        CHECK(count["ep all_to_all dispatch"] == 12);
        CHECK(count["ep all_to_all combine"] == 12);
        CHECK(count["ep all_to_all dispatch (backward)"] == 12);
        CHECK(count["ep all_to_all combine (backward)"] == 12);
    }
    TEST_CASE("run: MoE ep2 etp1 under tp2 sp dp2 (expert-DP 2) matches 1x1x1") {
        // Expert TP apart from dense TP (--etp 1 with tp 2): ep rank = stage-local rank % 2, so
        // each TP pair dispatches to both EP ranks; edp = tp * dp / (etp * ep) = 2: expert
        // gradients are reduced over ranks 0+2 and 1+3, dense ones over DP (0+2, 1+3 too, but
        // the router and norms also over TP).
        moe_same_as_single_rank(4, "--tp 2 --sp --dp 2 --ep 2 --etp 1");
    }
    TEST_CASE("run: MoE ep2 x pp2 (dp2) with full recompute matches 1x1x1") {
        // The backward re-runs each MoE layer's forward (routing, both all-to-alls) without
        // adding its load-balancing term to the loss a second time.
        moe_same_as_single_rank(4, "--dp 2 --pp 2 --ep 2 --recompute full");
    }
    TEST_CASE("run: MoE ep2 x etp2 (tp2 sp dp2) matches 1x1x1") {
        // etp unset = tp = 2 (Megatron-Core's default): each expert's gate / up columns and
        // down rows split over 2 ranks; ep * etp = 4 = tp * dp.
        moe_same_as_single_rank(4, "--dp 2 --tp 2 --sp --ep 2");
    }
    TEST_CASE("run: hybrid (Mamba-2, attention, MLP, MoE) pp2 matches 1x1x1") {
        // Stages M E * | M - E: every kind on both stages, the scan's chunks 6 + 6 + 4.
        hybrid_same_as_single_rank(2, "--pp 2");
    }
    TEST_CASE("run: hybrid tp2 sp matches 1x1x1 (Mamba-2 heads and groups split over TP)") {
        hybrid_same_as_single_rank(2, "--tp 2 --sp");
    }
    TEST_CASE("run: hybrid ep2 (dp2) matches 1x1x1") {
        hybrid_same_as_single_rank(2, "--dp 2 --ep 2");
    }
    TEST_CASE("run: hybrid tp2 pp2 with full recompute matches 1x1x1") {
        hybrid_same_as_single_rank(4, "--tp 2 --sp --pp 2 --recompute full");
    }

    TEST_CASE("run: MoE probe sees the load-balancing loss and the learning rate") {
        // The probe is not blind: a run without the load-balancing loss, or with another
        // learning rate, ends at other weights (and, without it, a lower loss).
        const nlohmann::json ref = run_json("tiny_moe.toml", 2, "--dp 2 --ep 2");
        const nlohmann::json no_aux =
            run_json("tiny_moe.toml", 2, "--dp 2 --ep 2 --moe-aux-loss-coeff 0");
        const nlohmann::json lr = run_json("tiny_moe.toml", 2, "--dp 2 --ep 2 --lr 2e-4");
        CHECK(no_aux["loss"].get<double>() < ref["loss"].get<double>() - 1e-3);
        CHECK(no_aux["weights_probe"].get<double>() !=
              doctest::Approx(ref["weights_probe"].get<double>()).epsilon(1e-5));
        CHECK(lr["weights_probe"].get<double>() !=
              doctest::Approx(ref["weights_probe"].get<double>()).epsilon(1e-5));
    }

    TEST_CASE("run: the table marks non-data lines with # and the trace has every step") {
        const std::string trace = std::string(CLEAVE_BINARY_DIR) + "/executor_test_trace.json";
        const Result r =
            shell(mpirun(2) + data("tiny_gpt.toml") +
                  " dgx-a100-80g --pp 2 --gbs 4 --warmup 0 --iters 1 --trace " + trace);
        INFO(r.output);
        REQUIRE(r.status == 0);
        int data_lines = 0;
        size_t pos = 0;
        while (pos < r.output.size()) {
            const size_t end = r.output.find('\n', pos);
            const std::string line = r.output.substr(pos, end - pos);
            pos = end == std::string::npos ? r.output.size() : end + 1;
            if (!line.empty() && line[0] != '#') {
                ++data_lines;  // one per rank: "rank stage dp tp iter compute ..."
            }
        }
        CHECK(data_lines == 2);
        FILE* f = std::fopen(trace.c_str(), "r");
        REQUIRE(f != nullptr);
        const nlohmann::json t = nlohmann::json::parse(f);
        std::fclose(f);
        // pp = 2, m = 4: each stage runs F and B of micro-batches 0..3 once.
        int steps[2] = {0, 0};
        // Tied embeddings: both stages meet once per iteration before the embedding all-reduce,
        // on the pipeline's backward stream (the wait is pipeline time, not DP traffic).
        int meets[2] = {0, 0};
        for (const auto& e : t["traceEvents"]) {
            const std::string name = e.value("name", "");
            if (e["ph"] == "X" && (name.rfind("F mb", 0) == 0 || name.rfind("B mb", 0) == 0)) {
                CHECK(e["tid"] == 0);
                ++steps[e["pid"].get<int>()];
            }
            if (e["ph"] == "X" && name == "pp flush: first and last stage meet") {
                CHECK(e["cat"] == "pp");
                ++meets[e["pid"].get<int>()];
            }
        }
        CHECK(steps[0] == 8);
        CHECK(steps[1] == 8);
        CHECK(meets[0] == 1);
        CHECK(meets[1] == 1);
        // Issue 17: each step's receive is posted one step early, before the previous step's
        // compute. 1F1B, pp 2, m 4: stage 0 runs F0 F1 B0 F2 B1 F3 B2 B3 and receives before
        // B0..B3, all four posted a step ahead; stage 1 runs F0 B0 F1 B1 ... and receives before
        // F0..F3, F0's posted at step 0 itself, the other three a step ahead.
        for (int pid = 0; pid < 2; ++pid) {
            std::vector<std::pair<double, std::string>> ev;
            for (const auto& e : t["traceEvents"]) {
                if (e["ph"] == "X" && e["pid"].get<int>() == pid) {
                    ev.emplace_back(e["ts"].get<double>(), e.value("name", ""));
                }
            }
            std::stable_sort(ev.begin(), ev.end(), [](const auto& a, const auto& b) {
                return a.first < b.first;
            });
            int receives = 0;
            int early = 0;
            bool posted = false;
            bool computed_since_post = false;
            for (const auto& [ts, name] : ev) {
                if (name == "post recv") {
                    posted = true;
                    computed_since_post = false;
                } else if (name.rfind("F mb", 0) == 0 || name.rfind("B mb", 0) == 0) {
                    computed_since_post = true;
                } else if (name == "recv activation" || name == "recv gradient") {
                    CHECK(posted);
                    ++receives;
                    early += computed_since_post ? 1 : 0;
                    posted = false;
                }
            }
            CAPTURE(pid);
            CHECK(receives == 4);
            CHECK(early == (pid == 0 ? 4 : 3));
        }
    }

    TEST_CASE("run: a hung rank aborts the job within the timeout, naming group and operation") {
        using clock = std::chrono::steady_clock;
        const auto t0 = clock::now();
        const Result r = shell(mpirun(2) + data("tiny_gpt.toml") +
                               " dgx-a100-80g --pp 2 --gbs 4 --timeout 2 --fault-rank 1 "
                               "--fault-at-iter 0 --fault-mode hang");
        const double s = std::chrono::duration<double>(clock::now() - t0).count();
        INFO(r.output);
        CHECK(r.status != 0);
        CHECK(s < 30.0);
        CHECK(r.output.find("injected fault") != std::string::npos);
        CHECK(r.output.find("rank 0: recv on group 'pp'") != std::string::npos);
        CHECK(r.output.find("not done after 2 s") != std::string::npos);
    }

    TEST_CASE("run: a rank that exits mid-iteration takes the job down") {
        using clock = std::chrono::steady_clock;
        const auto t0 = clock::now();
        const Result r = shell(mpirun(2) + data("tiny_gpt.toml") +
                               " dgx-a100-80g --dp 2 --gbs 4 --timeout 2 --fault-rank 1 "
                               "--fault-at-iter 0 --fault-mode exit");
        const double s = std::chrono::duration<double>(clock::now() - t0).count();
        INFO(r.output);
        CHECK(r.status != 0);
        CHECK(s < 30.0);
        CHECK(r.output.find("injected fault") != std::string::npos);
    }
}

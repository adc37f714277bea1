// The loop issue 46 closes on the CPU: `cleave run --trace` of one model writes Kineto events that
// `cleave trace` classifies whole, `cleave calibrate --from-trace` fits an overlay to them, and
// `cleave validate` of a second model with that overlay is priced no worse than with the
// microbenchmark profile alone, within this VM's timing noise.
#include "tests/shell_run.hpp"

#include <cstdio>
#include <string>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

namespace {

using cleave::test::shell;

std::string data(const std::string& file) {
    return std::string(CLEAVE_TEST_DATA_DIR) + "/tests/executor/data/" + file;
}

std::string bin() { return std::string(CLEAVE_BIN); }

std::string mpirun(int ranks) {
    return std::string(CLEAVE_MPIEXEC) + " --allow-run-as-root --oversubscribe -np " +
           std::to_string(ranks) + " " + bin();
}

// The JSON object in a command's output: from its first '{' to the last line that is "}" (mpirun
// and validate's verdict on stderr may surround it).
nlohmann::json last_json(const std::string& out) {
    const auto start = out.find('{');
    REQUIRE(start != std::string::npos);
    const auto end = out.rfind("\n}");
    REQUIRE(end != std::string::npos);
    REQUIRE(end > start);
    return nlohmann::json::parse(out.substr(start, end + 2 - start));
}

double validate_mape(const std::string& profile, const std::string& extra) {
#ifdef CLEAVE_SANITIZED
    // One round, one warm-up: sanitized builds check that the loop runs, not its timing.
    const std::string rounds = " --rounds 1 --warmup-max 1";
#else
    const std::string rounds;
#endif
    // stderr apart: its lines would interleave with the JSON on stdout.
    const std::string cmd = "{ " + mpirun(2) + " validate " + data("tiny_gpt.toml") + " " + profile +
                            " --gbs 8 --seq 64 --top 3 --iters 3 --timeout 60 --max-error 1000 "
                            "--format json" + extra + rounds + " 2>/dev/null; }";
    const auto r = shell(cmd);
    INFO(cmd);
    INFO(r.output);
    REQUIRE(r.status == 0);
    return last_json(r.output)["mape_pct"].get<double>();
}

}  // namespace

TEST_CASE("run --trace -> cleave trace -> calibrate --from-trace -> validate, on the CPU") {
    const std::string dir = std::string(CLEAVE_BINARY_DIR) + "/trace_loop_";
    const std::string trace = dir + "run.json";
    const std::string overlay = dir + "overlay.toml";
    // The 2-rank `calibrate --quick` profile: the one CTest's calibrated_profile fixture writes
    // (calibrate.mpirun_calibrate_quick, the same command), or this test's own when run alone.
    std::string profile = std::string(CLEAVE_BINARY_DIR) + "/tests/calibrate/calibrated-quick.toml";
    auto r = shell("test -s " + profile);
    if (r.status != 0) {
        profile = dir + "cpu.toml";
        r = shell(mpirun(2) + " calibrate --quick --out " + profile);
        INFO(r.output);
        REQUIRE(r.status == 0);
    }

    r = shell(mpirun(2) + " run " + data("tiny_llama.toml") + " " + profile +
              " --gbs 8 --seq 64 --warmup 1 --iters 3 --tp 2 --sp --timeout 60 --trace " + trace);
    INFO(r.output);
    REQUIRE(r.status == 0);

    // Every kernel the executor launched has a class; three ProfilerSteps, rank 0 of 2.
    r = shell(bin() + " trace " + trace + " --format json");
    INFO(r.output);
    REQUIRE(r.status == 0);
    const nlohmann::json t = last_json(r.output);
    CHECK(t["unclassified_ms"].get<double>() == 0.0);
    CHECK(t["backend"] == "cleave");
    CHECK(t["world_size"] == 2);
    CHECK(t["steps"].size() == 3);
    CHECK(t["by_class_ms"]["gemm"].get<double>() > 0.0);
    CHECK(t["by_class_ms"]["attention"].get<double>() > 0.0);
    CHECK(t["by_class_ms"]["norm"].get<double>() > 0.0);
    CHECK(t["by_class_ms"]["communication"].get<double>() > 0.0);  // TP 2 with SP

    r = shell(bin() + " calibrate --from-trace " + trace + " " + data("tiny_llama.toml") + " " +
              profile + " --gpus 2 --gbs 8 --seq 64 --tp 2 --sp --out " + overlay);
    INFO(r.output);
    REQUIRE(r.status == 0);
    CHECK(r.output.find("Not informed by this trace") != std::string::npos);

#ifdef CLEAVE_SANITIZED
    // Under ASan + UBSan every memory access is instrumented, and more so in the small kernels than
    // in the GEMMs: the efficiencies a trace fits then describe the sanitizer (CI measured 5 %
    // without, 34 % with), not the machine. The loop is checked up to validate with the overlay;
    // the comparison with the microbenchmark profile alone is for optimised builds (its validate
    // run is skipped here: it fed only that comparison). validate_mape's REQUIREs are the check:
    // the run exits 0 and its JSON carries mape_pct.
    validate_mape(profile, " --calibration " + overlay);
#else
    const double without = validate_mape(profile, "");
    const double with = validate_mape(profile, " --calibration " + overlay);
    MESSAGE("validate tiny_gpt MAPE: " << without << " % with the microbenchmark profile, " << with
                                       << " % with the trace overlay");
    // Timing on a shared 2-core VM swings by tens of percent between runs (each figure is one
    // validate run, measured apart; one run in five under three other jobs came out 51.6 against
    // 51.3 % at a bound of 1.5 x + 10), so the bound leaves room for that noise while still
    // catching an overlay that breaks the price (a factor fitted the wrong way round, or fitted
    // to all steps as one, gives several hundred percent). The note of issue 46 gives quiet runs.
    CHECK(with <= without * 2.0 + 20.0);
#endif
}

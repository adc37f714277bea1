#pragma once
// The commands that execute on real ranks (api/cleave.hpp is the rest of the API): run a plan
// as training iterations and measure it, validate the cost model against such runs. They link
// the executor and MPI (library cleave_api_run), so `import cleave` does not. The caller owns
// MPI (initialised, one call per rank of MPI_COMM_WORLD) and what a failed rank does to the job.

#include "api/cleave.hpp"
#include "calibrate/measure.hpp"
#include "calibrate/profile.hpp"
#include "calibrate/validate.hpp"
#include "executor/profiling_backend.hpp"
#include "executor/run.hpp"

#include <cstdint>
#include <functional>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace cleave::api {

// --- run: one plan as real training iterations ------------------------------------------------

struct RunOptions {
    int64_t iters = 3;
    int64_t warmup = 1;
    std::string backend = "cpu";          // cpu (fp32 reference) or cuda
    std::string attention = "unfused";    // unfused or fused (cuda)
    std::string dp_overlap = "auto";      // auto (on with cuda), on, off
    bool dtype_given = false;             // the job's dtype was given (the CPU runs fp32 only)
    double timeout_s = 300.0;             // one collective or transfer at most (0: none)
    std::string trace;                    // Chrome trace of the measured iterations ("" none)
    bool kernel_profile = false;          // time every kernel; rank 0's table
    uint64_t seed = 1234;
    double lr = 1e-4;
    double moe_aux_loss_coeff = 0.01;     // Switch load-balancing loss coefficient
    // The model scaled down for small machines (0 = the model's value).
    int64_t layers = 0, hidden = 0, heads = 0, kv_heads = 0, ffn = 0, vocab = 0;
    // Test faults: rank fault_rank stops at step fault_step of iteration fault_iter (exit,
    // hang), or sleeps 0.3 s at step fault_step of every iteration (delay).
    int64_t fault_rank = -1, fault_iter = 0, fault_step = 1;
    std::string fault_mode = "exit";
};

struct Ran {
    Inputs inputs;
    Plan plan;
    executor::Measurement measurement;
    Estimate estimate;  // priced as executed (the executor's kernels, overlap, no dropout)
    std::string device;
    RunOptions options;
    std::vector<executor::KernelStat> kernels;  // with kernel_profile
};

/// Runs `plan` for `job` on this rank (`rank` of `world`); the measurement and the prediction
/// on rank 0, nothing elsewhere. Throws ConfigError (every rank alike) on bad input.
[[nodiscard]] std::optional<Ran> run(JobOptions job,
                                     PlanOptions plan,
                                     const RunOptions& o,
                                     int rank,
                                     int world,
                                     std::ostream& err);
[[nodiscard]] nlohmann::json to_json(const Ran& r);
void print_table(std::ostream& os, const Ran& r);

// --- validate: plan, run the top plans and contrasting ones, compare -------------------------

struct ValidateOptions {
    int64_t top = 3;              // best plans run (plus one per missing shape and the worst)
    double max_error_pct = 15.0;  // the MAPE the caller accepts
    int64_t iters = 3;
    int64_t warmup = 1;      // warm-up iterations at least
    int64_t warmup_max = 6;  // ... and on until two in a row are within 5%, at most this many
    int64_t rounds = 3;      // every plan runs this many times, in turn
    std::string backend = "cpu";
    double timeout_s = 600.0;
    bool calibrate = false;        // measure the machine instead of reading the job's cluster
    bool calibrate_quick = false;  // ... with calibrate --quick's sweep
    std::string save_profile;      // write the profile measured before planning
};

struct Validated {
    Inputs inputs;
    ValidateOptions options;
    calibrate::ValidationReport report;
    std::string first_profile;  // with calibrate: the profile it planned with (TOML)
};

/// Called with (plans run, plans to run, the plan now) over every round.
using ValidateProgressFn = std::function<void(int64_t, int64_t, const std::string&)>;

/// Plans `job` on this rank (`rank` of `world`), runs the chosen plans and compares them with
/// their prediction (calibrate/validate.hpp). Throws ConfigError (every rank alike) on bad
/// input.
[[nodiscard]] Validated validate(const JobOptions& job,
                                 const ValidateOptions& o,
                                 int rank,
                                 int world,
                                 std::ostream& err,
                                 const ValidateProgressFn& progress = {});
[[nodiscard]] nlohmann::json to_json(const Validated& v);
void print_table(std::ostream& os, const Validated& v);

// --- calibrate: this machine measured into a hardware profile ---------------------------------

struct CalibrateOptions {
    std::string out;  // where the caller writes the profile ("" = stdout, after the report)
    std::string name;  // profile name ("" = calibrated-<host>)
    std::string backend = "cpu";
    bool quick = false;  // few sizes, short timings
};

struct Calibrated {
    int rank = 0;
    calibrate::Calibration calibration;
    calibrate::Summary summary;
    std::string profile;  // the profile TOML (rank 0 checks that it loads as a CLUSTER)
};

/// Called with (phase, done, total) while the measurements run.
using CalibrateProgressFn = std::function<void(const std::string&, int64_t, int64_t)>;

/// Measures GEMMs, memory, the executor's kernels and the collectives on this rank (`rank` of
/// `world`, every rank together: calibrate/measure.hpp) and writes the profile TOML.
[[nodiscard]] Calibrated calibrate_machine(const CalibrateOptions& o,
                                           int rank,
                                           int world,
                                           const CalibrateProgressFn& progress = {});
/// The measurement report (every line a '#' comment, so report + profile is still TOML).
void print_table(std::ostream& os, const Calibrated& c);

}  // namespace cleave::api

// cleave calibrate: measure this machine through the executor's backend and write a hardware
// profile (docs/calibrate.md).
#include "calibrate/measure.hpp"
#include "calibrate/mpi_session.hpp"
#include "calibrate/profile.hpp"
#include "cli/commands.hpp"
#include "cli/common.hpp"
#include "cli/progress.hpp"
#include "core/errors.hpp"
#include "core/load.hpp"
#include "executor/registry.hpp"

#include <fstream>
#include <memory>
#include <ostream>
#include <sstream>

namespace cleave::cli {

namespace {

struct CalibrateOptions {
    std::string out;  // "" = the profile goes to stdout after the report
    std::string name;
    std::string backend = "cpu";
    bool quick = false;
};

std::string command_line(const CalibrateOptions& o, int ranks) {
    std::string c = "mpirun -np " + std::to_string(ranks) + " cleave calibrate";
    c += o.backend != "cpu" ? " --backend " + o.backend : "";
    c += o.quick ? " --quick" : "";
    c += o.name.empty() ? "" : " --name " + o.name;
    c += o.out.empty() ? "" : " --out " + o.out;
    return c;
}

// The report: every line starts with '#', so report + profile on stdout is still valid TOML.
void print_report(std::ostream& os, const calibrate::Calibration& c, const calibrate::Summary& s) {
    os << "# cleave calibrate: " << c.ranks << " rank(s) on " << c.host << ", " << c.device
       << "\n#\n# GEMM (fp32, mean of NN/NT/TN)     GFLOP/s  efficiency\n";
    for (const auto& g : c.gemm) {
        std::ostringstream shape;
        shape << g.m << " x " << g.n << " x " << g.k;
        os << "#   " << shape.str()
           << std::string(30 - std::min<size_t>(29, shape.str().size()), ' ')
           << fixed(g.flop_per_s() / 1e9, 2) << "  " << fixed(g.flop_per_s() / s.peak.value(), 3)
           << "\n";
    }
    os << "# peak (best of the sweep): " << fixed(s.peak.value() / 1e9, 2) << " GFLOP/s per rank\n"
       << "#\n# memory (per rank, all ranks at once)   GB/s\n";
    for (const auto& m : c.memory) {
        os << "#   " << m.kernel << std::string(37 - m.kernel.size(), ' ')
           << fixed(m.bytes_per_s() / 1e9, 2) << "\n";
    }
    os << "#\n# executor kernels (GB/s, bytes as the cost model counts them)\n";
    for (const auto& m : c.kernels) {
        os << "#   " << m.kernel << std::string(37 - m.kernel.size(), ' ')
           << fixed(m.bytes_per_s() / 1e9, 2) << "\n";
    }
    os << "# memory peak " << fixed(s.memory_peak.value() / 1e9, 2) << " GB/s, kernel efficiency "
       << fixed(s.memory_efficiency, 3) << "\n";
    if (!c.collectives.empty()) {
        os << "#\n# collective      ranks      size(B)     time(us)  algbw(GB/s)  busbw(GB/s)\n";
        for (const auto& x : c.collectives) {
            const Bandwidths b = bandwidths(x.op, bytes(x.size_B), x.ranks, seconds(x.t_s));
            std::ostringstream line;
            line << "#   " << to_string(x.op);
            std::string l = line.str();
            l += std::string(18 - std::min<size_t>(17, l.size()), ' ');
            os << l << x.ranks << "  "
               << std::string(11 - std::to_string(int64_t(x.size_B)).size(), ' ')
               << static_cast<int64_t>(x.size_B) << "  " << fixed(x.t_s * 1e6, 1) << "  "
               << fixed(to_gbps(b.algbw), 3) << "  " << fixed(to_gbps(b.busbw), 3) << "\n";
        }
        os << "#\n# alpha-beta fits (t = alpha * steps + S * busbw_factor / beta)\n";
        for (const auto& f : s.per_collective) {
            os << "#   " << to_string(f.op) << ": alpha " << fixed(to_us(f.fit.alpha), 2)
               << " us/step, beta " << fixed(to_gbps(f.fit.beta), 3) << " GB/s (rms "
               << fixed(100.0 * f.fit.rms_rel_error, 1) << "%)\n";
        }
        os << "#   all (the profile's link): alpha " << fixed(to_us(s.link.alpha), 2)
           << " us/step, beta " << fixed(to_gbps(s.link.beta), 3) << " GB/s (rms "
           << fixed(100.0 * s.link.rms_rel_error, 1) << "%)\n";
    }
}

void run_calibrate(const CalibrateOptions& o, CliContext& ctx) {
    calibrate::MpiSession mpi;
    const bool root = mpi.rank() == 0;
    std::string profile;
    try {
        auto be = executor::make_backend(o.backend, {});
        calibrate::BenchOptions bo;
        bo.quick = o.quick;
        // One progress line per measurement phase, with its ETA, on a terminal only.
        std::unique_ptr<Progress> bar;
        std::string phase;
        if (root && is_terminal(ctx.err)) {
            bo.progress = [&](std::string_view what, int64_t done, int64_t total) {
                if (!bar || what != phase) {
                    phase = what;
                    bar.reset();
                    bar = std::make_unique<Progress>(ctx.err, true, "calibrate " + phase);
                }
                bar->update(done, total);
            };
        }
        const calibrate::Calibration c = calibrate::measure(*be, bo);
        const calibrate::Summary s = calibrate::summarize(c);
        const std::string name = o.name.empty() ? "calibrated-" + c.host : o.name;
        const ClusterSpec k = calibrate::to_cluster(c, s, name);
        profile = calibrate::profile_toml(c, s, k, {utc_now(), command_line(o, mpi.size())});
        if (root) {
            print_report(ctx.out, c, s);
        }
    } catch (const std::exception& e) {
        ctx.err << "cleave calibrate (rank " << mpi.rank() << "): " << e.what() << "\n";
        mpi.abort_if_parallel(1);
        throw;
    }
    if (!root) {
        return;
    }
    // Round trip: the profile must load as CLUSTER.
    (void)parse_cluster_toml(profile, o.out.empty() ? "<calibrated profile>" : o.out);
    if (o.out.empty()) {
        ctx.out << "\n" << profile;
        return;
    }
    std::ofstream f(o.out);
    if (!(f << profile)) {
        throw ConfigError("--out: cannot write '" + o.out + "'");
    }
    ctx.out << "# profile written to " << o.out << " (use it as CLUSTER)\n";
}

}  // namespace

void setup_calibrate(CLI::App& app, CliContext& ctx) {
    auto opt = std::make_shared<CalibrateOptions>();
    auto* sub = app.add_subcommand(
        "calibrate",
        "Measure this machine (GEMM, memory, collectives; run under mpirun) and write a hardware "
        "profile");
    sub->add_option("--out", opt->out, "Profile TOML to write (default: stdout, after the report)");
    sub->add_option("--name", opt->name, "Profile name (default: calibrated-<host>)");
    sub->add_option("--backend", opt->backend, "Executor backend to measure")
        ->check(CLI::IsMember({"cpu", "cuda"}))
        ->capture_default_str();
    sub->add_flag("--quick", opt->quick, "Few sizes, short timings (seconds; for tests)");
    sub->callback([opt, &ctx] { run_calibrate(*opt, ctx); });
}

}  // namespace cleave::cli

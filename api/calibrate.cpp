// cleave calibrate: measure this machine through the executor's backend into a hardware profile
// (docs/calibrate.md; api/run.hpp calibrate()).
#include "api/run.hpp"
#include "calibrate/measure.hpp"
#include "calibrate/profile.hpp"
#include "core/errors.hpp"
#include "core/load.hpp"
#include "executor/registry.hpp"

#include <fstream>
#include <memory>
#include <ostream>
#include <sstream>

namespace cleave::api {

namespace {


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

}  // namespace

Calibrated calibrate_machine(const CalibrateOptions& o,
                             int rank,
                             int world,
                             const CalibrateProgressFn& progress) {
    auto be = executor::make_backend(o.backend, {});
    calibrate::BenchOptions bo;
    bo.quick = o.quick;
    if (progress) {
        bo.progress = [&progress](std::string_view what, int64_t done, int64_t total) {
            progress(std::string(what), done, total);
        };
    }
    Calibrated out;
    out.rank = rank;
    out.calibration = calibrate::measure(*be, bo);
    out.summary = calibrate::summarize(out.calibration);
    const std::string name = o.name.empty() ? "calibrated-" + out.calibration.host : o.name;
    const ClusterSpec k = calibrate::to_cluster(out.calibration, out.summary, name);
    out.profile = calibrate::profile_toml(out.calibration, out.summary, k,
                                          {utc_now(), command_line(o, world)});
    if (rank == 0) {
        // Round trip: the profile must load as CLUSTER.
        (void)parse_cluster_toml(out.profile, o.out.empty() ? "<calibrated profile>" : o.out);
    }
    return out;
}

void print_table(std::ostream& os, const Calibrated& c) {
    print_report(os, c.calibration, c.summary);
}

}  // namespace cleave::api

#include "executor/collect.hpp"

#include "executor/mpi_util.hpp"

#include <algorithm>
#include <cmath>
#include <sstream>

namespace cleave::executor {

double median(std::vector<double> v) {
    if (v.empty()) {
        return 0.0;
    }
    std::sort(v.begin(), v.end());
    const size_t n = v.size();
    return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

Collector::Collector(Backend& be, Group world, int64_t iterations)
    : be_(be)
    , world_(world)
    , token_(be, 1)
    , loss_parts_(static_cast<size_t>(iterations), 0.0) {}

bool warmed_up(const std::vector<double>& times_s, double tolerance) {
    if (times_s.size() < 2) {
        return false;
    }
    const double a = times_s[times_s.size() - 2];
    const double b = times_s.back();
    return std::abs(a - b) <= tolerance * std::max(a, b);
}

void Collector::barrier() {
    be_.all_reduce(world_, token_, ReduceOp::sum);
}

double Collector::max(double v) {
    be_.fill(token_, static_cast<float>(v));
    be_.all_reduce(world_, token_, ReduceOp::max);
    std::array<float, 1> out{};
    be_.download(out, token_);
    return static_cast<double>(out[0]);
}

void Collector::record(int64_t it,
                       bool measured,
                       double time_s,
                       const Recorder& rec,
                       double loss_part,
                       int64_t peak_B) {
    if (static_cast<size_t>(it) >= loss_parts_.size()) {
        loss_parts_.resize(static_cast<size_t>(it) + 1, 0.0);  // warm-up ran longer (issue 18)
    }
    loss_parts_[static_cast<size_t>(it)] = loss_part;
    peak_B_ = std::max(peak_B_, peak_B);
    if (!measured) {
        return;
    }
    std::array<double, slots> p{};
    double other = 0.0;
    for (int i = 1; i < phase_count; ++i) {
        p[static_cast<size_t>(i)] = rec.phase_s(static_cast<Phase>(i));
        other += p[static_cast<size_t>(i)];
    }
    p[0] = std::max(0.0, time_s - other);  // compute: everything not spent communicating / updating
    p[phase_count] = rec.hidden_dp_s();
    times_.push_back(time_s);
    phases_.push_back(p);
}

namespace {

// a: the phases (Phase order), then the hidden DP time. dp_comm is all DP communication
// (blocking + hidden), dp_exposed the part that blocked the step.
PhaseTimes to_phases(const std::array<double, phase_count + 1>& a) {
    const auto at = [&](Phase p) { return a[static_cast<size_t>(p)]; };
    const double hidden = a[phase_count];
    PhaseTimes t;
    t.compute_s = at(Phase::compute);
    t.tp_comm_s = at(Phase::tp_comm);
    t.pp_wait_s = at(Phase::pp_wait);
    t.dp_comm_s = at(Phase::dp_comm) + hidden;
    t.optimizer_s = at(Phase::optimizer);
    t.dp_exposed_s = at(Phase::dp_comm);
    t.dp_wait_s = at(Phase::dp_wait);
    t.ep_comm_s = at(Phase::ep_comm);
    return t;
}

std::string serialize(const std::vector<TraceEvent>& events) {
    std::ostringstream os;
    os.precision(17);
    for (const auto& e : events) {
        os << e.name << '\t' << e.category << '\t' << e.pid << '\t' << e.tid << '\t' << e.ts_us
           << '\t' << e.dur_us << '\n';
    }
    return os.str();
}

void deserialize(const std::string& text, std::vector<TraceEvent>& out) {
    std::istringstream is(text);
    std::string line;
    while (std::getline(is, line)) {
        std::istringstream ls(line);
        TraceEvent e;
        std::getline(ls, e.name, '\t');
        std::getline(ls, e.category, '\t');
        ls >> e.pid >> e.tid >> e.ts_us >> e.dur_us;
        out.push_back(std::move(e));
    }
}

std::vector<char> gather_text(const std::string& local, int rank, int size) {
    int n = detail::mpi_count(static_cast<int64_t>(local.size()));
    std::vector<int> counts(static_cast<size_t>(size));
    CLEAVE_MPI_CHECK(MPI_Gather(&n, 1, MPI_INT, counts.data(), 1, MPI_INT, 0, MPI_COMM_WORLD));
    std::vector<int> displs(static_cast<size_t>(size), 0);
    int total = 0;
    for (size_t i = 0; i < counts.size(); ++i) {
        displs[i] = total;
        total += counts[i];
    }
    std::vector<char> all(static_cast<size_t>(rank == 0 ? total : 0));
    CLEAVE_MPI_CHECK(MPI_Gatherv(local.data(),
                                 n,
                                 MPI_CHAR,
                                 all.data(),
                                 counts.data(),
                                 displs.data(),
                                 MPI_CHAR,
                                 0,
                                 MPI_COMM_WORLD));
    return all;
}

void add_tracks(Trace& t, const std::vector<RankReport>& ranks) {
    const char* threads[] = {"compute", "pp forward", "pp backward", "dp", "tp", "optimizer", "ep"};
    for (const auto& r : ranks) {
        t.tracks.push_back({r.world_rank,
                            -1,
                            "rank " + std::to_string(r.world_rank) + " (stage " +
                                std::to_string(r.at.pp_rank) + ", dp " +
                                std::to_string(r.at.dp_rank) + ", tp " +
                                std::to_string(r.at.tp_rank) + ")"});
        for (int64_t tid = 0; tid < 7; ++tid) {
            t.tracks.push_back({r.world_rank, tid, threads[tid]});
        }
    }
}

// Per-tensor probes over ranks: the total on every rank, the per-tensor sums on rank 0.
void gather_probes(const std::vector<std::pair<std::string, double>>& probes,
                   int rank,
                   int size,
                   Measurement& m) {
    double part = 0.0;
    std::ostringstream os;
    os.precision(17);
    for (const auto& [name, value] : probes) {
        part += value;
        os << name << '\t' << value << '\n';
    }
    CLEAVE_MPI_CHECK(
        MPI_Allreduce(&part, &m.weights_probe, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD));
    const std::vector<char> text = gather_text(os.str(), rank, size);
    std::istringstream is(std::string(text.begin(), text.end()));
    std::string name;
    double value = 0.0;
    while (std::getline(is, name, '\t') && is >> value) {
        m.weights_probes[name] += value;
        is.ignore(1);
    }
}

}  // namespace

Measurement Collector::finish(double checksum_part,
                              const std::vector<std::pair<std::string, double>>& probes,
                              const RankCoords& at,
                              Recorder& rec) {
    const int rank = be_.world_rank();
    const int size = be_.world_size();
    Measurement m;
    m.losses.resize(loss_parts_.size());
    CLEAVE_MPI_CHECK(MPI_Allreduce(loss_parts_.data(),
                                   m.losses.data(),
                                   detail::mpi_count(static_cast<int64_t>(loss_parts_.size())),
                                   MPI_DOUBLE,
                                   MPI_SUM,
                                   MPI_COMM_WORLD));
    m.loss = m.losses.empty() ? 0.0 : m.losses.back();
    CLEAVE_MPI_CHECK(
        MPI_Allreduce(&checksum_part, &m.weights_checksum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD));
    gather_probes(probes, rank, size, m);
    m.iteration_times_s.resize(times_.size());
    CLEAVE_MPI_CHECK(MPI_Allreduce(times_.data(),
                                   m.iteration_times_s.data(),
                                   detail::mpi_count(static_cast<int64_t>(times_.size())),
                                   MPI_DOUBLE,
                                   MPI_MAX,
                                   MPI_COMM_WORLD));
    m.iteration_time_s = median(m.iteration_times_s);
    int64_t peak = peak_B_;
    CLEAVE_MPI_CHECK(MPI_Allreduce(&peak_B_, &peak, 1, MPI_INT64_T, MPI_MAX, MPI_COMM_WORLD));
    m.peak_memory_B = peak;

    std::array<double, slots> med{};
    for (size_t i = 0; i < med.size(); ++i) {
        std::vector<double> v;
        for (const auto& p : phases_) {
            v.push_back(p[i]);
        }
        med[i] = median(v);
    }
    std::array<double, slots> sum{};
    CLEAVE_MPI_CHECK(
        MPI_Allreduce(med.data(), sum.data(), slots, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD));
    for (double& x : sum) {
        x /= size;
    }
    m.phases = to_phases(sum);

    constexpr int head = 6;
    constexpr int fields = head + slots;
    std::array<double, fields> mine = {static_cast<double>(rank),
                                       static_cast<double>(at.tp_rank),
                                       static_cast<double>(at.dp_rank),
                                       static_cast<double>(at.pp_rank),
                                       median(times_),
                                       static_cast<double>(peak_B_)};
    std::copy(med.begin(), med.end(), mine.begin() + head);
    std::vector<double> all(static_cast<size_t>(rank == 0 ? fields * size : 0));
    CLEAVE_MPI_CHECK(MPI_Gather(
        mine.data(), fields, MPI_DOUBLE, all.data(), fields, MPI_DOUBLE, 0, MPI_COMM_WORLD));
    for (int r = 0; rank == 0 && r < size; ++r) {
        const double* f = all.data() + static_cast<ptrdiff_t>(r) * fields;
        RankReport rr;
        rr.world_rank = static_cast<int64_t>(f[0]);
        rr.at = {
            static_cast<int64_t>(f[1]), static_cast<int64_t>(f[2]), static_cast<int64_t>(f[3])};
        rr.iteration_time_s = f[4];
        rr.peak_memory_B = static_cast<int64_t>(f[5]);
        std::array<double, slots> ph{};
        std::copy(f + head, f + fields, ph.begin());
        rr.phases = to_phases(ph);
        m.ranks.push_back(rr);
    }
    if (rec.tracing()) {
        const std::vector<char> text = gather_text(serialize(rec.events()), rank, size);
        if (rank == 0) {
            add_tracks(m.trace, m.ranks);
            deserialize(std::string(text.begin(), text.end()), m.trace.events);
        }
    }
    return m;
}

}  // namespace cleave::executor

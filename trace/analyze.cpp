#include "trace/analyze.hpp"

#include <algorithm>
#include <cstddef>
#include <limits>
#include <set>
#include <unordered_map>

namespace cleave::trace {

namespace {

using Intervals = std::vector<std::pair<double, double>>;

size_t idx(Class c) { return static_cast<size_t>(c); }

// Innermost annotation of `list` (sorted by start) that holds time `ts`; -1 when none.
int64_t innermost(const std::vector<const Annotation*>& list, double ts) {
    auto it = std::upper_bound(list.begin(), list.end(), ts,
                               [](double v, const Annotation* a) { return v < a->ts_us; });
    while (it != list.begin()) {
        --it;
        if (ts <= (*it)->ts_us + (*it)->dur_us) {
            return it - list.begin();
        }
    }
    return -1;
}

// PyTorch's scalar type names ("c10::BFloat16", "float", "c10::Float8_e4m3fn") as the class
// table's GEMM dtypes.
std::string torch_dtype(const std::string& t) {
    if (t.find("BFloat16") != std::string::npos) {
        return "bf16";
    }
    if (t.find("Half") != std::string::npos) {
        return "fp16";
    }
    if (t.find("Float8") != std::string::npos) {
        return "fp8";
    }
    if (t.find("Float4") != std::string::npos) {
        return "fp4";
    }
    if (t == "float" || t == "Float") {
        return "fp32";
    }
    if (t == "double") {
        return "fp64";
    }
    return t;
}

bool is_step(const std::string& name) { return name.rfind("ProfilerStep#", 0) == 0; }

struct RangeAcc {
    RangeStats stats;
    // per occurrence: first start, last end of its kernels
    std::unordered_map<const Annotation*, std::pair<double, double>> extent;
};

void add_to(RangeAcc& r, const Annotation* occ, const GpuEvent& g, Class c) {
    ++r.stats.kernels;
    r.stats.kernel_ms += g.dur_us * 1e-3;
    r.stats.by_class_ms[idx(c)] += g.dur_us * 1e-3;
    auto [it, fresh] = r.extent.try_emplace(occ, g.ts_us, g.ts_us + g.dur_us);
    if (!fresh) {
        it->second.first = std::min(it->second.first, g.ts_us);
        it->second.second = std::max(it->second.second, g.ts_us + g.dur_us);
    }
}

std::vector<RangeStats> finish_ranges(std::map<std::string, RangeAcc>& acc) {
    std::vector<RangeStats> out;
    for (auto& [name, r] : acc) {
        r.stats.name = name;
        r.stats.occurrences = static_cast<int64_t>(r.extent.size());
        for (const auto& [occ, ext] : r.extent) {
            r.stats.span_ms += (ext.second - ext.first) * 1e-3;
            r.stats.cpu_ms += occ->on_gpu ? 0.0 : occ->dur_us * 1e-3;
        }
        out.push_back(r.stats);
    }
    return out;
}

}  // namespace

double union_length(Intervals& iv) {
    std::sort(iv.begin(), iv.end());
    double total = 0.0;
    double cur_s = 0.0;
    double cur_e = -std::numeric_limits<double>::infinity();
    bool open = false;
    for (const auto& [s, e] : iv) {
        if (!open || s > cur_e) {
            if (open) {
                total += cur_e - cur_s;
            }
            cur_s = s;
            cur_e = e;
            open = true;
        } else {
            cur_e = std::max(cur_e, e);
        }
    }
    if (open) {
        total += cur_e - cur_s;
    }
    return total;
}

std::string short_kernel_name(const std::string& full) {
    std::string s = full;
    if (s.rfind("void ", 0) == 0) {
        s = s.substr(5);
    }
    // Cut the parameter list: the last '(' at template depth 0.
    int depth = 0;
    size_t cut = std::string::npos;
    for (size_t i = 0; i < s.size(); ++i) {
        if (s[i] == '<') {
            ++depth;
        } else if (s[i] == '>') {
            --depth;
        } else if (s[i] == '(' && depth == 0) {
            cut = i;
            break;
        }
    }
    if (cut != std::string::npos && cut > 0) {
        s = s.substr(0, cut);
    }
    // cutlass::device_kernel<X>: X names the kernel.
    const std::string dk = "cutlass::device_kernel<";
    if (s.rfind(dk, 0) == 0 && s.back() == '>') {
        s = s.substr(dk.size(), s.size() - dk.size() - 1);
    }
    // Template arguments of what is left: keep the first 40 characters of them.
    const size_t lt = s.find('<');
    if (lt != std::string::npos && s.size() - lt > 40) {
        s = s.substr(0, lt + 40) + "...>";
    }
    if (s.size() > 110) {
        s = s.substr(0, 107) + "...";
    }
    return s;
}

TraceSummary summarize(const KinetoTrace& t, const ClassTable& classes, const SummaryOptions& o) {
    TraceSummary s;
    s.file = t.file;
    s.file_bytes = t.file_bytes;
    s.crc32 = t.crc32;
    s.gpu = t.gpu_name;
    s.sms = t.gpu_sms;
    s.rank = t.rank;
    s.world_size = t.world_size;
    s.backend = t.backend;
    s.events = t.events;
    s.launch_gap_us = o.launch_gap_us;
    s.class_files = classes.files;

    // Classify each distinct name once.
    std::vector<Classified> by_name(t.names.size());
    for (size_t i = 0; i < t.names.size(); ++i) {
        by_name[i] = classify(classes, t.names[i]);
    }
    const auto cls_of = [&](const GpuEvent& g) {
        return g.is_copy ? Class::memcpy : by_name[g.name].cls;
    };

    double first = std::numeric_limits<double>::infinity();
    double last = -std::numeric_limits<double>::infinity();
    std::map<int32_t, Intervals> compute_iv, comm_iv, all_iv;
    std::map<std::pair<int32_t, int64_t>, std::vector<const GpuEvent*>> per_stream;
    std::unordered_map<uint32_t, KernelStats> per_kernel;
    for (const GpuEvent& g : t.gpu) {
        const Class c = cls_of(g);
        const double ms = g.dur_us * 1e-3;
        first = std::min(first, g.ts_us);
        last = std::max(last, g.ts_us + g.dur_us);
        s.by_class_ms[idx(c)] += ms;
        (g.is_copy ? s.copies : s.kernels) += 1;
        const std::pair<double, double> iv{g.ts_us, g.ts_us + g.dur_us};
        all_iv[g.device].push_back(iv);
        if (is_compute(c)) {
            compute_iv[g.device].push_back(iv);
            s.compute_kernel_ms += ms;
            if (g.dur_us < o.small_kernel_us) {
                ++s.small_kernels;
                s.small_kernel_ms += ms;
            }
        } else if (c == Class::communication) {
            comm_iv[g.device].push_back(iv);
            if (g.blocks > 0 && (t.gpu_sms == 0 || g.blocks <= t.gpu_sms)) {
                s.communication_sms = std::max<int64_t>(s.communication_sms, g.blocks);
            }
            const std::string& op = by_name[g.name].op;
            s.communication_by_op_ms[op.empty() ? "other" : op] += ms;
        }
        if (c == Class::gemm) {
            const std::string& dt = by_name[g.name].dtype;
            s.gemm_by_dtype_ms[dt.empty() ? "unknown" : dt] += ms;
        }
        per_stream[{g.device, g.stream}].push_back(&g);
        if (!g.is_copy) {
            KernelStats& k = per_kernel[g.name];
            if (k.count == 0) {
                k.min_us = g.dur_us;
                k.max_us = g.dur_us;
            }
            ++k.count;
            k.total_ms += ms;
            k.min_us = std::min(k.min_us, g.dur_us);
            k.max_us = std::max(k.max_us, g.dur_us);
        }
    }
    s.span_ms = (last - first) * 1e-3;
    s.devices = static_cast<int64_t>(all_iv.size());
    for (auto& [dev, iv] : all_iv) {
        Intervals comp = compute_iv[dev];
        Intervals both = compute_iv[dev];
        Intervals comm = comm_iv[dev];
        both.insert(both.end(), comm.begin(), comm.end());
        const double c = union_length(comp);
        const double cb = union_length(both);
        s.compute_busy_ms += c * 1e-3;
        s.communication_busy_ms += union_length(comm) * 1e-3;
        s.exposed_communication_ms += (cb - c) * 1e-3;
        s.gpu_busy_ms += union_length(iv) * 1e-3;
    }
    s.hidden_communication_ms = s.communication_busy_ms - s.exposed_communication_ms;

    // The host's launches: how many, from how many threads.
    const auto launch_of = [&t](const GpuEvent& g) -> const Launch* {
        if (g.correlation < 0) {
            return nullptr;
        }
        const auto it = t.launches.find(g.correlation);
        return it == t.launches.end() ? nullptr : &it->second;
    };
    {
        std::set<std::pair<int64_t, int64_t>> threads;
        for (const GpuEvent& g : t.gpu) {
            if (const Launch* l = launch_of(g); l != nullptr) {
                ++s.launched;
                threads.emplace(l->pid, l->tid);
            }
        }
        s.launch_threads = static_cast<int64_t>(threads.size());
    }
    std::vector<double> leads;  // compute kernels: start - launch return

    // Streams: busy time, classes, and the idle gaps between kernels of compute streams.
    for (auto& [key, evs] : per_stream) {
        StreamStats st;
        st.device = key.first;
        st.id = key.second;
        std::sort(evs.begin(), evs.end(),
                  [](const GpuEvent* a, const GpuEvent* b) { return a->ts_us < b->ts_us; });
        Intervals iv;
        double comp = 0.0;
        double rest = 0.0;
        for (const GpuEvent* g : evs) {
            const Class c = cls_of(*g);
            st.by_class_ms[idx(c)] += g->dur_us * 1e-3;
            st.kernel_ms += g->dur_us * 1e-3;
            (is_compute(c) ? comp : rest) += g->dur_us;
            st.kernels += g->is_copy ? 0 : 1;
            iv.emplace_back(g->ts_us, g->ts_us + g->dur_us);
        }
        st.busy_ms = union_length(iv) * 1e-3;
        st.compute = comp > rest;
        if (st.compute) {
            double end = evs.front()->ts_us + evs.front()->dur_us;
            for (size_t i = 0; i < evs.size(); ++i) {
                if (const Launch* l = launch_of(*evs[i]); l != nullptr) {
                    leads.push_back(evs[i]->ts_us - (l->ts_us + l->dur_us));
                }
            }
            for (size_t i = 1; i < evs.size(); ++i) {
                const double gap = evs[i]->ts_us - end;
                if (gap > 0.0) {
                    if (gap <= o.launch_gap_us) {
                        ++st.launch_gaps;
                        st.launch_gaps_ms += gap * 1e-3;
                    } else {
                        ++st.waits;
                        st.waits_ms += gap * 1e-3;
                    }
                }
                end = std::max(end, evs[i]->ts_us + evs[i]->dur_us);
            }
            s.launch_gaps += st.launch_gaps;
            s.launch_gaps_ms += st.launch_gaps_ms;
            s.waits_ms += st.waits_ms;
        }
        s.streams.push_back(st);
    }
    // Host waits: each device's compute idle time (gaps in the union of its compute kernels;
    // a side stream idle while another computes is no loss), the part of each gap before the
    // launch of the kernel that ends it returned.
    {
        std::map<int32_t, std::vector<const GpuEvent*>> compute_by_device;
        for (const GpuEvent& g : t.gpu) {
            if (!g.is_copy && is_compute(cls_of(g))) {
                compute_by_device[g.device].push_back(&g);
            }
        }
        for (auto& [dev, evs] : compute_by_device) {
            std::sort(evs.begin(), evs.end(), [](const GpuEvent* a, const GpuEvent* b) {
                return a->ts_us != b->ts_us ? a->ts_us < b->ts_us : a->dur_us > b->dur_us;
            });
            double end = evs.front()->ts_us + evs.front()->dur_us;
            for (size_t i = 1; i < evs.size(); ++i) {
                const double gap = evs[i]->ts_us - end;
                if (gap > 0.0) {
                    if (const Launch* l = launch_of(*evs[i]); l != nullptr) {
                        const double late = std::clamp(l->ts_us + l->dur_us - end, 0.0, gap);
                        if (late > 0.0) {
                            ++s.host_waits;
                            s.host_wait_ms += late * 1e-3;
                        }
                    }
                }
                end = std::max(end, evs[i]->ts_us + evs[i]->dur_us);
            }
        }
    }
    if (!leads.empty()) {
        const auto mid = leads.begin() + static_cast<std::ptrdiff_t>(leads.size() / 2);
        std::nth_element(leads.begin(), mid, leads.end());
        s.launch_lead_median_us = *mid;
    }

    // Top and unclassified kernels.
    std::vector<KernelStats> ks;
    for (auto& [name, k] : per_kernel) {
        k.name = t.names[name];
        k.cls = by_name[name].cls;
        k.matched = by_name[name].matched;
        k.library = by_name[name].library;
        ks.push_back(k);
    }
    std::sort(ks.begin(), ks.end(), [](const KernelStats& a, const KernelStats& b) {
        return a.total_ms != b.total_ms ? a.total_ms > b.total_ms : a.name < b.name;
    });
    for (const KernelStats& k : ks) {
        if (static_cast<int64_t>(s.top.size()) < o.top) {
            s.top.push_back(k);
        }
        if (!k.matched) {
            s.unclassified_ms += k.total_ms;
            if (static_cast<int64_t>(s.unclassified.size()) < o.top) {
                s.unclassified.push_back(k);
            }
        }
    }

    // Steps and phases from user annotations: a kernel belongs to the range its CPU launch ran
    // in (steps: any thread of the process; phases: the innermost range on the launching
    // thread), or, without a launch record, to the GPU annotation its run falls in.
    std::map<std::pair<int64_t, int64_t>, std::vector<const Annotation*>> cpu_by_thread;
    std::map<int64_t, std::vector<const Annotation*>> cpu_by_pid;
    std::map<int64_t, std::vector<const Annotation*>> steps_by_pid;
    std::vector<const Annotation*> gpu_ranges;
    for (const Annotation& a : t.annotations) {
        if (a.on_gpu) {
            gpu_ranges.push_back(&a);
        } else if (is_step(a.name)) {
            steps_by_pid[a.pid].push_back(&a);
        } else {
            cpu_by_thread[{a.pid, a.tid}].push_back(&a);
            cpu_by_pid[a.pid].push_back(&a);
        }
    }
    const auto by_start = [](const Annotation* a, const Annotation* b) {
        return a->ts_us != b->ts_us ? a->ts_us < b->ts_us : a->dur_us > b->dur_us;
    };
    for (auto& [k, v] : cpu_by_thread) {
        std::sort(v.begin(), v.end(), by_start);
    }
    for (auto& [k, v] : cpu_by_pid) {
        std::sort(v.begin(), v.end(), by_start);
    }
    for (auto& [k, v] : steps_by_pid) {
        std::sort(v.begin(), v.end(), by_start);
    }
    std::vector<const Annotation*> gpu_steps;
    std::vector<const Annotation*> gpu_phases;
    for (const Annotation* a : gpu_ranges) {
        (is_step(a->name) ? gpu_steps : gpu_phases).push_back(a);
    }
    std::sort(gpu_steps.begin(), gpu_steps.end(), by_start);
    std::sort(gpu_phases.begin(), gpu_phases.end(), by_start);
    std::map<std::string, RangeAcc> steps;
    std::map<std::string, RangeAcc> phases;
    for (const GpuEvent& g : t.gpu) {
        const Class c = cls_of(g);
        const Launch* l = nullptr;
        if (g.correlation >= 0) {
            if (auto it = t.launches.find(g.correlation); it != t.launches.end()) {
                l = &it->second;
            }
        }
        const Annotation* step = nullptr;
        const Annotation* phase = nullptr;
        if (l != nullptr) {
            if (auto it = steps_by_pid.find(l->pid); it != steps_by_pid.end()) {
                if (const int64_t i = innermost(it->second, l->ts_us); i >= 0) {
                    step = it->second[static_cast<size_t>(i)];
                }
            }
            if (auto it = cpu_by_thread.find({l->pid, l->tid}); it != cpu_by_thread.end()) {
                if (const int64_t i = innermost(it->second, l->ts_us); i >= 0) {
                    phase = it->second[static_cast<size_t>(i)];
                }
            }
            // A thread with no ranges of its own (autograd's backward thread) runs inside the
            // range the thread that called backward() is in.
            if (phase == nullptr && cpu_by_thread.count({l->pid, l->tid}) == 0) {
                if (auto it = cpu_by_pid.find(l->pid); it != cpu_by_pid.end()) {
                    if (const int64_t i = innermost(it->second, l->ts_us); i >= 0) {
                        phase = it->second[static_cast<size_t>(i)];
                    }
                }
            }
        }
        const double mid = g.ts_us + 0.5 * g.dur_us;
        if (step == nullptr && !gpu_steps.empty()) {
            if (const int64_t i = innermost(gpu_steps, mid); i >= 0) {
                step = gpu_steps[static_cast<size_t>(i)];
            }
        }
        if (phase == nullptr && !gpu_phases.empty()) {
            if (const int64_t i = innermost(gpu_phases, mid); i >= 0) {
                phase = gpu_phases[static_cast<size_t>(i)];
            }
        }
        if (step != nullptr) {
            add_to(steps[step->name], step, g, c);
        }
        if (phase != nullptr) {
            RangeAcc& r = phases[phase->name];
            add_to(r, phase, g, c);
            r.stats.launched += l != nullptr && !phase->on_gpu ? 1 : 0;
        }
    }
    s.steps = finish_ranges(steps);
    s.phases = finish_ranges(phases);
    std::sort(s.phases.begin(), s.phases.end(), [](const RangeStats& a, const RangeStats& b) {
        return a.kernel_ms != b.kernel_ms ? a.kernel_ms > b.kernel_ms : a.name < b.name;
    });

    // GEMM shapes: each matmul op (External id) once, with the GEMM kernels it launched.
    struct OpAcc {
        const MatmulOp* op = nullptr;
        double us = 0.0;
        std::string kernel_dtype;
    };
    std::unordered_map<int64_t, OpAcc> ops;
    for (const GpuEvent& g : t.gpu) {
        if (g.external_id < 0 || cls_of(g) != Class::gemm) {
            continue;
        }
        if (auto it = t.matmuls.find(g.external_id); it != t.matmuls.end()) {
            OpAcc& a = ops[g.external_id];
            a.op = &it->second;
            a.us += g.dur_us;
            if (a.kernel_dtype.empty()) {
                a.kernel_dtype = by_name[g.name].dtype;
            }
        }
    }
    std::map<std::tuple<std::string, double, double, double, double, std::string>, GemmShape> shapes;
    for (const auto& [id, a] : ops) {
        const MatmulOp& op = *a.op;
        const std::string dt = op.dtype.empty() ? a.kernel_dtype : torch_dtype(op.dtype);
        GemmShape& gs = shapes[{op.op, op.m, op.n, op.k, op.batch, dt}];
        gs.op = op.op;
        gs.m = op.m;
        gs.n = op.n;
        gs.k = op.k;
        gs.batch = op.batch;
        gs.dtype = dt;
        ++gs.calls;
        gs.kernel_ms += a.us * 1e-3;
    }
    for (auto& [key, gs] : shapes) {
        const double flops = 2.0 * gs.m * gs.n * gs.k * gs.batch * static_cast<double>(gs.calls);
        gs.tflops = gs.kernel_ms > 0.0 ? flops / (gs.kernel_ms * 1e-3) / 1e12 : 0.0;
        s.gemm_shapes.push_back(gs);
    }
    std::sort(s.gemm_shapes.begin(), s.gemm_shapes.end(),
              [](const GemmShape& a, const GemmShape& b) {
                  return a.kernel_ms != b.kernel_ms ? a.kernel_ms > b.kernel_ms : a.op < b.op;
              });
    return s;
}

}  // namespace cleave::trace

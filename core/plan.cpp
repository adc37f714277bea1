#include "core/plan.hpp"

namespace cleave {

int64_t num_microbatches(const Plan& p, const JobSpec& job) {
    const int64_t per_step = p.mbs * p.dp;
    return per_step > 0 ? job.global_batch / per_step : 0;
}

int64_t plan_gpus(const Plan& p) {
    return p.dp * p.tp * p.pp * p.cp;
}

const char* to_string(Schedule s) {
    switch (s) {
    case Schedule::one_f_one_b:
        return "1f1b";
    case Schedule::gpipe:
        return "gpipe";
    case Schedule::interleaved:
        return "interleaved";
    }
    return "?";
}

const char* to_string(Recompute r) {
    switch (r) {
    case Recompute::none:
        return "none";
    case Recompute::selective:
        return "selective";
    case Recompute::full:
        return "full";
    }
    return "?";
}

const char* to_string(Dtype d) {
    switch (d) {
    case Dtype::fp32:
        return "fp32";
    case Dtype::tf32:
        return "tf32";
    case Dtype::bf16:
        return "bf16";
    case Dtype::fp16:
        return "fp16";
    case Dtype::fp8:
        return "fp8";
    case Dtype::mxfp8:
        return "mxfp8";
    case Dtype::nvfp4:
        return "nvfp4";
    }
    return "?";
}

const char* to_string(Fp8Recipe r) {
    switch (r) {
    case Fp8Recipe::delayed:
        return "delayed";
    case Fp8Recipe::tensorwise:
        return "tensorwise";
    case Fp8Recipe::blockwise:
        return "blockwise";
    }
    return "?";
}

std::string to_string(const Plan& p) {
    return "dp" + std::to_string(p.dp) + " tp" + std::to_string(p.tp) + " pp" +
           std::to_string(p.pp) + " cp" + std::to_string(p.cp) + " ep" + std::to_string(p.ep) +
           " vpp" + std::to_string(p.vpp) + " mbs" + std::to_string(p.mbs) + " " +
           to_string(p.schedule) + " " + to_string(p.recompute) + " sp" + (p.sp ? "1" : "0") +
           " zero" + std::to_string(p.zero);
}

std::string to_flags(const Plan& p) {
    std::string s = "--dp " + std::to_string(p.dp) + " --tp " + std::to_string(p.tp) + " --pp " +
                    std::to_string(p.pp);
    if (p.cp > 1) {
        s += " --cp " + std::to_string(p.cp);
    }
    if (p.ep > 1) {
        s += " --ep " + std::to_string(p.ep);
    }
    s += " --mbs " + std::to_string(p.mbs);
    if (p.vpp > 1) {
        s += " --vpp " + std::to_string(p.vpp);
    }
    s += std::string(" --schedule ") + to_string(p.schedule) + " --recompute " +
         to_string(p.recompute);
    if (p.sp) {
        s += " --sp";
    }
    s += " --zero " + std::to_string(p.zero);
    return s;
}

namespace {

void need(std::vector<std::string>& out, bool ok, const std::string& what) {
    if (!ok) {
        out.push_back(what);
    }
}

std::string n(const char* name, int64_t v) {
    return std::string(name) + "=" + std::to_string(v);
}

bool divides(int64_t a, int64_t b) {
    return a > 0 && b % a == 0;
}

void check_sizes(const Plan& p, std::vector<std::string>& out) {
    need(out,
         p.dp >= 1 && p.tp >= 1 && p.pp >= 1 && p.cp >= 1 && p.ep >= 1 && p.vpp >= 1 && p.mbs >= 1,
         "every parallel size and the micro-batch size must be at least 1");
    need(out, p.zero >= 0 && p.zero <= 3, n("zero", p.zero) + " is not a ZeRO stage (0..3)");
}

void check_model_split(const ModelSpec& m, const Plan& p, std::vector<std::string>& out) {
    need(out, divides(p.tp, m.heads), n("tp", p.tp) + " does not divide " + n("heads", m.heads));
    need(out,
         divides(p.tp, m.kv_heads),
         n("tp", p.tp) + " does not divide " + n("kv_heads", m.kv_heads));
    need(out,
         divides(p.tp, m.ffn_hidden),
         n("tp", p.tp) + " does not divide " + n("ffn_hidden", m.ffn_hidden));
    need(out, p.pp <= m.layers, n("pp", p.pp) + " is more than " + n("layers", m.layers));
    need(out,
         divides(p.pp * p.vpp, m.layers),
         "pp*vpp=" + std::to_string(p.pp * p.vpp) + " does not divide " + n("layers", m.layers));
    if (p.ep > 1) {
        need(out, m.moe.enabled(), n("ep", p.ep) + " needs an MoE model (experts > 0)");
        need(out,
             !m.moe.enabled() || divides(p.ep, m.moe.experts),
             n("ep", p.ep) + " does not divide " + n("experts", m.moe.experts));
        need(out,
             divides(p.ep, p.dp * p.cp),
             n("ep", p.ep) + " does not divide dp*cp=" + std::to_string(p.dp * p.cp));
    }
}

void check_schedule(const JobSpec& job, const Plan& p, std::vector<std::string>& out) {
    const int64_t m = num_microbatches(p, job);
    if (p.schedule == Schedule::interleaved) {
        need(out, p.pp > 1, "the interleaved schedule needs pp > 1");
        need(out, p.vpp > 1, "the interleaved schedule needs vpp > 1");
        need(out,
             m <= 0 || divides(p.pp, m),
             "interleaved: pp=" + std::to_string(p.pp) + " does not divide the " +
                 std::to_string(m) + " micro-batches (Megatron requires it)");
    } else {
        need(out,
             p.vpp == 1,
             std::string("vpp > 1 needs --schedule interleaved, not ") + to_string(p.schedule));
    }
    if (p.zero >= 2) {
        need(out,
             p.pp == 1,
             n("zero", p.zero) + " cannot be combined with pipeline parallelism (pp > 1)");
    }
}

void check_batch(const JobSpec& job, const Plan& p, std::vector<std::string>& out) {
    need(out,
         plan_gpus(p) == job.gpus,
         "dp*tp*pp*cp=" + std::to_string(plan_gpus(p)) + " is not " + n("gpus", job.gpus));
    need(out,
         divides(p.mbs * p.dp, job.global_batch),
         "mbs*dp=" + std::to_string(p.mbs * p.dp) + " does not divide the global batch " +
             std::to_string(job.global_batch));
    if (p.sp) {
        need(out, p.tp > 1, "sequence parallelism needs tp > 1");
        need(out,
             divides(p.tp * p.cp, job.seq_len),
             "tp*cp=" + std::to_string(p.tp * p.cp) + " does not divide " + n("seq", job.seq_len));
    }
    if (p.cp > 1) {
        need(out,
             divides(2 * p.cp, job.seq_len),
             "2*cp=" + std::to_string(2 * p.cp) + " does not divide " + n("seq", job.seq_len) +
                 " (ring attention splits the sequence into 2*cp chunks)");
    }
}

}  // namespace

std::vector<std::string> check_plan(const ModelSpec& m, const JobSpec& job, const Plan& p) {
    std::vector<std::string> out;
    check_sizes(p, out);
    if (!out.empty()) {
        return out;
    }
    check_model_split(m, p, out);
    check_schedule(job, p, out);
    check_batch(job, p, out);
    return out;
}

}  // namespace cleave

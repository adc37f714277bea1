#include "executor/run.hpp"

#include "executor/collect.hpp"
#include "executor/dp_buckets.hpp"
#include "executor/init.hpp"
#include "executor/transformer.hpp"

#include <map>
#include <optional>
#include <string>

namespace cleave::executor {

namespace {

void need(std::vector<Diagnostic>& out, bool ok, const std::string& message) {
    if (!ok) {
        out.push_back({{}, "cleave run: " + message});
    }
}

constexpr float adam_beta1 = 0.9f;
constexpr float adam_beta2 = 0.95f;
constexpr float adam_eps = 1e-8f;
constexpr int tag_limit = 32768;

// Everything one rank needs for its iterations.
struct RankState {
    Backend& be;
    const Plan& plan;
    const JobSpec& job;
    const RunOptions& opt;
    RankCoords at;
    Dims d;
    Groups groups;
    Params params;
    std::vector<ChunkHandles> chunks;
    int64_t microbatches = 0;
    bool tied_copy = false;  // holds a tied embedding that must be synced across PP
    int64_t tied_handle = -1;
    Buffer flush_cell;  // one float: the first and last stage meet on it (tied_copy only)
    Buffer dp_cell;     // one float: the DP ranks meet on it before the reduction (dp > 1)
};

MicroBatch make_microbatch(const RankState& s, int64_t iteration, int64_t mb) {
    const Dims& d = s.d;
    MicroBatch out;
    out.ids.resize(static_cast<size_t>(d.tokens()));
    out.targets.resize(out.ids.size());
    for (int64_t b = 0; b < d.batch; ++b) {
        const int64_t sequence = (s.at.dp_rank * s.microbatches + mb) * d.batch + b;
        for (int64_t p = 0; p < d.seq; ++p) {
            const auto row = static_cast<size_t>(p * d.batch + b);
            out.ids[row] = token_at(s.opt.seed, iteration, sequence, p, d.vocab);
            out.targets[row] = token_at(s.opt.seed, iteration, sequence, p + 1, d.vocab);
        }
    }
    for (int64_t r = 0; r < d.local_tokens(); ++r) {
        out.positions.push_back(static_cast<int32_t>((d.local_row_begin() + r) / d.batch));
    }
    return out;
}

Groups make_groups(Backend& be, const Plan& plan, const RankCoords& at, const MoeDims& m) {
    const int world = be.world_rank();
    const auto i = [](int64_t v) { return static_cast<int>(v); };
    Groups g;
    g.tp = be.create_group(i(at.pp_rank * plan.dp + at.dp_rank), i(at.tp_rank), "tp");
    g.dp = be.create_group(i(at.pp_rank * plan.tp + at.tp_rank), i(at.dp_rank), "dp");
    g.pp = be.create_group(i(at.dp_rank * plan.tp + at.tp_rank), i(at.pp_rank), "pp");
    const bool ends = at.pp_rank == 0 || at.pp_rank == plan.pp - 1;
    // Ranks outside the first and last stage get a group of their own (never used).
    g.embedding =
        be.create_group(ends ? i(at.dp_rank * plan.tp + at.tp_rank) : i(plan.dp * plan.tp) + world,
                        i(at.pp_rank),
                        "embedding");
    if (m.enabled()) {
        // Issue 16: the expert grid of this stage (executor/moe.hpp).
        const int64_t expert_model = m.ep_rank * m.etp + m.etp_rank;
        g.ep = be.create_group(i(at.pp_rank * m.edp + m.edp_rank), i(expert_model), "ep");
        g.edp =
            be.create_group(i(at.pp_rank * m.group_size() + expert_model), i(m.edp_rank), "edp");
    }
    return g;
}

int p2p_tag(const RankState& s, int64_t mb, int64_t receiver_stage, int direction) {
    const int64_t tag = (mb * s.plan.pp * s.plan.vpp + receiver_stage) * 2 + direction;
    CLEAVE_ASSERT(tag < tag_limit, "p2p tag out of range (checked by check_executable)");
    return static_cast<int>(tag);
}

// A pipeline receive posted before the step that uses it (issue 17).
struct PostedRecv {
    size_t step = 0;
    Buffer buffer;
    PendingRecv handle;
};

// Posts the receive of steps[i] (when it needs one) into `slot`.
void post_recv(RankState& s,
               Recorder& rec,
               const std::vector<Step>& steps,
               size_t i,
               std::optional<PostedRecv>& slot) {
    const StepRecv r = step_recv(steps[i], s.plan.pp, s.plan.vpp, s.at.pp_rank);
    if (!r.needed) {
        return;
    }
    PostedRecv p;
    p.step = i;
    p.buffer = Buffer(s.be, s.d.local_tokens() * s.d.hidden, uninitialized);
    const int tag = p2p_tag(s, steps[i].microbatch, r.stage, r.gradient ? 1 : 0);
    rec.timed(Phase::pp_wait, r.gradient ? Stream::pp_bwd : Stream::pp_fwd, "post recv", [&] {
        p.handle = s.be.recv_start(s.groups.pp, p.buffer, static_cast<int>(r.peer), tag);
    });
    slot = std::move(p);
}

// The pipeline input of steps[i]: its receive (posted one step early, or now) completed, then
// the next step's receive posted, so that transfer overlaps this step's compute. A GPU backend
// waits on the device only; the order of receives, sends and steps is the schedule's.
Buffer take_input(RankState& s,
                  Recorder& rec,
                  const std::vector<Step>& steps,
                  size_t i,
                  std::optional<PostedRecv>& posted) {
    if (!posted || posted->step != i) {
        CLEAVE_ASSERT(!posted, "a posted pipeline receive was skipped");
        post_recv(s, rec, steps, i, posted);
    }
    Buffer in;
    if (posted) {
        const bool gradient = !steps[i].forward;
        rec.timed(Phase::pp_wait,
                  gradient ? Stream::pp_bwd : Stream::pp_fwd,
                  gradient ? "recv gradient" : "recv activation",
                  [&] { s.be.recv_wait(posted->handle); });
        in = std::move(posted->buffer);
        posted.reset();
    }
    if (i + 1 < steps.size()) {
        post_recv(s, rec, steps, i + 1, posted);
    }
    return in;
}

// One pipeline step: receive, compute, send.
void run_step_impl(RankState& s,
                   Transformer& tf,
                   Recorder& rec,
                   std::map<std::pair<int64_t, int64_t>, ChunkCache>& caches,
                   const std::vector<Step>& steps,
                   size_t i,
                   int64_t iteration,
                   double& loss_sum,
                   std::optional<PostedRecv>& posted) {
    const Step& step = steps[i];
    const ChunkHandles& c = s.chunks[static_cast<size_t>(step.chunk)];
    const int64_t vs = c.virtual_stage;
    const int64_t stages = s.plan.pp * s.plan.vpp;
    const int prev = static_cast<int>((vs + stages - 1) % s.plan.pp);
    const int next = static_cast<int>((vs + 1) % s.plan.pp);
    const MicroBatch mb = make_microbatch(s, iteration, step.microbatch);
    ChunkCache& cache = caches[{step.microbatch, step.chunk}];
    const std::string label =
        " mb" + std::to_string(step.microbatch) + " c" + std::to_string(step.chunk);
    Buffer in = take_input(s, rec, steps, i, posted);
    if (step.forward) {
        const double t0 = rec.now_s();
        Buffer out = tf.forward(c, std::move(in), mb, cache, loss_sum);
        rec.event("F" + label, Stream::compute, t0, rec.now_s());
        if (!c.last) {
            rec.timed(Phase::pp_wait, Stream::pp_fwd, "send activation", [&] {
                s.be.send(s.groups.pp, out, next, p2p_tag(s, step.microbatch, vs + 1, 0));
            });
        }
        return;
    }
    const double t0 = rec.now_s();
    Buffer dx = tf.backward(c, std::move(in), mb, cache);
    rec.event("B" + label, Stream::compute, t0, rec.now_s());
    caches.erase({step.microbatch, step.chunk});
    if (!c.first) {
        rec.timed(Phase::pp_wait, Stream::pp_bwd, "send gradient", [&] {
            s.be.send(s.groups.pp, dx, prev, p2p_tag(s, step.microbatch, vs - 1, 1));
        });
    }
}

void run_step(RankState& s,
              Transformer& tf,
              Recorder& rec,
              std::map<std::pair<int64_t, int64_t>, ChunkCache>& caches,
              const std::vector<Step>& steps,
              size_t i,
              int64_t iteration,
              double& loss_sum,
              std::optional<PostedRecv>& posted) {
    const Step& step = steps[i];
    try {
        run_step_impl(s, tf, rec, caches, steps, i, iteration, loss_sum, posted);
    } catch (const CommTimeout& e) {
        throw CommTimeout(
            std::string(e.what()) + " (during the " + (step.forward ? "forward" : "backward") +
            " of micro-batch " + std::to_string(step.microbatch) + ", chunk " +
            std::to_string(step.chunk) + ", iteration " + std::to_string(iteration) + "; stage " +
            std::to_string(s.at.pp_rank) + ", dp rank " + std::to_string(s.at.dp_rank) +
            ", tp rank " + std::to_string(s.at.tp_rank) + ")");
    }
}

// Index of each chunk's last backward step: the chunk's gradients are final after it.
std::vector<size_t> last_backward(const std::vector<Step>& steps, size_t chunks) {
    std::vector<size_t> last(chunks, steps.size());
    for (size_t i = 0; i < steps.size(); ++i) {
        if (!steps[i].forward) {
            last[static_cast<size_t>(steps[i].chunk)] = i;
        }
    }
    return last;
}

// Issue 17: starts the DP all-reduce of a layer's gradients (the parts not started yet) while
// the backward goes on; a GPU backend overlaps it, the CPU backend runs it at once.
void start_layer_bucket(RankState& s, Recorder& rec, DpBuckets& b, const LayerHandles& l) {
    for (const GradRange& r : layer_grad_ranges(s.params, l)) {
        for (const GradRange& part : b.take(r)) {
            rec.timed(Phase::dp_comm, Stream::dp, "dp all_reduce bucket", [&] {
                s.be.all_reduce_start(s.groups.dp,
                                      s.params.grads().slice(part.begin, part.end - part.begin));
            });
        }
    }
}

// The DP all-reduce of the gradients: whole, or (buckets) the rest of the buffer after the
// buckets started during the backward, then the wait for all of them.
void reduce_dp(RankState& s, Recorder& rec, DpBuckets* buckets) {
    View g = s.params.grads();
    if (s.d.moe.enabled()) {
        // Issue 16: dense gradients over DP, expert gradients over expert-DP (the ranks that
        // hold the same expert shards).
        const int64_t e0 = s.params.expert_begin();
        rec.timed(Phase::dp_comm, Stream::dp, "dp all_reduce", [&] {
            if (s.plan.dp > 1) {
                s.be.all_reduce(s.groups.dp, g.slice(0, e0), ReduceOp::sum);
            }
            if (s.d.moe.edp > 1) {
                s.be.all_reduce(s.groups.edp, g.slice(e0, g.size - e0), ReduceOp::sum);
            }
        });
        return;
    }
    if (buckets == nullptr) {
        rec.timed(Phase::dp_comm, Stream::dp, "dp all_reduce", [&] {
            s.be.all_reduce(s.groups.dp, g, ReduceOp::sum);
        });
        return;
    }
    rec.timed(Phase::dp_comm, Stream::dp, "dp all_reduce rest, wait for the buckets", [&] {
        for (const GradRange& r : buckets->rest()) {
            s.be.all_reduce_start(s.groups.dp, g.slice(r.begin, r.end - r.begin));
        }
        rec.add_hidden_dp(s.be.all_reduce_wait());
    });
    buckets->reset();
}

// Issue 18: the DP ranks meet (a one-element all-reduce) before the gradient reduction, timed
// as dp_wait, so that the reduction after it times the transfer alone: a rank that finished
// its backward first waited for the other inside the all-reduce, and that skew was read as
// communication.
void meet_dp(RankState& s, Recorder& rec) {
    rec.timed(Phase::dp_wait, Stream::dp, "dp wait: ranks meet", [&] {
        s.be.all_reduce(s.groups.dp, s.dp_cell, ReduceOp::sum);
    });
}

// Gradient synchronisation and the Adam step. `buckets`: the DP buckets started during the
// backward (null: the gradients are reduced here, whole).
void update(RankState& s, Recorder& rec, int64_t step, DpBuckets* buckets) {
    Backend& be = s.be;
    Params& p = s.params;
    if (s.d.sp && p.replicated_size() > 0) {
        // With SP every TP rank saw only its sequence shard: the replicated weights' gradients
        // are partial sums (Megatron all-reduces layernorm grads across TP for SP).
        rec.timed(Phase::tp_comm, Stream::tp, "tp all_reduce replicated grads", [&] {
            be.all_reduce(s.groups.tp, p.grads().slice(0, p.replicated_size()), ReduceOp::sum);
        });
    }
    if (s.tied_copy) {
        // The first and the last stage meet here, and the one that finished its backwards first
        // waits for the other: the pipeline's cool-down, which the cost model prices as bubble.
        // A one-element all-reduce takes that wait, so that the embedding all-reduce after it
        // times the transfer alone (charged whole to DP, GPipe pp2 waited 143-172 ms "in DP").
        rec.timed(Phase::pp_wait, Stream::pp_bwd, "pp flush: first and last stage meet", [&] {
            be.all_reduce(s.groups.embedding, s.flush_cell, ReduceOp::sum);
        });
        rec.timed(Phase::dp_comm, Stream::dp, "embedding all_reduce", [&] {
            be.all_reduce(s.groups.embedding, p.ref(s.tied_handle).g, ReduceOp::sum);
        });
    }
    const auto lr = s.opt.lr;
    if (s.plan.zero == 0 || s.plan.dp == 1) {
        if (s.plan.dp > 1 || s.d.moe.edp > 1) {
            if (buckets == nullptr && s.plan.dp > 1) {
                meet_dp(s, rec);  // with buckets, most of the reduction already ran
            }
            reduce_dp(s, rec, buckets);
        }
        rec.timed(Phase::optimizer, Stream::optimizer, "adam", [&] {
            be.adam(p.weights(),
                    p.grads(),
                    p.adam_m(),
                    p.adam_v(),
                    lr,
                    adam_beta1,
                    adam_beta2,
                    adam_eps,
                    0.0f,
                    step);
        });
        return;
    }
    // ZeRO-1 (Rajbhandari et al. 2020, Sec. 5.1): reduce-scatter the gradients, update this
    // rank's shard, all-gather the updated weights.
    const int64_t shard = p.padded_size() / s.plan.dp;
    const int64_t begin = s.at.dp_rank * shard;
    Buffer g_shard(be, shard);
    meet_dp(s, rec);
    rec.timed(Phase::dp_comm, Stream::dp, "dp reduce_scatter", [&] {
        be.reduce_scatter(s.groups.dp, p.grads(), g_shard);
    });
    Buffer w_shard(be, shard);
    be.copy(w_shard, p.weights().slice(begin, shard));
    rec.timed(Phase::optimizer, Stream::optimizer, "adam", [&] {
        be.adam(w_shard,
                g_shard,
                p.adam_m(),
                p.adam_v(),
                lr,
                adam_beta1,
                adam_beta2,
                adam_eps,
                0.0f,
                step);
    });
    rec.timed(Phase::dp_comm, Stream::dp, "dp all_gather", [&] {
        be.all_gather(s.groups.dp, w_shard, p.weights());
    });
}

// Issue 16: what the executor's MoE layer runs (executor/moe.cpp).
// What the cost model prices but the workload (executor/transformer.hpp) does not compute: a
// model with any of these would run as a different model, so it is refused by name.
void check_features(std::vector<Diagnostic>& out, const ModelSpec& model, const JobSpec& job) {
    const auto priced_only = [&](bool has, const std::string& what) {
        need(out, !has, what + " is priced, not executed");
    };
    priced_only(model.mla.enabled(), "multi-head latent attention ([model.mla], DeepSeek)");
    priced_only(model.qk_norm, "qk_norm (Qwen3's q / k RMSNorm)");
    priced_only(model.sandwich_norms, "sandwich_norms (Gemma's norms after each block)");
    priced_only(model.attention_sinks, "attention_sinks (GPT-OSS)");
    priced_only(model.attn_output_gate, "gated attention (attn_output_gate, Qwen3-Next)");
    priced_only(kind_count(model, LayerKind::gdn, 0, model.layers) > 0,
                "gated DeltaNet layers (G, Qwen3-Next's linear attention)");
    priced_only(model.clamped_glu, "clamped_glu (GPT-OSS's clamped GLU)");
    priced_only(model.sliding_window > 0, "sliding-window attention (sliding_window)");
    priced_only(model.head_size > 0 && model.heads > 0 &&
                    model.head_size * model.heads != model.hidden,
                "head_dim other than hidden / heads");
    priced_only(model.squared_relu && model.mlp == MlpKind::swiglu, "a gated squared-ReLU MLP");
    priced_only(job.mtp && model.mtp_layers > 0, "multi-token prediction (--mtp)");
    if (model.moe.enabled()) {
        priced_only(model.moe.shared_ffn_hidden > 0, "a shared expert (shared_ffn_hidden)");
        priced_only(model.moe.router_bias, "the router's expert bias (router_bias)");
        priced_only(model.moe.latent > 0, "LatentMoE (moe_latent_size, Nemotron 3 Super)");
        priced_only(model.moe.router_groups > 0,
                    "group-limited routing (router_groups / router_group_topk)");
    }
}

void check_moe(std::vector<Diagnostic>& out, const ModelSpec& model, const Plan& plan) {
    const int64_t etp = expert_tp(plan);
    need(out,
         plan.tp == 1 || plan.sp,
         "MoE with tp > 1 runs with sequence parallelism (--sp), as Megatron-Core requires");
    need(out,
         plan.ep > 0 && etp > 0 && (plan.tp * plan.dp) % (plan.ep * etp) == 0,
         "ep*etp=" + std::to_string(plan.ep * etp) +
             " must divide tp*dp=" + std::to_string(plan.tp * plan.dp));
    need(out,
         plan.ep > 0 && model.moe.experts % plan.ep == 0,
         "ep=" + std::to_string(plan.ep) +
             " must divide experts=" + std::to_string(model.moe.experts));
    need(out,
         etp > 0 && model.moe.expert_ffn_hidden % etp == 0,
         "etp=" + std::to_string(etp) +
             " must divide expert_ffn_hidden=" + std::to_string(model.moe.expert_ffn_hidden));
    need(out, !model.linear_bias, "MoE experts with biases (linear_bias) are not executed");
    need(out,
         plan.zero == 0 || plan.ep * etp == plan.tp,
         "ZeRO with MoE is executed only when expert-DP equals DP (ep*etp == tp)");
}

}  // namespace

void check_executable(const ModelSpec& model,
                      const JobSpec& job,
                      const Plan& plan,
                      int64_t world_size) {
    std::vector<Diagnostic> out;
    const int64_t ranks = plan.dp * plan.tp * plan.pp;
    need(out,
         ranks == world_size,
         "dp*tp*pp=" + std::to_string(ranks) + " but " + std::to_string(world_size) +
             " ranks were launched (mpirun -np N)");
    need(out, plan.cp == 1, "context parallelism (--cp) is not executed");
    need(out,
         !bidirectional(plan.schedule),
         "--schedule dualpipe is priced, not executed: the executor runs 1F1B, GPipe and the "
         "interleaved schedule");
    if (model.mamba.enabled()) {
        // The planner's rule (core/plan_rules.cpp tp_mamba): TP splits heads and B/C groups.
        for (const Violation& v : plan_violations(model, job, plan)) {
            if (v.rule == Rule::tp_mamba) {
                need(out, false, v.message + " (Megatron-Core splits the Mamba-2 heads and groups over TP)");
            }
        }
        const MambaSpec& mb = model.mamba;
        need(out, mb.groups > 0 && mb.heads % mb.groups == 0, "Mamba-2 groups must divide heads");
    }
    check_features(out, model, job);
    if (model.moe.enabled()) {
        check_moe(out, model, plan);
    }
    need(out, plan.zero <= 2, "ZeRO-3 is not executed (use --zero 0, 1 or 2)");
    need(out,
         plan.recompute_layers <= 1 && plan.recompute_method == RecomputeMethod::uniform,
         "--recompute-num-layers above 1 and --recompute-method block are priced, not executed");
    need(out,
         model.heads > 0 && model.hidden % model.heads == 0,
         model.heads == 0 ? std::string("the executor sizes attention by heads, which this model "
                                        "states none of (a Mamba-2 config.json): give --heads")
                          : std::string("heads must divide hidden"));
    const int64_t kv = model.kv_heads > 0 ? model.kv_heads : model.heads;
    need(out,
         kv % plan.tp == 0,
         "tp=" + std::to_string(plan.tp) + " must divide kv_heads=" + std::to_string(kv));
    need(out,
         model.vocab % plan.tp == 0,
         "tp=" + std::to_string(plan.tp) + " must divide vocab=" + std::to_string(model.vocab) +
             " (vocab-parallel embedding)");
    need(out,
         model.positions != PositionKind::rope || (model.hidden / model.heads) % 2 == 0,
         "RoPE needs an even head dimension");
    const int64_t m = plan.mbs * plan.dp > 0 ? job.global_batch / (plan.mbs * plan.dp) : 0;
    need(out, m * plan.pp * plan.vpp * 2 < tag_limit, "too many micro-batches per pipeline");
    if (!out.empty()) {
        throw ConfigError(std::move(out));
    }
}

Measurement run_training(Backend& be,
                         const ModelSpec& model,
                         const JobSpec& job,
                         const Plan& plan,
                         const RunOptions& opt) {
    check_executable(model, job, plan, be.world_size());
    const RankCoords at = rank_coords(plan, be.world_rank());
    RankState s{be,
                plan,
                job,
                opt,
                at,
                make_dims(model, job.seq_len, plan.mbs, plan, at.tp_rank),
                {},
                {},
                {},
                num_microbatches(plan, job),
                false,
                -1,
                {},
                {}};
    s.d.moe = make_moe_dims(model, plan, at, opt.moe_aux_loss_coeff, job.global_batch);
    s.groups = make_groups(be, plan, at, s.d.moe);
    const Group world = be.create_group(0, be.world_rank(), "world");
    s.chunks = build_chunks(s.params, model, s.d, plan, at);
    s.params.allocate(be, plan.zero > 0 ? plan.dp : 1, opt.seed);
    for (const auto& c : s.chunks) {
        if (model.tied_embeddings && plan.pp > 1 && (c.first || c.last)) {
            s.tied_copy = true;
            s.tied_handle = c.first ? c.embedding : c.output;
        }
    }
    if (s.tied_copy) {
        s.flush_cell = Buffer(be, 1);
    }
    if (plan.dp > 1) {
        s.dp_cell = Buffer(be, 1);
    }
    Recorder rec(be, opt.trace, be.world_rank());
    const float loss_scale = 1.0f / static_cast<float>(job.global_batch * job.seq_len);
    Transformer tf(be, rec, s.d, s.groups, s.params, plan.recompute, loss_scale);
    const auto steps = pipeline_steps(plan.schedule, plan.pp, plan.vpp, at.pp_rank, s.microbatches);
    const bool counts_loss = s.chunks.back().last && at.tp_rank == 0;
    // Issue 17: DP gradient buckets during the backward (whole-buffer all-reduce, no ZeRO).
    // MoE: dense and expert gradients go to different groups; reduced whole (reduce_dp).
    const bool buckets_on = opt.overlap_dp && plan.zero == 0 && plan.dp > 1 && !model.moe.enabled();
    DpBuckets buckets(s.params.padded_size());
    const std::vector<size_t> last_bwd = last_backward(steps, s.chunks.size());

    Collector col(be, world, opt.iters + opt.warmup);
    col.barrier();
    rec.set_origin(rec.now_s());
    // One iteration: its wall time on this rank.
    const auto iteration = [&](int64_t it, bool measured) {
        col.barrier();
        be.reset_peak();
        rec.start_iteration();
        be.fill(s.params.grads(), 0.0f);
        double loss_sum = 0.0;
        std::map<std::pair<int64_t, int64_t>, ChunkCache> caches;
        std::optional<PostedRecv> posted;
        for (size_t i = 0; i < steps.size(); ++i) {
            if (opt.on_step) {
                opt.on_step(it, static_cast<int64_t>(i));
            }
            if (buckets_on && !steps[i].forward &&
                i == last_bwd[static_cast<size_t>(steps[i].chunk)]) {
                tf.after_layer_backward = [&](const LayerHandles& l) {
                    start_layer_bucket(s, rec, buckets, l);
                };
            }
            run_step(s, tf, rec, caches, steps, i, it, loss_sum, posted);
            tf.after_layer_backward = nullptr;
        }
        rec.timed(Phase::pp_wait, Stream::pp_fwd, "pp flush", [&] { be.synchronize(); });
        update(s, rec, it + 1, buckets_on ? &buckets : nullptr);
        be.synchronize();
        const double time_s = rec.now_s() - rec.iteration_start_s();
        // MoE load-balancing terms: each TP group's rank 0 adds its micro-batches' and layers'.
        const double aux = tf.take_aux_loss() * s.d.moe.microbatch_weight;
        col.record(it,
                   measured,
                   time_s,
                   rec,
                   (counts_loss ? loss_sum * static_cast<double>(loss_scale) : 0.0) +
                       (at.tp_rank == 0 ? aux : 0.0),
                   be.peak_bytes());
        return time_s;
    };
    // Warm-up: `warmup` iterations, then on until stable (every rank decides alike: the
    // slowest rank's times), at most warmup_max.
    const bool until_stable = opt.warmup_max > opt.warmup;
    const int64_t warmup_cap = until_stable ? opt.warmup_max : opt.warmup;
    std::vector<double> warm_s;
    int64_t it = 0;
    while (it < warmup_cap) {
        const double t = iteration(it++, false);
        if (until_stable) {
            warm_s.push_back(col.max(t));
        }
        if (it >= opt.warmup && (!until_stable || warmed_up(warm_s, opt.stable_tolerance))) {
            break;
        }
    }
    const int64_t warmup_run = it;
    for (int64_t k = 0; k < opt.iters; ++k) {
        (void)iteration(it++, true);
    }
    Measurement m = col.finish(s.params.checksum(be), s.params.probes(be), at, rec);
    m.warmup_iterations = warmup_run;
    m.trace_origin_s = rec.origin_s();
    return m;
}

}  // namespace cleave::executor

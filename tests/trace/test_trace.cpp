// cleave trace: the Kineto reader, the kernel class table and the summary, against a synthetic
// trace whose every figure is worked by hand below, DeepSeek-V3's published H800 trace, bad input
// and 300 mutated traces.
#include "api/trace.hpp"
#include "core/errors.hpp"
#include "tests/cli_run.hpp"
#include "trace/analyze.hpp"
#include "trace/classes.hpp"
#include "trace/kineto.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>
#include <zlib.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace {

using namespace cleave;
using trace::Class;

const std::string kSynthetic = std::string(CLEAVE_TEST_DATA_DIR) + "/tests/data/trace/synthetic.json";
const std::string kDeepSeek =
    std::string(CLEAVE_TEST_DATA_DIR) + "/../shared/traces/deepseek-v3-train-h800.json";

std::string slurp(const std::string& p) {
    std::ifstream f(p, std::ios::binary);
    std::ostringstream s;
    s << f.rdbuf();
    return s.str();
}

std::string gzip(const std::string& text) {
    z_stream zs{};
    REQUIRE(deflateInit2(&zs, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) == Z_OK);
    std::string out(deflateBound(&zs, static_cast<uLong>(text.size())) + 64, '\0');
    zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(text.data()));
    zs.avail_in = static_cast<uInt>(text.size());
    zs.next_out = reinterpret_cast<Bytef*>(out.data());
    zs.avail_out = static_cast<uInt>(out.size());
    REQUIRE(deflate(&zs, Z_FINISH) == Z_STREAM_END);
    out.resize(zs.total_out);
    deflateEnd(&zs);
    return out;
}

std::string temp_file(const std::string& name, const std::string& bytes) {
    const auto p = std::filesystem::temp_directory_path() / ("cleave_test_trace_" + name);
    std::ofstream(p, std::ios::binary) << bytes;
    return p.string();
}

double cls(const trace::TraceSummary& s, Class c) { return s.by_class_ms[static_cast<size_t>(c)]; }

std::string error_of(const std::string& text, const std::string& name = "t.json") {
    try {
        (void)trace::read_kineto_text(text, name);
    } catch (const ConfigError& e) {
        return render(e.diagnostics().front());
    }
    return "";
}

}  // namespace

TEST_CASE("kernel class table: the shipped rules classify each library's kernels") {
    const trace::ClassTable t = trace::load_class_table();
    const auto c = [&](const char* n) { return trace::classify(t, n); };
    CHECK(c("void cutlass::device_kernel<flash::FlashAttnBwd<...>>(...)").cls == Class::attention);
    CHECK(c("void cutlass::device_kernel<dpsk::grouped_gemm::cuda::fp8_ptp128c::GemmKernel>(x)").cls ==
          Class::gemm);
    CHECK(c("void cutlass::device_kernel<dpsk::grouped_gemm::cuda::fp8_ptp128c::GemmKernel>(x)").dtype ==
          "fp8");
    CHECK(c("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64").dtype == "bf16");
    CHECK(c("Cijk_Ailk_Bljk_HHS_BH_MT128x128x32").cls == Class::gemm);
    CHECK(c("Cijk_Ailk_Bljk_HHS_BH_MT128x128x32").dtype == "fp16");
    CHECK(c("nvjet_tst_192x192_64x4_2x1_v_bz_coopA_NTN").cls == Class::gemm);
    CHECK(c("triton_tem_fused_mm_0").cls == Class::gemm);
    CHECK(c("triton_poi_fused_add_mul_0").cls == Class::elementwise);
    CHECK(c("triton_red_fused__to_copy_add_mean_mul_pow_rsqrt_0").cls == Class::norm);
    CHECK(c("triton_poi_fused_mul_silu_1").cls == Class::activation);
    CHECK(c("cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_3").cls ==
          Class::attention);
    CHECK(c("ck_tile::FmhaFwdKernel<...>").cls == Class::attention);
    CHECK(c("void cuda::swiglu_forward_with_weight_and_per_token_cast_to_fp8_with_channels_impl<b>()")
              .cls == Class::activation);
    CHECK(c("void cuda::per_token_cast_to_fp8_with_channels<b>()").cls == Class::quantize);
    CHECK(c("void transformer_engine::cast_transpose_kernel<8>()").cls == Class::quantize);
    CHECK(c("ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL(x)").op == "reduce_scatter");
    CHECK(c("void dpsk::ep::internode::combine<false>()").op == "all_to_all");
    CHECK(c("void at::native::elementwise_kernel<128, 4, gpu_kernel_impl<[&]() lambda>>()").cls ==
          Class::elementwise);  // "lambda" is not LAMB
    CHECK(c("sm80_xmma_fprop_implicit_gemm_bf16bf16_bf16f32_f32_nhwckrsc_nhwc").cls ==
          Class::convolution);
    CHECK_FALSE(c("my_custom_kernel_xyz").matched);
}

TEST_CASE("kernel class table: a user table is tried first, a bad one names file, line, key") {
    const std::string user = temp_file("user_classes.toml",
                                       "[[rule]]\nclass = \"norm\"\nlibrary = \"mine\"\n"
                                       "contains = [\"my_custom_kernel\"]\n");
    const trace::ClassTable t = trace::load_class_table(user);
    CHECK(trace::classify(t, "my_custom_kernel_xyz").cls == Class::norm);
    CHECK(trace::classify(t, "my_custom_kernel_xyz").library == "mine");
    CHECK(t.files.size() == 2);
    try {
        (void)trace::parse_class_table("[[rule]]\nclass = \"gemmm\"\nlibrary = \"x\"\ncontains = [\"a\"]\n",
                                       "bad.toml");
        FAIL("no error");
    } catch (const ConfigError& e) {
        const std::string m = render(e.diagnostics().front());
        CHECK(m.find("bad.toml:2") != std::string::npos);
        CHECK(m.find("class") != std::string::npos);
    }
    CHECK_THROWS_AS((void)trace::parse_class_table("[[rule]]\nclass = \"gemm\"\nlibrary = \"x\"\n", "b.toml"),
                    ConfigError);  // no contains
    CHECK_THROWS_AS((void)trace::parse_class_table(
                        "[[rule]]\nclass = \"gemm\"\nlibrary = \"x\"\ncontains = [\"a\"]\ncolour = 1\n", "b.toml"),
                    ConfigError);  // unknown key
}

// tests/data/trace/synthetic.json, by hand (us): stream 7 runs K1 gemm 1000+100, K2 attention
// 1105+50, K3 quantize 1160+10, K4 norm 1172+8, K5 activation 1180+6, K6 elementwise 1186+4, K7
// moe_permute 1190+5, K8 convolution 1195+5, K9 embedding 1300+20, K10 optimizer 1320+30, K11
// loss 1350+10, K12 unclassified 1360+10, K13 gemm (hipBLASLt) 1370+30, a memcpy 1400+10; stream
// 20 an all-reduce 1050+100 and an all-gather 1210+50.
//   span 1000..1410 = 0.410 ms; compute kernels 288 us, no two overlap: union 288 us;
//   communication 150 us, of it under no compute kernel 1100..1105 (5) and 1210..1260 (50): 55;
//   GPU busy 288 + 55 + 10 = 353 us; launch gaps on stream 7 (<= 10 us): 5, 5, 2 = 12 us in 3,
//   one wait 1200..1300 = 100 us; compute kernels under 10 us: 8, 6, 4, 5, 5 = 28 us in 5.
//   Launches sit 50 us before their kernels: "forward" (930..1130) holds K1..K5 (950..1130) and the
//   all-reduce (1000, on a thread without ranges); "optimizer_step" (1240..1440) K9..K13.
//   aten::mm 1024 x 2048 @ 2048 x 4096 in 100 us: 2 x 1024 x 4096 x 2048 / 1e-4 = 171.80 TFLOP/s.
TEST_CASE("trace summary of the synthetic trace: every figure as worked by hand") {
    for (const bool gz : {false, true}) {
        CAPTURE(gz);
        const std::string file = gz ? temp_file("synthetic.json.gz", gzip(slurp(kSynthetic))) : kSynthetic;
        const trace::TraceSummary s = api::read_trace(file);
        CHECK(s.gpu == "NVIDIA H100 80GB HBM3");
        CHECK(s.sms == 132);
        CHECK(s.rank == 3);
        CHECK(s.world_size == 8);
        CHECK(s.kernels == 15);
        CHECK(s.copies == 1);
        CHECK(s.span_ms == doctest::Approx(0.410));
        CHECK(cls(s, Class::gemm) == doctest::Approx(0.130));
        CHECK(cls(s, Class::attention) == doctest::Approx(0.050));
        CHECK(cls(s, Class::quantize) == doctest::Approx(0.010));
        CHECK(cls(s, Class::norm) == doctest::Approx(0.008));
        CHECK(cls(s, Class::activation) == doctest::Approx(0.006));
        CHECK(cls(s, Class::elementwise) == doctest::Approx(0.004));
        CHECK(cls(s, Class::moe_permute) == doctest::Approx(0.005));
        CHECK(cls(s, Class::convolution) == doctest::Approx(0.005));
        CHECK(cls(s, Class::embedding) == doctest::Approx(0.020));
        CHECK(cls(s, Class::optimizer) == doctest::Approx(0.030));
        CHECK(cls(s, Class::loss) == doctest::Approx(0.010));
        CHECK(cls(s, Class::communication) == doctest::Approx(0.150));
        CHECK(cls(s, Class::memcpy) == doctest::Approx(0.010));
        CHECK(cls(s, Class::other) == doctest::Approx(0.010));
        CHECK(s.unclassified_ms == doctest::Approx(0.010));
        REQUIRE(s.unclassified.size() == 1);
        CHECK(s.unclassified[0].name == "my_custom_kernel_xyz");
        CHECK(s.compute_kernel_ms == doctest::Approx(0.288));
        CHECK(s.compute_busy_ms == doctest::Approx(0.288));
        CHECK(s.communication_busy_ms == doctest::Approx(0.150));
        CHECK(s.exposed_communication_ms == doctest::Approx(0.055));
        CHECK(s.hidden_communication_ms == doctest::Approx(0.095));
        CHECK(s.gpu_busy_ms == doctest::Approx(0.353));
        CHECK(s.launch_gaps == 3);
        CHECK(s.launch_gaps_ms == doctest::Approx(0.012));
        CHECK(s.waits_ms == doctest::Approx(0.100));
        CHECK(s.small_kernels == 5);
        CHECK(s.small_kernel_ms == doctest::Approx(0.028));
        CHECK(s.gemm_by_dtype_ms.at("bf16") == doctest::Approx(0.130));
        CHECK(s.communication_by_op_ms.at("all_reduce") == doctest::Approx(0.100));
        CHECK(s.communication_by_op_ms.at("all_gather") == doctest::Approx(0.050));
        REQUIRE(s.streams.size() == 2);
        CHECK(s.streams[0].id == 7);
        CHECK(s.streams[0].compute);
        CHECK(s.streams[0].kernels == 13);
        CHECK(s.streams[1].id == 20);
        CHECK_FALSE(s.streams[1].compute);
        CHECK(s.streams[1].busy_ms == doctest::Approx(0.150));
        REQUIRE(s.steps.size() == 1);
        CHECK(s.steps[0].name == "ProfilerStep#0");
        CHECK(s.steps[0].kernels == 15);
        CHECK(s.steps[0].span_ms == doctest::Approx(0.400));
        REQUIRE(s.phases.size() == 2);
        CHECK(s.phases[0].name == "forward");
        CHECK(s.phases[0].kernels == 6);
        CHECK(s.phases[0].kernel_ms == doctest::Approx(0.100 + 0.050 + 0.010 + 0.008 + 0.006 + 0.100));
        CHECK(s.phases[1].name == "optimizer_step");
        CHECK(s.phases[1].kernels == 5);
        // The host: 15 of the 16 activities have a launch record (the memcpy none), from
        // threads 1 and 2. Stream 7's gaps 1100->1105, 1155->1160 and 1170->1172 had their
        // kernel queued already (launches returned at 1059, 1114, 1126); of 1200->1300, 54 us
        // waited on the host (the launch returned at 1250 + 4 = 1254). Every kernel starts 46 us
        // after its launch returned: the median lead.
        CHECK(s.launched == 15);
        CHECK(s.launch_threads == 2);
        CHECK(s.host_waits == 1);
        CHECK(s.host_wait_ms == doctest::Approx(0.054));
        CHECK(s.launch_lead_median_us == doctest::Approx(46.0));
        // forward launched its 6 kernels (thread 2's all-reduce at 1000 inside it) in its 200 us
        // of CPU time: 33.3 us a launch; optimizer_step 5 in 200 us.
        CHECK(s.phases[0].launched == 6);
        CHECK(s.phases[0].cpu_ms == doctest::Approx(0.200));
        CHECK(s.phases[1].launched == 5);
        CHECK(s.phases[1].cpu_ms == doctest::Approx(0.200));
        REQUIRE(s.gemm_shapes.size() == 1);
        CHECK(s.gemm_shapes[0].dtype == "bf16");
        CHECK(s.gemm_shapes[0].m == 1024);
        CHECK(s.gemm_shapes[0].n == 4096);
        CHECK(s.gemm_shapes[0].k == 2048);
        CHECK(s.gemm_shapes[0].tflops == doctest::Approx(171.80).epsilon(1e-4));
    }
}

TEST_CASE("cleave trace JSON has the DESIGN section 3 fields, the table names the classes") {
    const auto r = test::run_cleave({"trace", kSynthetic, "--format", "json"});
    REQUIRE(r.code == 0);
    const auto j = nlohmann::json::parse(r.out);
    for (const char* k : {"gpu", "span_ms", "kernels", "streams", "by_class_ms", "compute_kernel_ms",
                          "compute_busy_ms", "exposed_communication_ms", "launch_gaps_ms",
                          "unclassified_ms", "unclassified"}) {
        CHECK_MESSAGE(j.contains(k), k);
    }
    for (const char* k : {"gemm", "attention", "quantize", "norm", "activation", "elementwise",
                          "moe_permute", "communication", "memcpy", "other"}) {
        CHECK_MESSAGE(j["by_class_ms"].contains(k), k);
    }
    CHECK(j["streams"][0].contains("busy_ms"));
    const auto t = test::run_cleave({"trace", kSynthetic});
    REQUIRE(t.code == 0);
    CHECK(t.out.find("exposed 0.06") != std::string::npos);
    CHECK(t.out.find("my_custom_kernel_xyz") != std::string::npos);
}

// DeepSeek's own trace (../shared/traces, deepseek-ai/profile-data@4496024 train.json), the
// figures ../shared/reference/measured-kernels.md section 1a reads by hand: span 129.0 ms, GEMM
// 75.06, attention 21.97, DeepEP 113.4, compute streams' union 124.3, all busy 128.5 (so exposed
// communication 128.5 - 124.3 = 4.2 ms).
TEST_CASE("DeepSeek-V3's H800 trace read as measured-kernels.md section 1a reads it") {
    if (!std::filesystem::exists(kDeepSeek)) {
        MESSAGE("skipped: " << kDeepSeek << " is not here");
        return;
    }
    const trace::TraceSummary s = api::read_trace(kDeepSeek);
    CHECK(s.gpu == "NVIDIA H800");
    CHECK(s.kernels == 963);
    CHECK(s.span_ms == doctest::Approx(129.0).epsilon(0.01));
    CHECK(cls(s, Class::gemm) == doctest::Approx(75.1).epsilon(0.03));
    CHECK(cls(s, Class::attention) == doctest::Approx(22.0).epsilon(0.05));
    CHECK(cls(s, Class::communication) == doctest::Approx(113.4).epsilon(0.03));
    CHECK(s.compute_kernel_ms == doctest::Approx(130.6).epsilon(0.02));
    CHECK(s.compute_busy_ms == doctest::Approx(124.3).epsilon(0.02));
    CHECK(s.exposed_communication_ms == doctest::Approx(4.2).epsilon(1.5 / 4.2));
    CHECK(s.unclassified_ms < 0.02 * (s.compute_kernel_ms + cls(s, Class::communication)));
    CHECK(s.streams.size() == 3);
    // attn(B): 37.4 ms in section 1a, launched from autograd's thread inside the main thread's range.
    bool found = false;
    for (const auto& p : s.phases) {
        if (p.name == "attn(B)") {
            found = true;
            CHECK(p.occurrences == 4);
            CHECK(p.kernel_ms == doctest::Approx(37.4).epsilon(0.01));
        }
        // attn(F): 276 kernels launched (from either thread) in the 12.65 ms of its CPU ranges
        // (4 x 3.16 ms, python3 over the trace's user_annotation records): 45.8 us of host a
        // launch.
        if (p.name == "attn(F)") {
            CHECK(p.launched == 276);
            CHECK(p.cpu_ms == doctest::Approx(12.65).epsilon(0.01));
        }
    }
    CHECK(found);
    // The host ran ~15.6 ms ahead of the GPU (median launch lead) and 0.8 ms of the 4.3 ms of
    // compute idle began before the next kernel's launch: not host-bound (CUDA graphs would
    // save under 1 % here; measured-kernels.md section 2e).
    CHECK(s.launched == 983);
    CHECK(s.launch_threads == 2);
    CHECK(s.launch_lead_median_us == doctest::Approx(15565).epsilon(0.02));
    CHECK(s.host_wait_ms == doctest::Approx(0.82).epsilon(0.05));
    CHECK(s.host_waits == 11);
}

TEST_CASE("bad traces: exit 2 with where the file breaks and what is missing") {
    const std::string good = slurp(kSynthetic);
    // Truncated in the middle of an event.
    CHECK(error_of(good.substr(0, good.size() / 2)).find("truncated") != std::string::npos);
    CHECK(error_of(good.substr(0, good.size() / 2)).find("t.json:") != std::string::npos);
    // Not JSON, empty, another Chrome trace, no traceEvents.
    CHECK(error_of("hello").find("expected") != std::string::npos);
    CHECK(error_of("").find("empty") != std::string::npos);
    CHECK(error_of(R"({"traceEvents":[{"name":"x","ph":"B","ts":1,"pid":1,"tid":1}]})")
              .find("no GPU kernel events") != std::string::npos);
    CHECK(error_of(R"({"traceEvents":[]})").find("no GPU kernel events") != std::string::npos);
    CHECK(error_of(R"({"foo": 1})").find("no 'traceEvents'") != std::string::npos);
    CHECK(error_of(R"({"traceEvents":[{"ph":"X",}]})").find("not valid JSON") != std::string::npos);
    // The event's line and column: the bad event opens on line 3, column 1.
    CHECK(error_of("{\"traceEvents\":[\n{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"k\",\"ts\":1,\"dur\":1},\n{bad}]}")
              .find("t.json:3:1") != std::string::npos);
    // gzip: garbage after the magic, and a stream cut short.
    CHECK(error_of(std::string("\x1f\x8b\x08\x00garbagegarbagegarbage", 25)).find("gzip") != std::string::npos);
    const std::string gz = gzip(good);
    CHECK(error_of(gz.substr(0, gz.size() / 2)).find("truncated") != std::string::npos);
    // The CLI: exit 2, the message on stderr.
    const auto r = test::run_cleave({"trace", temp_file("cut.json", good.substr(0, 300))});
    CHECK(r.code == 2);
    CHECK(r.err.find("truncated") != std::string::npos);
}

// 300 mutations of the synthetic trace (and of its gzip), each either read or refused with a
// ConfigError: never a crash (the CI build runs this under ASan + UBSan), never another exception.
TEST_CASE("300 mutated traces: read or refused, never a crash") {
    const std::string good = slurp(kSynthetic);
    const std::string gz = gzip(good);
    uint64_t state = 0x9e3779b97f4a7c15ULL;
    const auto next = [&state] {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        return state;
    };
    const std::string alphabet = "{}[]\",:0123456789.-e \nabcXtsdur";
    int read = 0;
    int refused = 0;
    for (int i = 0; i < 300; ++i) {
        std::string t = (i % 5 == 4) ? gz : good;
        const int edits = 1 + static_cast<int>(next() % 8);
        for (int e = 0; e < edits && !t.empty(); ++e) {
            const size_t at = next() % t.size();
            switch (next() % 4) {
            case 0: t[at] = alphabet[next() % alphabet.size()]; break;
            case 1: t.erase(at, 1 + next() % 16); break;
            case 2: t.insert(at, 1 + next() % 4, alphabet[next() % alphabet.size()]); break;
            default: t.resize(at); break;
            }
        }
        try {
            const trace::KinetoTrace k = trace::read_kineto_text(t, "mutant.json");
            (void)trace::summarize(k, trace::load_class_table());
            ++read;
        } catch (const ConfigError&) {
            ++refused;
        }
    }
    CHECK(read + refused == 300);
    CHECK(refused > 0);
    MESSAGE(read << " read, " << refused << " refused");
}

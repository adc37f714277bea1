#include "trace/kineto.hpp"

#include "core/errors.hpp"

#include <simdjson.h>
#include <zlib.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <string_view>

namespace cleave::trace {
namespace {

[[noreturn]] void fail(const std::string& file, int64_t line, int64_t col, const std::string& msg) {
    throw ConfigError({Diagnostic{SourceLocation{file, line, col}, msg}});
}

// The file's bytes, inflated when they start with gzip's magic (1f 8b); a crc32 of the bytes as
// stored. One chunk in memory at a time.
class ByteSource {
public:
    virtual ~ByteSource() = default;
    // Raw bytes into buf (up to cap); 0 at the end.
    virtual size_t raw(unsigned char* buf, size_t cap) = 0;
};

class FileSource final : public ByteSource {
public:
    explicit FileSource(std::FILE* f) : f_(f) {}
    ~FileSource() override { std::fclose(f_); }
    FileSource(const FileSource&) = delete;
    FileSource& operator=(const FileSource&) = delete;
    size_t raw(unsigned char* buf, size_t cap) override { return std::fread(buf, 1, cap, f_); }

private:
    std::FILE* f_;
};

class TextSource final : public ByteSource {
public:
    explicit TextSource(const std::string& t) : t_(t) {}
    size_t raw(unsigned char* buf, size_t cap) override {
        const size_t n = std::min(cap, t_.size() - at_);
        std::memcpy(buf, t_.data() + at_, n);
        at_ += n;
        return n;
    }

private:
    const std::string& t_;
    size_t at_ = 0;
};

constexpr size_t kChunk = size_t{1} << 22;  // 4 MiB

class Inflater {
public:
    Inflater(ByteSource& src, std::string file) : src_(src), file_(std::move(file)) {
        in_.resize(kChunk);
    }
    ~Inflater() {
        if (gz_) {
            inflateEnd(&zs_);
        }
    }
    Inflater(const Inflater&) = delete;
    Inflater& operator=(const Inflater&) = delete;

    // Decoded bytes into out (up to cap); 0 at the end.
    size_t read(char* out, size_t cap) {
        if (!started_) {
            start();
        }
        if (!gz_) {
            if (in_pos_ < in_len_) {  // the bytes read to sniff the magic
                const size_t n = std::min(cap, in_len_ - in_pos_);
                std::memcpy(out, in_.data() + in_pos_, n);
                in_pos_ += n;
                return n;
            }
            const size_t n = src_.raw(reinterpret_cast<unsigned char*>(out), cap);
            account(reinterpret_cast<unsigned char*>(out), n);
            return n;
        }
        zs_.next_out = reinterpret_cast<Bytef*>(out);
        zs_.avail_out = static_cast<uInt>(cap);
        while (zs_.avail_out == cap) {
            if (zs_.avail_in == 0) {
                if (done_) {
                    return 0;
                }
                in_len_ = src_.raw(in_.data(), in_.size());
                account(in_.data(), in_len_);
                if (in_len_ == 0) {
                    if (!member_done_) {
                        fail(file_, 0, 0,
                             "the gzip stream ends early, after " + std::to_string(raw_bytes_) +
                                 " compressed bytes (" + std::to_string(zs_.total_out + out_before_) +
                                 " bytes inflated): the file is truncated");
                    }
                    done_ = true;
                    return 0;
                }
                zs_.next_in = in_.data();
                zs_.avail_in = static_cast<uInt>(in_len_);
            }
            if (member_done_) {  // another gzip member follows (concatenated .gz)
                out_before_ += zs_.total_out;
                inflateReset(&zs_);
                member_done_ = false;
            }
            const int rc = inflate(&zs_, Z_NO_FLUSH);
            if (rc == Z_STREAM_END) {
                member_done_ = true;
            } else if (rc != Z_OK && rc != Z_BUF_ERROR) {
                fail(file_, 0, 0,
                     std::string("gzip data is corrupt near compressed byte ") +
                         std::to_string(raw_bytes_ - zs_.avail_in) + ": " +
                         (zs_.msg != nullptr ? zs_.msg : "inflate error " + std::to_string(rc)));
            }
        }
        return cap - zs_.avail_out;
    }

    [[nodiscard]] uint64_t raw_bytes() const { return raw_bytes_; }
    [[nodiscard]] uint32_t crc() const { return static_cast<uint32_t>(crc_); }

private:
    void start() {
        started_ = true;
        in_len_ = src_.raw(in_.data(), in_.size());
        account(in_.data(), in_len_);
        gz_ = in_len_ >= 2 && in_[0] == 0x1f && in_[1] == 0x8b;
        if (gz_) {
            std::memset(&zs_, 0, sizeof zs_);
            if (inflateInit2(&zs_, 15 + 32) != Z_OK) {
                fail(file_, 0, 0, "zlib could not start inflating");
            }
            zs_.next_in = in_.data();
            zs_.avail_in = static_cast<uInt>(in_len_);
        }
    }
    void account(const unsigned char* p, size_t n) {
        raw_bytes_ += n;
        crc_ = crc32(crc_, p, static_cast<uInt>(n));
    }

    ByteSource& src_;
    std::string file_;
    std::vector<unsigned char> in_;
    size_t in_len_ = 0;
    size_t in_pos_ = 0;
    bool started_ = false;
    bool gz_ = false;
    bool member_done_ = false;
    bool done_ = false;
    z_stream zs_{};
    uLong crc_ = crc32(0L, Z_NULL, 0);
    uint64_t raw_bytes_ = 0;
    uint64_t out_before_ = 0;
};

// Walks the decoded text a chunk at a time, tracking line and column for messages.
class Scanner {
public:
    Scanner(Inflater& in, std::string file) : in_(in), file_(std::move(file)) { buf_.resize(kChunk); }

    [[nodiscard]] int64_t line() const { return line_; }
    [[nodiscard]] int64_t col() const {
        return static_cast<int64_t>(offset_ + pos_ - line_start_) + 1;
    }

    // Next non-blank byte without consuming it; -1 at the end.
    int peek() {
        for (;;) {
            if (pos_ == end_ && !refill()) {
                return -1;
            }
            const char c = buf_[pos_];
            if (c == ' ' || c == '\t' || c == '\r') {
                ++pos_;
            } else if (c == '\n') {
                newline(pos_);
                ++pos_;
            } else {
                return static_cast<unsigned char>(c);
            }
        }
    }
    void expect(char want, const char* what) {
        const int c = peek();
        if (c != want) {
            fail(file_, line(), col(),
                 c < 0 ? std::string("the file ends where ") + what + " should be: truncated"
                       : std::string("expected ") + what + ", found '" + static_cast<char>(c) + "'");
        }
        ++pos_;
    }

    // Appends the JSON value at the cursor to out (a balanced object / array, a string or a
    // scalar). False when the file ends inside it.
    bool capture(std::string& out) {
        if (peek() < 0) {
            return false;
        }
        int depth = 0;
        bool in_str = false;
        bool esc = false;
        bool scalar = false;
        const char first = buf_[pos_];
        if (first != '{' && first != '[' && first != '"') {
            scalar = true;
        }
        for (;;) {
            if (pos_ == end_ && !refill()) {
                return scalar && !out.empty();  // a scalar may end with the file
            }
            const char* b = buf_.data();
            size_t p = pos_;
            bool done = false;
            for (; p < end_; ++p) {
                const char c = b[p];
                if (c == '\n') {
                    newline(p);
                }
                if (scalar) {
                    if (c == ',' || c == '}' || c == ']' || c == ' ' || c == '\n' || c == '\t' ||
                        c == '\r') {
                        done = true;
                        break;
                    }
                    continue;
                }
                if (in_str) {
                    if (esc) {
                        esc = false;
                        continue;
                    }
                    if (c != '"' && c != '\\') {
                        // Jump to the next quote or backslash (memchr is vectorised; a string
                        // holds no raw newline in valid JSON).
                        const void* q = std::memchr(b + p, '"', end_ - p);
                        const size_t qe = q != nullptr ? static_cast<size_t>(static_cast<const char*>(q) - b) : end_;
                        const void* bs = std::memchr(b + p, '\\', qe - p);
                        p = (bs != nullptr ? static_cast<size_t>(static_cast<const char*>(bs) - b) : qe) - 1;
                        continue;
                    }
                    if (c == '\\') {
                        esc = true;
                    } else {
                        in_str = false;
                        if (depth == 0) {
                            ++p;
                            done = true;
                            break;
                        }
                    }
                    continue;
                }
                if (c == '"') {
                    in_str = true;
                } else if (c == '{' || c == '[') {
                    ++depth;
                } else if (c == '}' || c == ']') {
                    if (--depth == 0) {
                        ++p;
                        done = true;
                        break;
                    }
                }
            }
            out.append(b + pos_, p - pos_);
            pos_ = p;
            if (done) {
                return true;
            }
        }
    }

    // Reads a JSON string key at the cursor (no escapes needed for the keys looked for).
    std::string key() {
        std::string raw;
        if (peek() != '"' || !capture(raw) || raw.size() < 2) {
            fail(file_, line(), col(), "expected a quoted key");
        }
        return raw.substr(1, raw.size() - 2);
    }

private:
    bool refill() {
        offset_ += end_;
        pos_ = 0;
        end_ = in_.read(buf_.data(), buf_.size());
        return end_ > 0;
    }
    void newline(size_t p) {
        ++line_;
        line_start_ = offset_ + p + 1;
    }

    Inflater& in_;
    std::string file_;
    std::vector<char> buf_;
    size_t pos_ = 0;
    size_t end_ = 0;
    uint64_t offset_ = 0;  // decoded bytes before buf_[0]
    int64_t line_ = 1;
    uint64_t line_start_ = 0;
};

bool is_cat(std::string_view cat, std::string_view want) {
    if (cat.size() != want.size()) {
        return false;
    }
    for (size_t i = 0; i < cat.size(); ++i) {
        if (std::tolower(static_cast<unsigned char>(cat[i])) != want[i]) {
            return false;
        }
    }
    return true;
}

bool is_matmul_op(std::string_view n) {
    static constexpr std::array<std::string_view, 8> ops = {
        "aten::mm",       "aten::addmm",     "aten::bmm",         "aten::baddbmm",
        "aten::_scaled_mm", "aten::_addmm_activation", "aten::_grouped_mm",
        "aten::_scaled_grouped_mm"};
    return std::find(ops.begin(), ops.end(), n) != ops.end();
}

// A number, or an integer written as a string; nullopt otherwise.
template <class V>
std::optional<double> number(V&& v) {
    double d = 0.0;
    if (!v.get_double().get(d)) {
        return d;
    }
    return std::nullopt;
}

template <class V>
std::optional<int64_t> integer(V&& v) {
    int64_t i = 0;
    if (!v.get_int64().get(i)) {
        return i;
    }
    double d = 0.0;
    if (!v.get_double().get(d)) {
        return static_cast<int64_t>(d);
    }
    return std::nullopt;
}

// pid / tid: an integer, or a string (some traces name tracks): hashed to an id.
template <class V>
int64_t track_id(V&& v) {
    int64_t i = 0;
    if (!v.get_int64().get(i)) {
        return i;
    }
    std::string_view s;
    if (!v.get_string().get(s)) {
        return static_cast<int64_t>(std::hash<std::string_view>{}(s) & 0x3fffffffffffffffULL);
    }
    return 0;
}

class EventReader {
public:
    EventReader(KinetoTrace& t, std::string file) : t_(t), file_(std::move(file)) {}

    void event(std::string& text, int64_t line, int64_t col) {
        const size_t n = text.size();
        text.append(simdjson::SIMDJSON_PADDING, ' ');
        simdjson::ondemand::document doc;
        auto err = parser_.iterate(simdjson::padded_string_view(text.data(), n, text.size()))
                       .get(doc);
        simdjson::ondemand::object obj;
        if (!err) {
            err = doc.get_object().get(obj);
        }
        if (err) {
            bad(line, col, err);
        }
        // get_string's views stay valid until the parser's next iterate(): no copies needed.
        std::string_view name, cat, ph;
        std::optional<double> ts, dur;
        int64_t pid = 0, tid = 0;
        Args a;
        for (auto field : obj) {
            std::string_view k;
            if ((err = field.unescaped_key().get(k))) {
                bad(line, col, err);
            }
            auto v = field.value();
            if (k == "name") {
                if (v.get_string().get(name)) {
                    name = {};
                }
            } else if (k == "cat") {
                if (v.get_string().get(cat)) {
                    cat = {};
                }
            } else if (k == "ph") {
                if (v.get_string().get(ph)) {
                    ph = {};
                }
            } else if (k == "ts") {
                ts = number(v);
            } else if (k == "dur") {
                dur = number(v);
            } else if (k == "pid") {
                pid = track_id(v);
            } else if (k == "tid") {
                tid = track_id(v);
            } else if (k == "args") {
                simdjson::ondemand::object args;
                if (!v.get_object().get(args)) {
                    read_args(args, a, line, col);
                }
            }
        }
        ++t_.events;
        if (!cat.empty()) {
            ++t_.categories[std::string(cat)];
        }
        if (ph != "X" || !ts) {
            return;
        }
        if (!have_base_) {
            t_.base_ts_us = *ts;
            have_base_ = true;
        }
        const double rel = *ts - t_.base_ts_us;
        const double d = dur ? std::max(0.0, *dur) : 0.0;
        const bool kernel = is_cat(cat, "kernel");
        const bool copy = is_cat(cat, "gpu_memcpy") || is_cat(cat, "gpu_memset") ||
                          is_cat(cat, "memcpy") || is_cat(cat, "memset");
        if (kernel || copy) {
            GpuEvent g;
            g.name = intern(name);
            g.device = static_cast<int32_t>(a.device.value_or(pid));
            g.stream = a.stream.value_or(tid);
            g.ts_us = rel;
            g.dur_us = d;
            g.correlation = a.correlation.value_or(-1);
            g.external_id = a.external.value_or(-1);
            g.is_copy = copy;
            g.blocks = static_cast<int32_t>(std::min<int64_t>(a.blocks, 1 << 30));
            t_.gpu.push_back(g);
        } else if (is_cat(cat, "cuda_runtime") || is_cat(cat, "cuda_driver") ||
                   is_cat(cat, "runtime")) {
            // Only calls that start GPU work (cudaLaunchKernel, cuLaunchKernelEx,
            // hipExtModuleLaunchKernel, cudaMemcpyAsync, cudaGraphLaunch...), not the many
            // cudaEventQuery / cudaStreamWaitEvent records.
            if (a.correlation && (name.find("aunch") != std::string_view::npos ||
                                  name.find("emcpy") != std::string_view::npos ||
                                  name.find("emset") != std::string_view::npos)) {
                t_.launches[*a.correlation] = Launch{pid, tid, rel, d};
            }
        } else if (is_cat(cat, "user_annotation") || is_cat(cat, "gpu_user_annotation")) {
            t_.annotations.push_back(
                Annotation{std::string(name), pid, tid, rel, d, is_cat(cat, "gpu_user_annotation")});
        } else if (is_cat(cat, "cpu_op") && a.external && !a.dims.empty() && is_matmul_op(name)) {
            if (auto op = matmul(name, a)) {
                t_.matmuls[*a.external] = *op;
            }
        }
    }

    void header_value(const std::string& key, std::string& text, int64_t line, int64_t col) {
        const size_t n = text.size();
        text.append(simdjson::SIMDJSON_PADDING, ' ');
        simdjson::ondemand::document doc;
        auto err = parser_.iterate(simdjson::padded_string_view(text.data(), n, text.size()))
                       .get(doc);
        if (err) {
            bad(line, col, err);
        }
        if (key == "deviceProperties") {
            simdjson::ondemand::array arr;
            if (doc.get_array().get(arr)) {
                return;
            }
            for (auto item : arr) {
                simdjson::ondemand::object o;
                if (item.get_object().get(o)) {
                    continue;
                }
                DeviceProps dp;
                for (auto f : o) {
                    std::string_view k;
                    if (f.unescaped_key().get(k)) {
                        continue;
                    }
                    auto v = f.value();
                    if (k == "id") {
                        dp.id = integer(v).value_or(0);
                    } else if (k == "name") {
                        std::string_view s;
                        if (!v.get_string().get(s)) {
                            dp.name = std::string(s);
                        }
                    } else if (k == "numSms") {
                        dp.sms = integer(v).value_or(0);
                    }
                }
                devices_.push_back(dp);
            }
        } else if (key == "distributedInfo") {
            simdjson::ondemand::object o;
            if (doc.get_object().get(o)) {
                return;
            }
            for (auto f : o) {
                std::string_view k;
                if (f.unescaped_key().get(k)) {
                    continue;
                }
                auto v = f.value();
                if (k == "backend") {
                    std::string_view b;
                    if (!v.get_string().get(b)) {
                        t_.backend = std::string(b);
                    }
                } else if (k == "rank") {
                    t_.rank = integer(v).value_or(-1);
                } else if (k == "world_size") {
                    t_.world_size = integer(v).value_or(0);
                }
            }
        }
    }

    void finish() {
        if (devices_.empty()) {
            return;
        }
        // The device most kernels ran on.
        std::unordered_map<int32_t, int64_t> per;
        for (const GpuEvent& g : t_.gpu) {
            ++per[g.device];
        }
        int32_t busiest = devices_.front().id < 0 ? 0 : static_cast<int32_t>(devices_.front().id);
        int64_t most = -1;
        for (const auto& [dev, n] : per) {
            if (n > most || (n == most && dev < busiest)) {
                most = n;
                busiest = dev;
            }
        }
        const DeviceProps* pick = &devices_.front();
        for (const DeviceProps& d : devices_) {
            if (d.id == busiest) {
                pick = &d;
            }
        }
        t_.gpu_name = pick->name;
        t_.gpu_sms = pick->sms;
    }

private:
    struct Args {
        std::optional<int64_t> stream, device, correlation, external;
        int64_t blocks = 0;
        std::vector<std::vector<double>> dims;
        std::string dtype;
    };
    struct DeviceProps {
        int64_t id = -1;
        std::string name;
        int64_t sms = 0;
    };

    [[noreturn]] void bad(int64_t line, int64_t col, simdjson::error_code e) {
        fail(file_, line, col, std::string("an event is not valid JSON: ") +
                                   simdjson::error_message(e));
    }

    void read_args(simdjson::ondemand::object& args, Args& a, int64_t line, int64_t col) {
        for (auto f : args) {
            std::string_view k;
            if (auto err = f.unescaped_key().get(k)) {
                bad(line, col, err);
            }
            auto v = f.value();
            if (k == "stream") {
                a.stream = integer(v);
            } else if (k == "device") {
                a.device = integer(v);
            } else if (k == "correlation") {
                a.correlation = integer(v);
            } else if (k == "External id") {
                a.external = integer(v);
            } else if (k == "grid") {
                simdjson::ondemand::array g;
                if (!v.get_array().get(g)) {
                    int64_t n = 1;
                    for (auto x : g) {
                        n *= std::clamp<int64_t>(integer(x).value_or(1), 1, 1 << 20);
                        n = std::min<int64_t>(n, int64_t{1} << 40);
                    }
                    a.blocks = n;
                }
            } else if (k == "Input Dims") {
                simdjson::ondemand::array outer;
                if (v.get_array().get(outer)) {
                    continue;
                }
                for (auto in : outer) {
                    std::vector<double> dims;
                    simdjson::ondemand::array inner;
                    if (!in.get_array().get(inner)) {
                        for (auto x : inner) {
                            if (auto d = number(x)) {
                                dims.push_back(*d);
                            }
                        }
                    }
                    a.dims.push_back(std::move(dims));
                }
            } else if (k == "Input type") {
                simdjson::ondemand::array types;
                if (v.get_array().get(types)) {
                    continue;
                }
                for (auto x : types) {
                    std::string_view s;
                    if (!x.get_string().get(s) && !s.empty()) {
                        a.dtype = std::string(s);
                        break;
                    }
                }
            }
        }
    }

    // C = A B from the op's input shapes (PyTorch's argument order for each op).
    static std::optional<MatmulOp> matmul(std::string_view name, const Args& a) {
        const auto& d = a.dims;
        MatmulOp op;
        op.op = std::string(name);
        op.dtype = a.dtype;
        const std::vector<double>* A = nullptr;
        const std::vector<double>* B = nullptr;
        if (name == "aten::addmm" || name == "aten::baddbmm" || name == "aten::_addmm_activation") {
            if (d.size() >= 3) {  // (bias or C, A, B, ...)
                A = &d[1];
                B = &d[2];
            }
        } else if (d.size() >= 2) {  // (A, B, ...)
            A = &d[0];
            B = &d[1];
        }
        if (A == nullptr || A->size() < 2 || B->size() < 2) {
            return std::nullopt;
        }
        op.m = (*A)[A->size() - 2];
        op.k = (*A)[A->size() - 1];
        op.n = (*B)[B->size() - 1];
        if (A->size() == 3) {
            op.batch = (*A)[0];
        }
        return op;
    }

    uint32_t intern(std::string_view name) {
        auto it = ids_.find(std::string(name));
        if (it != ids_.end()) {
            return it->second;
        }
        const auto id = static_cast<uint32_t>(t_.names.size());
        t_.names.emplace_back(name);
        ids_.emplace(t_.names.back(), id);
        return id;
    }

    KinetoTrace& t_;
    std::string file_;
    simdjson::ondemand::parser parser_;
    std::unordered_map<std::string, uint32_t> ids_;
    std::vector<DeviceProps> devices_;
    bool have_base_ = false;
};

KinetoTrace read_source(ByteSource& src, const std::string& file) {
    KinetoTrace t;
    t.file = file;
    Inflater in(src, file);
    Scanner sc(in, file);
    EventReader reader(t, file);
    std::string text;
    bool saw_events = false;
    const auto events = [&] {
        saw_events = true;
        sc.expect('[', "'[' opening traceEvents");
        if (sc.peek() == ']') {
            sc.expect(']', "']'");
            return;
        }
        for (int64_t i = 1;; ++i) {
            (void)sc.peek();  // to the event's first byte, for its line and column
            const int64_t line = sc.line();
            const int64_t col = sc.col();
            text.clear();
            if (!sc.capture(text)) {
                fail(file, line, col,
                     "the file ends inside event " + std::to_string(i) +
                         " of traceEvents (it opens here): the trace is truncated");
            }
            reader.event(text, line, col);
            const int c = sc.peek();
            if (c == ']') {
                sc.expect(']', "']'");
                return;
            }
            sc.expect(',', "',' or ']' after an event of traceEvents");
        }
    };
    const int first = sc.peek();
    if (first < 0) {
        fail(file, 0, 0, "the file is empty: expected a PyTorch profiler trace (JSON)");
    }
    if (first == '[') {  // Chrome's JSON Array Format: the events alone
        events();
    } else {
        sc.expect('{', "a JSON object (a PyTorch profiler trace)");
        if (sc.peek() != '}') {
            for (;;) {
                const std::string key = sc.key();
                sc.expect(':', "':' after a key");
                if (key == "traceEvents") {
                    events();
                } else {
                    (void)sc.peek();
                    const int64_t line = sc.line();
                    const int64_t col = sc.col();
                    text.clear();
                    if (!sc.capture(text)) {
                        fail(file, line, col,
                             "the file ends inside the value of '" + key + "': truncated");
                    }
                    if (key == "deviceProperties" || key == "distributedInfo") {
                        reader.header_value(key, text, line, col);
                    }
                }
                if (sc.peek() == '}') {
                    break;
                }
                sc.expect(',', "',' or '}' after a top-level value");
            }
        }
        sc.expect('}', "'}' closing the trace");
    }
    if (sc.peek() >= 0) {
        fail(file, sc.line(), sc.col(), "unexpected text after the trace's closing bracket");
    }
    t.file_bytes = in.raw_bytes();
    t.crc32 = in.crc();
    if (!saw_events) {
        fail(file, 0, 0,
             "no 'traceEvents' array: this is not a PyTorch profiler (Chrome trace) file");
    }
    reader.finish();
    if (t.gpu.empty()) {
        std::string cats;
        std::vector<std::pair<std::string, int64_t>> v(t.categories.begin(), t.categories.end());
        std::sort(v.begin(), v.end(), [](const auto& a, const auto& b) {
            return a.second != b.second ? a.second > b.second : a.first < b.first;
        });
        for (size_t i = 0; i < v.size() && i < 6; ++i) {
            cats += (i ? ", " : "") + v[i].first + " " + std::to_string(v[i].second);
        }
        fail(file, 0, 0,
             "no GPU kernel events (cat 'kernel', 'gpu_memcpy', 'gpu_memset') among " +
                 std::to_string(t.events) + " events" +
                 (cats.empty() ? std::string() : " (categories: " + cats + ")") +
                 ": record with ProfilerActivity.CUDA (torch.profiler) to trace the GPU");
    }
    return t;
}

}  // namespace

KinetoTrace read_kineto(const std::string& path) {
    std::FILE* f = std::fopen(path.c_str(), "rb");
    if (f == nullptr) {
        fail(path, 0, 0, std::string("cannot open the trace: ") + std::strerror(errno));
    }
    FileSource src(f);
    return read_source(src, path);
}

KinetoTrace read_kineto_text(const std::string& text, const std::string& name) {
    TextSource src(text);
    return read_source(src, name);
}

}  // namespace cleave::trace

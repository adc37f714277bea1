#pragma once
// SI units in one place (STYLE S3). Every quantity holds a double in SI base units: bytes,
// seconds, FLOP, bytes per second, FLOP per second. Rates are decimal (GB/s = 1e9 B/s,
// TFLOP/s = 1e12 FLOP/s); capacities are binary (GiB = 2^30 B). Only meaningful operators exist.

#include <compare>

namespace cleave {

template <class Tag>
struct Quantity {
    double si = 0.0;

    [[nodiscard]] constexpr double value() const { return si; }

    constexpr auto operator<=>(const Quantity&) const = default;

    constexpr Quantity& operator+=(Quantity o) {
        si += o.si;
        return *this;
    }

    constexpr Quantity& operator-=(Quantity o) {
        si -= o.si;
        return *this;
    }
};

template <class Tag>
constexpr Quantity<Tag> operator+(Quantity<Tag> a, Quantity<Tag> b) {
    return {a.si + b.si};
}

template <class Tag>
constexpr Quantity<Tag> operator-(Quantity<Tag> a, Quantity<Tag> b) {
    return {a.si - b.si};
}

template <class Tag>
constexpr Quantity<Tag> operator*(Quantity<Tag> a, double k) {
    return {a.si * k};
}

template <class Tag>
constexpr Quantity<Tag> operator*(double k, Quantity<Tag> a) {
    return {a.si * k};
}

template <class Tag>
constexpr Quantity<Tag> operator/(Quantity<Tag> a, double k) {
    return {a.si / k};
}

/// Ratio of two like quantities (dimensionless).
template <class Tag>
constexpr double operator/(Quantity<Tag> a, Quantity<Tag> b) {
    return a.si / b.si;
}

template <class Tag>
constexpr Quantity<Tag> max(Quantity<Tag> a, Quantity<Tag> b) {
    return a.si < b.si ? b : a;
}

template <class Tag>
constexpr Quantity<Tag> min(Quantity<Tag> a, Quantity<Tag> b) {
    return b.si < a.si ? b : a;
}

using Bytes = Quantity<struct BytesTag>;
using Seconds = Quantity<struct SecondsTag>;
using Flops = Quantity<struct FlopsTag>;  // a count of floating-point operations
using BytesPerSecond = Quantity<struct BytesPerSecondTag>;
using FlopsPerSecond = Quantity<struct FlopsPerSecondTag>;

constexpr Seconds operator/(Bytes b, BytesPerSecond r) {
    return {b.si / r.si};
}

constexpr Seconds operator/(Flops f, FlopsPerSecond r) {
    return {f.si / r.si};
}

constexpr BytesPerSecond operator/(Bytes b, Seconds t) {
    return {b.si / t.si};
}

constexpr FlopsPerSecond operator/(Flops f, Seconds t) {
    return {f.si / t.si};
}

constexpr Bytes operator*(BytesPerSecond r, Seconds t) {
    return {r.si * t.si};
}

constexpr Flops operator*(FlopsPerSecond r, Seconds t) {
    return {r.si * t.si};
}

// Capacities: binary.
constexpr Bytes bytes(double x) {
    return {x};
}

constexpr Bytes kib(double x) {
    return {x * 1024.0};
}

constexpr Bytes mib(double x) {
    return {x * 1048576.0};
}

constexpr Bytes gib(double x) {
    return {x * 1073741824.0};
}

constexpr double to_gib(Bytes b) {
    return b.si / 1073741824.0;
}

constexpr double to_mib(Bytes b) {
    return b.si / 1048576.0;
}

// Rates: decimal.
constexpr BytesPerSecond gbps(double gigabytes_per_s) {
    return {gigabytes_per_s * 1e9};
}

constexpr BytesPerSecond gbit_per_s(double gigabits_per_s) {
    return {gigabits_per_s * 1e9 / 8.0};
}

constexpr double to_gbps(BytesPerSecond r) {
    return r.si / 1e9;
}

constexpr FlopsPerSecond tflops(double x) {
    return {x * 1e12};
}

constexpr double to_tflops(FlopsPerSecond r) {
    return r.si / 1e12;
}

constexpr Flops flop(double x) {
    return {x};
}

// Times.
constexpr Seconds seconds(double x) {
    return {x};
}

constexpr Seconds ms(double x) {
    return {x * 1e-3};
}

constexpr Seconds us(double x) {
    return {x * 1e-6};
}

constexpr double to_ms(Seconds t) {
    return t.si * 1e3;
}

constexpr double to_us(Seconds t) {
    return t.si * 1e6;
}

}  // namespace cleave

// The arithmetic of calibration: from timings measured on this machine to the parameters of a
// cluster file. Pure functions, so that each can be checked against timings made from known
// parameters (tests/calibration/fit_test.cc) apart from the noise of real measurements.
//
//   GemmCurve g = FitGemmCurve({.flops = 2.7e8, .seconds = 2.1e-3}, {.flops = 2.2e5, .seconds = 4e-6}, 1e-6);
//   g.peak_flops   // P in rate(f) = P·f / (f + h)
//   g.half_flops   // h: the size at which a GEMM reaches half of P
#pragma once

#include <cstdint>
#include <map>
#include <string>

namespace pdist::calibration {

struct Timing {
  double flops = 0;    // or bytes, for a transfer
  double seconds = 0;  // per op, launch overhead included
};

struct GemmCurve {
  double peak_flops = 0;
  double half_flops = 0;
};

// rate(f) = P·f/(f + h) through a large and a small matmul, after taking `overhead` seconds (a
// launch) off each: two equations, two unknowns. A small one no slower per FLOP than the large
// one leaves h = 0 (no size effect measured) and P the large one's rate.
GemmCurve FitGemmCurve(const Timing& large, const Timing& small, double overhead);

struct Link {
  double bandwidth = 0;  // bytes/s of bus bandwidth (nccl-tests' busbw of a ring all-reduce)
  double latency = 0;    // seconds per ring step
};

// A ring all-reduce over `ranks` takes 2(n−1) steps of latency α plus 2(n−1)/n·bytes/β:
// α from the one-element all-reduce, β from the large one less its latency.
Link FitAllReduceLink(int64_t ranks, double large_bytes, double large_seconds, double small_seconds);

// Per op type, measured over predicted kernel seconds where they differ by more than 10%,
// clamped to [1/20, 20] (a larger miss is a broken measurement, not a rate). Types measured or
// predicted only on one side, or at zero, get no scale.
std::map<std::string, double> OpScalesFrom(const std::map<std::string, double>& measured,
                                           const std::map<std::string, double>& predicted);

// From a reference step run in a low-precision dtype: measured kernel seconds per op type, and
// predicted seconds per scale key ("add" for an op computing in f32, "add@bf16" in bf16;
// planner::OpScaleKey). A type whose every op computes in `dtype` gets a "type@dtype" scale
// (clamped as above) where it differs by more than 10% from the factor `plain` already gives
// the type (1 when none); a type with ops in both dtypes cannot be split and gets none.
//   measured {add: 4e-3}, predicted {add@bf16: 1e-3}, plain {add: 2}  →  {add@bf16: 4}
std::map<std::string, double> LowPrecisionOpScalesFrom(const std::map<std::string, double>& measured,
                                                       const std::map<std::string, double>& predicted,
                                                       const std::string& dtype,
                                                       const std::map<std::string, double>& plain);

}  // namespace pdist::calibration

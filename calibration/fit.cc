// Calibration's fits: GEMM size curve, all-reduce link, per-op scales.
#include "calibration/fit.h"

#include <algorithm>
#include <cmath>

namespace pdist::calibration {

GemmCurve FitGemmCurve(const Timing& large, const Timing& small, double overhead) {
  const double fl = large.flops, fs = small.flops;
  const double rl = fl / std::max(large.seconds - overhead, 1e-12);
  const double rs = fs / std::max(small.seconds - overhead, 1e-12);
  // rs/rl = (fs/(fs+h)) / (fl/(fl+h)) = q  ⇒  h = fs·fl·(1−q) / (q·fl − fs).
  const double q = rs / rl;
  if (q >= 1) return {.peak_flops = rl, .half_flops = 0};  // no size effect measured
  const double h = q * fl > fs ? fs * fl * (1 - q) / (q * fl - fs) : 0;
  return {.peak_flops = rl * (fl + h) / fl, .half_flops = h};
}

Link FitAllReduceLink(int64_t ranks, double large_bytes, double large_seconds, double small_seconds) {
  const double n = static_cast<double>(ranks);
  Link link;
  link.latency = std::max(small_seconds / (2 * (n - 1)), 1e-9);
  const double transfer = std::max(large_seconds - 2 * (n - 1) * link.latency, 1e-9);
  link.bandwidth = 2 * (n - 1) / n * large_bytes / transfer;
  return link;
}

std::map<std::string, double> OpScalesFrom(const std::map<std::string, double>& measured,
                                           const std::map<std::string, double>& predicted) {
  std::map<std::string, double> scales;
  for (const auto& [type, seconds] : predicted) {
    auto m = measured.find(type);
    if (m == measured.end() || seconds <= 0 || m->second <= 0) continue;
    const double scale = std::clamp(m->second / seconds, 0.05, 20.0);
    if (std::abs(scale - 1) > 0.1) scales[type] = scale;
  }
  return scales;
}

std::map<std::string, double> LowPrecisionOpScalesFrom(const std::map<std::string, double>& measured,
                                                       const std::map<std::string, double>& predicted,
                                                       const std::string& dtype,
                                                       const std::map<std::string, double>& plain) {
  std::map<std::string, double> scales;
  for (const auto& [type, seconds] : measured) {
    const std::string key = type + "@" + dtype;
    auto low = predicted.find(key);
    if (low == predicted.end() || predicted.count(type) > 0 || low->second <= 0 || seconds <= 0) continue;
    const double scale = std::clamp(seconds / low->second, 0.05, 20.0);
    auto p = plain.find(type);
    const double before = p == plain.end() ? 1.0 : p->second;
    if (std::abs(scale / before - 1) > 0.1) scales[key] = scale;
  }
  return scales;
}

}  // namespace pdist::calibration

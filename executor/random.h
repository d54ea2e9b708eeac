// Counter-based random numbers: element i of a stream is a pure function of (key, i), so
// results do not depend on thread count, op order or which rank computes a slice.
#pragma once

#include <cmath>
#include <cstdint>
#include <string_view>

#include "executor/host_device.h"

namespace pdist::exec {

// splitmix64 finaliser: a good 64-bit mixer.
PDIST_HOST_DEVICE inline uint64_t Mix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

// FNV-1a of a name, for keying streams by parameter name (host only).
inline uint64_t HashName(std::string_view name) {
  uint64_t h = 0xCBF29CE484222325ULL;
  for (unsigned char c : name) h = (h ^ c) * 0x100000001B3ULL;
  return h;
}

PDIST_HOST_DEVICE inline uint64_t StreamKey(uint64_t seed, uint64_t stream) { return Mix64(seed ^ Mix64(stream)); }

// Uniform in (0, 1), never exactly 0 (safe for log).
PDIST_HOST_DEVICE inline double UniformAt(uint64_t key, uint64_t index) {
  return (static_cast<double>(Mix64(key ^ Mix64(index)) >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}

// Whether dropout keeps element `n` of the stream `key`: its 53-bit draw is at least
// `threshold` (p · 2^53; p = 1 gives 2^53, above every draw). The CPU and CUDA dropout kernels
// both decide with this, so their masks are identical.
PDIST_HOST_DEVICE inline bool DropoutKeeps(uint64_t key, uint64_t n, uint64_t threshold) {
  return (Mix64(key + n * 0x9E3779B97F4A7C15ULL) >> 11) >= threshold;  // splitmix64's increment
}

// Standard normal via Box–Muller on two uniforms of the same index.
inline double NormalAt(uint64_t key, uint64_t index) {
  const double u1 = UniformAt(key, 2 * index);
  const double u2 = UniformAt(key, 2 * index + 1);
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
}

}  // namespace pdist::exec

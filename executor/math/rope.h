// Rotary position embedding, per element, for the CPU (executor/cpu/attention_kernels.cc) and
// the CUDA kernels (executor/cuda/rope_launch.cu) alike.
#pragma once

#include <cstdint>

#include "executor/host_device.h"

namespace pdist::exec::math {

// Rotary embedding on [batch, seq, heads, head_dim] rows ([seq, batch, ...] when time_major).
// With full-width tables sin[pos, j] and cos[pos, j], out = x * cos + rot(x) * sin where rot
// pairs each element j with a partner p(j) and a sign: adjacent pairs (x0,x1), (x2,x3), … when
// use_neox_rotary_style (Paddle's naming), else halves (x_i, x_{i+d/2}); the first of a pair
// takes -x_partner, the second +x_partner.
struct RopeLayout {
  int64_t batch, seq, heads_q, head_dim;
  bool time_major, adjacent_pairs;

  PDIST_HOST_DEVICE int64_t Partner(int64_t j) const { return adjacent_pairs ? j ^ 1 : (j + head_dim / 2) % head_dim; }
  PDIST_HOST_DEVICE bool IsFirst(int64_t j) const { return adjacent_pairs ? j % 2 == 0 : j < head_dim / 2; }
  // Start of row (b, s) of a tensor with `heads` heads.
  PDIST_HOST_DEVICE int64_t RowStart(int64_t b, int64_t s, int64_t heads) const {
    return ((time_major ? s * batch + b : b * seq + s) * heads) * head_dim;
  }
};

// Element j of one head after rotation: x[j]·cos[j] + sign(j)·x[p(j)]·sin[j]; the transpose (for
// gradients) uses -sin[p(j)], the inverse rotation whenever sin[p(j)] = sin[j], as in the
// standard tables. `x` is the head's first element; the tables are the position's rows. T is
// the storage type, C the one the math runs in.
template <typename T, typename C>
PDIST_HOST_DEVICE C RopeElement(const RopeLayout& l, const T* x, const C* sin, const C* cos, int64_t j, bool transpose) {
  const int64_t p = l.Partner(j);
  const C sign = l.IsFirst(j) ? C(-1) : C(1);
  return static_cast<C>(x[j]) * cos[j] + sign * static_cast<C>(x[p]) * (transpose ? -sin[p] : sin[j]);
}

}  // namespace pdist::exec::math

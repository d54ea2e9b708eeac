// Helpers for kernels that work row by row, or lane by lane along one axis (softmax,
// cross-entropy, norms, rope, attention).
//
// A tensor reduced along one axis is an AxisView (executor/shape_layout.h): [outer, n, inner],
// each of the outer * inner "lanes" a strided vector of n elements.
#pragma once

#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "executor/shape_layout.h"
#include "executor/tensor.h"

namespace pdist::exec::cpu {

// Rows per ParallelFor chunk so that each thread gets at least ~32K elements of work: small
// tensors stay serial, since an OpenMP fork (and, on a loaded machine, its barrier) costs more
// than they do.
inline int64_t RowGrain(int64_t elements_per_row) {
  return std::max<int64_t>(1, (int64_t{1} << 15) / std::max<int64_t>(1, elements_per_row));
}

template <typename T>
using LaneMap = Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>, Eigen::Unaligned, Eigen::InnerStride<>>;
template <typename T>
using ConstLaneMap = Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>, Eigen::Unaligned, Eigen::InnerStride<>>;

// The lane's logsumexp, max + log(sum(exp(x - max))), with nothing written.
template <typename T>
T LogSumExpLane(const T* x, int64_t n, int64_t stride) {
  ConstLaneMap<T> in(x, n, Eigen::InnerStride<>(stride));
  const T max = in.maxCoeff();
  return max + std::log((in - max).exp().sum());
}

// Numerically stable softmax (or log_softmax) of one lane: subtract the max before exp.
// Returns log(sum(exp(x - max))) + max, the lane's logsumexp. y may be x for the softmax (each
// element is read before it is written), not for the log_softmax.
template <typename T>
T SoftmaxLane(const T* x, T* y, int64_t n, int64_t stride, bool log) {
  ConstLaneMap<T> in(x, n, Eigen::InnerStride<>(stride));
  LaneMap<T> out(y, n, Eigen::InnerStride<>(stride));
  const T max = in.maxCoeff();
  out = (in - max).exp();
  const T sum = out.sum();
  if (log) {
    out = in - (max + std::log(sum));
  } else {
    out /= sum;
  }
  return max + std::log(sum);
}

}  // namespace pdist::exec::cpu

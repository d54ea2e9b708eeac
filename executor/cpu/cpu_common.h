// Shared helpers for CPU kernels: parallel loops (broadcast strides: executor/strides.h).
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "executor/strides.h"
#include "executor/tensor.h"

#ifdef _OPENMP
#include <omp.h>
#endif

namespace pdist::exec::cpu {

// Runs fn(begin, end) over [0, n) split across OpenMP threads when n is large enough to pay
// for the fork (≥ `grain` elements per thread); serially otherwise. Deterministic: each index
// is computed by exactly one call, independent of the thread count.
template <typename Fn>
void ParallelFor(int64_t n, int64_t grain, Fn fn) {
#ifdef _OPENMP
  if (n >= 2 * grain) {
#pragma omp parallel
    {
      const int64_t threads = omp_get_num_threads();
      const int64_t id = omp_get_thread_num();
      const int64_t chunk = (n + threads - 1) / threads;
      const int64_t begin = id * chunk;
      const int64_t end = std::min(n, begin + chunk);
      if (begin < end) fn(begin, end);
    }
    return;
  }
#endif
  if (n > 0) fn(0, n);
}

// Threads a parallel region may use (1 without OpenMP): for sizing work, never for results.
inline int64_t MaxThreads() {
#ifdef _OPENMP
  return omp_get_max_threads();
#else
  return 1;
#endif
}

}  // namespace pdist::exec::cpu

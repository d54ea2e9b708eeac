// Device side of sum, mean, max, min and their gradients. A sum of few terms: one thread per
// output element, its positions in row-major order in double (the CPU kernel's order and
// accumulator: results agree to the last bit); of many terms (≥ kManyTerms): a block per output,
// still in double. max and min (one thread per output) propagate NaN as the CPU's do; their
// gradient splits each output's gradient evenly among the positions that equal it (ties), as the
// CPU's does.
#include "executor/cuda/device_common.cuh"
#include "executor/cuda/launch.h"

namespace pdist::exec::cuda {
namespace {

template <typename S>
__global__ void SumKernel(const S* x, S* out, int64_t out_elements, StridedIndex<1> kept, StridedIndex<1> reduced,
                          int64_t terms, bool mean) {
  PDIST_GRID_STRIDE_LOOP(o, out_elements) {
    int64_t base[1];
    Offsets(kept, o, base);
    double acc = 0;
    for (int64_t r = 0; r < terms; ++r) {
      int64_t offset[1];
      Offsets(reduced, r, offset);
      acc += static_cast<double>(Load(x, base[0] + offset[0]));
    }
    Store(out, o, static_cast<typename Compute<S>::type>(mean ? acc / static_cast<double>(terms) : acc));
  }
}

// The same sums for outputs of many terms (a loss's mean): a block per output, its threads
// splitting the terms, combined in double by BlockSum: the order differs from the CPU's, the
// accumulator does not.
template <typename S>
__global__ void SumReduceKernel(const S* x, S* out, int64_t out_elements, StridedIndex<1> kept,
                                StridedIndex<1> reduced, int64_t terms, bool mean) {
  for (int64_t o = blockIdx.x; o < out_elements; o += gridDim.x) {
    int64_t base[1];
    Offsets(kept, o, base);
    double acc = 0;
    for (int64_t r = threadIdx.x; r < terms; r += blockDim.x) {
      int64_t offset[1];
      Offsets(reduced, r, offset);
      acc += static_cast<double>(Load(x, base[0] + offset[0]));
    }
    acc = BlockSum(acc);
    if (threadIdx.x == 0) Store(out, o, static_cast<typename Compute<S>::type>(mean ? acc / static_cast<double>(terms) : acc));
  }
}

template <typename S>
__global__ void BroadcastBackKernel(const S* g, S* dx, int64_t n, StridedIndex<1> index, double divisor) {
  PDIST_GRID_STRIDE_LOOP(i, n) {
    int64_t offset[1];
    Offsets(index, i, offset);
    Store(dx, i, static_cast<typename Compute<S>::type>(static_cast<double>(Load(g, offset[0])) / divisor));
  }
}

template <typename S>
__global__ void ExtremeKernel(const S* x, S* out, int64_t out_elements, StridedIndex<1> kept, StridedIndex<1> reduced,
                              int64_t terms, bool max) {
  using C = typename Compute<S>::type;
  PDIST_GRID_STRIDE_LOOP(o, out_elements) {
    int64_t base[1];
    Offsets(kept, o, base);
    C acc = max ? -static_cast<C>(INFINITY) : static_cast<C>(INFINITY);
    for (int64_t r = 0; r < terms; ++r) {
      int64_t offset[1];
      Offsets(reduced, r, offset);
      const C v = Load(x, base[0] + offset[0]);
      if ((max ? v > acc : v < acc) || v != v) acc = v;
    }
    Store(out, o, acc);
  }
}

template <typename S>
__global__ void ExtremeGradKernel(const S* x, const S* out, const S* g, S* dx, int64_t out_elements,
                                  StridedIndex<1> kept, StridedIndex<1> reduced, int64_t terms) {
  using C = typename Compute<S>::type;
  PDIST_GRID_STRIDE_LOOP(o, out_elements) {
    int64_t base[1];
    Offsets(kept, o, base);
    const C extreme = Load(out, o);
    int64_t ties = 0;
    for (int64_t r = 0; r < terms; ++r) {
      int64_t offset[1];
      Offsets(reduced, r, offset);
      ties += Load(x, base[0] + offset[0]) == extreme ? 1 : 0;
    }
    const C share = ties > 0 ? Load(g, o) / static_cast<C>(ties) : C(0);
    for (int64_t r = 0; r < terms; ++r) {
      int64_t offset[1];
      Offsets(reduced, r, offset);
      const int64_t at = base[0] + offset[0];
      Store(dx, at, Load(x, at) == extreme ? share : C(0));
    }
  }
}

}  // namespace

cudaError_t LaunchExtreme(ElemType type, const void* x, void* out, int64_t out_elements, const StridedIndex<1>& kept,
                          const StridedIndex<1>& reduced, bool max, cudaStream_t stream) {
  if (out_elements == 0) return cudaSuccess;
  int64_t terms = 1;
  for (int d = 0; d < reduced.rank; ++d) terms *= reduced.shape[d];
  return ByType(type, [&](auto s) {
    using S = decltype(s);
    ExtremeKernel<S><<<Blocks(out_elements), kThreads, 0, stream>>>(static_cast<const S*>(x), static_cast<S*>(out),
                                                                     out_elements, kept, reduced, terms, max);
  });
}

cudaError_t LaunchExtremeGrad(ElemType type, const void* x, const void* out, const void* out_grad, void* x_grad,
                              int64_t out_elements, const StridedIndex<1>& kept, const StridedIndex<1>& reduced,
                              cudaStream_t stream) {
  if (out_elements == 0) return cudaSuccess;
  int64_t terms = 1;
  for (int d = 0; d < reduced.rank; ++d) terms *= reduced.shape[d];
  return ByType(type, [&](auto s) {
    using S = decltype(s);
    ExtremeGradKernel<S><<<Blocks(out_elements), kThreads, 0, stream>>>(
        static_cast<const S*>(x), static_cast<const S*>(out), static_cast<const S*>(out_grad), static_cast<S*>(x_grad),
        out_elements, kept, reduced, terms);
  });
}

cudaError_t LaunchSum(ElemType type, const void* x, void* out, int64_t out_elements, const StridedIndex<1>& kept,
                      const StridedIndex<1>& reduced, bool mean, cudaStream_t stream) {
  if (out_elements == 0) return cudaSuccess;
  int64_t terms = 1;
  for (int d = 0; d < reduced.rank; ++d) terms *= reduced.shape[d];
  return ByType(type, [&](auto s) {
    using S = decltype(s);
    if (terms >= kManyTerms) {
      SumReduceKernel<S><<<BlockEach(out_elements), kThreads, 0, stream>>>(
          static_cast<const S*>(x), static_cast<S*>(out), out_elements, kept, reduced, terms, mean);
      return;
    }
    SumKernel<S><<<Blocks(out_elements), kThreads, 0, stream>>>(static_cast<const S*>(x), static_cast<S*>(out),
                                                                 out_elements, kept, reduced, terms, mean);
  });
}

cudaError_t LaunchBroadcastBack(ElemType type, const void* out_grad, void* x_grad, int64_t n,
                                const StridedIndex<1>& index, double divisor, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  return ByType(type, [&](auto s) {
    using S = decltype(s);
    BroadcastBackKernel<S><<<Blocks(n), kThreads, 0, stream>>>(static_cast<const S*>(out_grad), static_cast<S*>(x_grad),
                                                                n, index, divisor);
  });
}

}  // namespace pdist::exec::cuda

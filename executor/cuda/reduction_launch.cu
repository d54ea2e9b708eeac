// Device side of sum, mean and their gradients. One thread per output element, summing its
// positions in row-major order in double: the CPU kernel's order and accumulator, so results
// agree to the last bit. (A tree reduction for long sums is the next step: this one is O(terms)
// per thread.)
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

template <typename S>
__global__ void BroadcastBackKernel(const S* g, S* dx, int64_t n, StridedIndex<1> index, double divisor) {
  PDIST_GRID_STRIDE_LOOP(i, n) {
    int64_t offset[1];
    Offsets(index, i, offset);
    Store(dx, i, static_cast<typename Compute<S>::type>(static_cast<double>(Load(g, offset[0])) / divisor));
  }
}

}  // namespace

cudaError_t LaunchSum(ElemType type, const void* x, void* out, int64_t out_elements, const StridedIndex<1>& kept,
                      const StridedIndex<1>& reduced, bool mean, cudaStream_t stream) {
  if (out_elements == 0) return cudaSuccess;
  int64_t terms = 1;
  for (int d = 0; d < reduced.rank; ++d) terms *= reduced.shape[d];
  return ByType(type, [&](auto s) {
    using S = decltype(s);
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

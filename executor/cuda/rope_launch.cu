// Device side of fused_rope and its gradient: one thread per element, the CPU's per-element
// rotation (executor/math/rope.h).
#include "executor/cuda/device_common.cuh"
#include "executor/cuda/launch.h"
#include "executor/math/rope.h"

namespace pdist::exec::cuda {
namespace {

template <typename S>
__global__ void RopeKernel(const S* x, S* out, int64_t n, int64_t heads, RopeLayout l,
                           const typename Compute<S>::type* sin, const typename Compute<S>::type* cos,
                           const int64_t* positions, bool transpose) {
  using C = typename Compute<S>::type;
  PDIST_GRID_STRIDE_LOOP(e, n) {
    const int64_t j = e % l.head_dim;
    const int64_t row = e / (heads * l.head_dim);  // the (b, s) row, in the tensor's order
    const int64_t b = l.time_major ? row % l.batch : row / l.seq;
    const int64_t s = l.time_major ? row / l.batch : row % l.seq;
    const int64_t table_row = (positions != nullptr ? positions[b * l.seq + s] : s) * l.head_dim;
    Store(out, e, math::RopeElement<S, C>(l, x + (e - j), sin + table_row, cos + table_row, j, transpose));
  }
}

}  // namespace

cudaError_t LaunchRope(ElemType type, const void* x, void* out, int64_t heads, const RopeLayout& layout,
                       const void* sin, const void* cos, const int64_t* positions, bool transpose, cudaStream_t stream) {
  const int64_t n = layout.batch * layout.seq * heads * layout.head_dim;
  if (n == 0) return cudaSuccess;
  return ByType(type, [&](auto s) {
    using S = decltype(s);
    using C = typename Compute<S>::type;
    RopeKernel<S><<<Blocks(n), kThreads, 0, stream>>>(static_cast<const S*>(x), static_cast<S*>(out), n, heads, layout,
                                                      static_cast<const C*>(sin), static_cast<const C*>(cos), positions,
                                                      transpose);
  });
}

}  // namespace pdist::exec::cuda

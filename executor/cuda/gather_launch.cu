// Device side of gather (rows copied as bits) and gather_grad (each source row sums its
// positions in increasing order, as the CPU does).
#include <cstdint>

#include "executor/cuda/device_common.cuh"
#include "executor/cuda/launch.h"

namespace pdist::exec::cuda {
namespace {

template <typename E>
__global__ void GatherKernel(const E* x, const int64_t* rows, E* out, int64_t outer, int64_t axis, int64_t n,
                             int64_t inner) {
  PDIST_GRID_STRIDE_LOOP(i, outer * n * inner) {
    const int64_t k = i % inner, j = (i / inner) % n, o = i / (inner * n);
    out[i] = x[(o * axis + rows[j]) * inner + k];
  }
}

template <typename S>
__global__ void GatherGradKernel(const int64_t* start, const int64_t* order, const S* g, S* dx, int64_t outer,
                                 int64_t axis, int64_t n, int64_t inner) {
  using C = typename Compute<S>::type;
  PDIST_GRID_STRIDE_LOOP(e, outer * axis * inner) {
    const int64_t k = e % inner, a = (e / inner) % axis, o = e / (inner * axis);
    C acc = C(0);
    for (int64_t p = start[a]; p < start[a + 1]; ++p) acc += Load(g, (o * n + order[p]) * inner + k);
    Store(dx, e, acc);
  }
}

template <typename E>
cudaError_t GatherOf(const void* x, const int64_t* rows, void* out, int64_t outer, int64_t axis, int64_t n,
                     int64_t inner, cudaStream_t stream) {
  GatherKernel<E><<<Blocks(outer * n * inner), kThreads, 0, stream>>>(static_cast<const E*>(x), rows,
                                                                      static_cast<E*>(out), outer, axis, n, inner);
  return cudaGetLastError();
}

}  // namespace

cudaError_t LaunchGather(int element_size, const void* x, const int64_t* rows, void* out, int64_t outer, int64_t axis,
                         int64_t n, int64_t inner, cudaStream_t stream) {
  if (outer * n * inner == 0) return cudaSuccess;
  switch (element_size) {
    case 1: return GatherOf<uint8_t>(x, rows, out, outer, axis, n, inner, stream);
    case 2: return GatherOf<uint16_t>(x, rows, out, outer, axis, n, inner, stream);
    case 4: return GatherOf<uint32_t>(x, rows, out, outer, axis, n, inner, stream);
    case 8: return GatherOf<uint64_t>(x, rows, out, outer, axis, n, inner, stream);
    default: return cudaErrorInvalidValue;
  }
}

cudaError_t LaunchGatherGrad(ElemType type, const int64_t* start, const int64_t* order, const void* out_grad,
                             void* x_grad, int64_t outer, int64_t axis, int64_t n, int64_t inner, cudaStream_t stream) {
  if (outer * axis * inner == 0) return cudaSuccess;
  return ByType(type, [&](auto s) {
    using S = decltype(s);
    GatherGradKernel<S><<<Blocks(outer * axis * inner), kThreads, 0, stream>>>(
        start, order, static_cast<const S*>(out_grad), static_cast<S*>(x_grad), outer, axis, n, inner);
  });
}

}  // namespace pdist::exec::cuda

// Device side of count_nonfinite (a grid-stride count, summed per block, added atomically) and
// update_loss_scaling (the shared rule, executor/math/loss_scaling.h, on one thread).
#include "executor/cuda/device_common.cuh"
#include "executor/cuda/launch.h"
#include "executor/math/loss_scaling.h"

namespace pdist::exec::cuda {
namespace {

template <typename S>
__global__ void CountNonfiniteKernel(const S* x, int64_t n, unsigned long long* count) {
  unsigned long long mine = 0;
  PDIST_GRID_STRIDE_LOOP(i, n) {
    const double v = static_cast<double>(Load(x, i));
    mine += (v - v != 0 || v != v) ? 1 : 0;  // inf - inf and nan - nan are nan
  }
  const double block = BlockSum(static_cast<double>(mine));
  if (threadIdx.x == 0 && block > 0) atomicAdd(count, static_cast<unsigned long long>(block));
}

__global__ void StoreCountKernel(const unsigned long long* count, void* out, ElemType out_type) {
  WriteScalar(out, out_type, static_cast<double>(*count));
}

__global__ void UpdateLossScalingKernel(LossScalingOperands o, math::LossScalingRule rule) {
  const math::LossScalingState s = math::UpdateLossScaling(
      {ReadScalar(o.in[0]), ReadScalar(o.in[1]), ReadScalar(o.in[2]), ReadScalar(o.in[3]), ReadScalar(o.in[4])}, rule);
  const double values[5] = {s.found_inf, s.scale, s.good_steps, s.bad_steps, s.skipped_steps};
  for (int r = 0; r < 5; ++r) WriteScalar(o.out[r], o.out_type[r], values[r]);
}

}  // namespace

cudaError_t LaunchCountNonfinite(ElemType type, const void* x, int64_t n, void* out, ElemType out_type, void* scratch,
                                 cudaStream_t stream) {
  auto* count = static_cast<unsigned long long*>(scratch);
  if (cudaError_t e = cudaMemsetAsync(count, 0, sizeof(*count), stream); e != cudaSuccess) return e;
  if (n > 0) {
    const cudaError_t e = ByType(type, [&](auto s) {
      using S = decltype(s);
      CountNonfiniteKernel<S><<<Blocks(n), kThreads, 0, stream>>>(static_cast<const S*>(x), n, count);
    });
    if (e != cudaSuccess) return e;
  }
  StoreCountKernel<<<1, 1, 0, stream>>>(count, out, out_type);
  return cudaGetLastError();
}

cudaError_t LaunchUpdateLossScaling(const LossScalingOperands& operands, int64_t incr_every, int64_t decr_every,
                                    double incr_ratio, double decr_ratio, cudaStream_t stream) {
  UpdateLossScalingKernel<<<1, 1, 0, stream>>>(operands, {incr_every, decr_every, incr_ratio, decr_ratio});
  return cudaGetLastError();
}

}  // namespace pdist::exec::cuda

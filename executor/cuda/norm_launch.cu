// Device side of layer_norm, rms_norm and their gradients: one block per row (strided over the
// grid), the row's sums by BlockSum; the parameter gradients by ColumnPartials and
// ColumnTotalsKernel (the rows split into chunks, executor/cuda/column_split.h). x, out and their
// gradients are of storage type S; scale, bias and their gradients of P (S, or f32 for a bf16/f16
// S: amp o2's norms); the statistics of C, the type the math runs in (f32 for bf16/f16,
// ir::ComputeDtype).
#include <type_traits>

#include "executor/cuda/device_common.cuh"
#include "executor/cuda/launch.h"
#include "executor/math/scalar_array.h"

namespace pdist::exec::cuda {
namespace {

template <typename C>
__device__ C Rstd(C variance, double eps) {
  return C(1) / math::scalar::Sqrt(variance + static_cast<C>(eps));
}

template <typename S, typename P, typename C = typename Compute<S>::type>
__global__ void LayerNormKernel(const S* x, const P* scale, const P* bias, S* y, C* mean, C* variance, int64_t rows,
                                int64_t cols, double eps) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const S* xr = x + r * cols;
    C sum = C(0);
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) sum += Load(xr, c);
    const C mu = BlockSum(sum) / static_cast<C>(cols);
    // Two passes (centre, then square), as the CPU: accurate when |mean| >> std.
    C squares = C(0);
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
      const C d = Load(xr, c) - mu;
      squares += d * d;
    }
    const C var = BlockSum(squares) / static_cast<C>(cols);
    const C rstd = Rstd(var, eps);
    if (threadIdx.x == 0) {
      Store(mean, r, mu);
      Store(variance, r, var);
    }
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
      C out = (Load(xr, c) - mu) * rstd;
      if (scale != nullptr) out *= Load(scale, c);
      if (bias != nullptr) out += Load(bias, c);
      Store(y, r * cols + c, out);
    }
  }
}

// With xhat = (x - mean)·rstd and gs = out_grad·scale: dx = rstd·(gs - mean(gs) - xhat·mean(gs·xhat)).
template <typename S, typename P, typename C = typename Compute<S>::type>
__global__ void LayerNormGradKernel(const S* x, const P* scale, const C* mean, const C* variance, const S* g, S* dx,
                                    int64_t rows, int64_t cols, double eps) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const int64_t o = r * cols;
    const C mu = Load(mean, r), rstd = Rstd(Load(variance, r), eps);
    C gs_sum = C(0), gs_xhat_sum = C(0);
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
      const C gs = scale != nullptr ? Load(g, o + c) * Load(scale, c) : Load(g, o + c);
      gs_sum += gs;
      gs_xhat_sum += gs * (Load(x, o + c) - mu) * rstd;
    }
    const C gs_mean = BlockSum(gs_sum) / static_cast<C>(cols);
    const C gs_xhat_mean = BlockSum(gs_xhat_sum) / static_cast<C>(cols);
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
      const C gs = scale != nullptr ? Load(g, o + c) * Load(scale, c) : Load(g, o + c);
      const C xhat = (Load(x, o + c) - mu) * rstd;
      Store(dx, o + c, rstd * (gs - gs_mean - xhat * gs_xhat_mean));
    }
  }
}

// The parameter gradients' partial sums (ColumnPartials): Σ g·xhat for the scale, Σ g for the bias.
template <typename S, typename C = typename Compute<S>::type>
__global__ void LayerNormParamGradKernel(const S* x, const C* mean, const C* variance, const S* g, int64_t rows,
                                         int64_t cols, double eps, int64_t chunk_rows, C* workspace) {
  ColumnPartials<C>(
      rows, cols, chunk_rows,
      [&](int64_t r, int64_t c) {
        const C gr = Load(g, r * cols + c);
        return SumPair<C>{gr * (Load(x, r * cols + c) - Load(mean, r)) * Rstd(Load(variance, r), eps), gr};
      },
      workspace);
}

template <typename S, typename P, typename C = typename Compute<S>::type>
__global__ void RmsNormKernel(const S* x, const P* scale, S* y, C* invvar, int64_t rows, int64_t cols, double eps) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const S* xr = x + r * cols;
    C squares = C(0);
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) squares += Load(xr, c) * Load(xr, c);
    const C inv = Rstd(BlockSum(squares) / static_cast<C>(cols), eps);
    if (threadIdx.x == 0) Store(invvar, r, inv);
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) Store(y, r * cols + c, Load(xr, c) * inv * Load(scale, c));
  }
}

template <typename S, typename P, typename C = typename Compute<S>::type>
__global__ void RmsNormGradKernel(const S* x, const P* scale, const C* invvar, const S* g, S* dx, int64_t rows,
                                  int64_t cols) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const int64_t o = r * cols;
    const C inv = Load(invvar, r);
    C sum = C(0);
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) sum += Load(g, o + c) * Load(scale, c) * Load(x, o + c);
    const C gs_xhat_mean = BlockSum(sum) / static_cast<C>(cols) * inv;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
      const C gs = Load(g, o + c) * Load(scale, c);
      Store(dx, o + c, inv * (gs - Load(x, o + c) * inv * gs_xhat_mean));
    }
  }
}

template <typename S, typename C = typename Compute<S>::type>
__global__ void RmsNormScaleGradKernel(const S* x, const C* invvar, const S* g, int64_t rows, int64_t cols,
                                       int64_t chunk_rows, C* workspace) {
  ColumnPartials<C>(
      rows, cols, chunk_rows,
      [&](int64_t r, int64_t c) {
        return SumPair<C>{Load(g, r * cols + c) * Load(x, r * cols + c) * Load(invvar, r), C(0)};
      },
      workspace);
}

// Calls fn(S{}, P{}): x's storage type S and the parameters' P, which is S or, for a bf16/f16
// x, float. Any other pair is refused (cudaErrorInvalidValue).
template <typename Fn>
cudaError_t ByNormTypes(ElemType type, ElemType param_type, Fn&& fn) {
  if (param_type == type) return ByType(type, [&](auto s) { fn(s, s); });
  if (param_type != ElemType::kF32 || (type != ElemType::kBF16 && type != ElemType::kF16)) return cudaErrorInvalidValue;
  return ByType(type, [&](auto s) {
    using S = decltype(s);
    if constexpr (!std::is_same_v<typename Compute<S>::type, S>) fn(s, float{});
  });
}

}  // namespace

cudaError_t LaunchRmsNorm(ElemType type, ElemType param_type, const void* x, const void* scale, void* y, void* invvar,
                          int64_t rows, int64_t cols, double eps, cudaStream_t stream) {
  if (rows == 0 || cols == 0) return cudaSuccess;
  return ByNormTypes(type, param_type, [&](auto s, auto p) {
    using S = decltype(s);
    using P = decltype(p);
    using C = typename Compute<S>::type;
    RmsNormKernel<S, P><<<BlockEach(rows), kThreads, 0, stream>>>(static_cast<const S*>(x), static_cast<const P*>(scale),
                                                                   static_cast<S*>(y), static_cast<C*>(invvar), rows,
                                                                   cols, eps);
  });
}

cudaError_t LaunchRmsNormGrad(ElemType type, ElemType param_type, const void* x, const void* scale, const void* invvar,
                              const void* out_grad, void* x_grad, void* scale_grad, int64_t rows, int64_t cols,
                              void* workspace, cudaStream_t stream) {
  if (cols == 0) return cudaSuccess;
  return ByNormTypes(type, param_type, [&](auto s, auto p) {
    using S = decltype(s);
    using P = decltype(p);
    using C = typename Compute<S>::type;
    if (rows == 0) {  // no rows: a scale gradient of zeros, as the CPU's column sums give
      ColumnTotalsKernel<C, P><<<Blocks(cols), kThreads, 0, stream>>>(0, cols, nullptr, static_cast<P*>(scale_grad),
                                                                       nullptr);
      return;
    }
    RmsNormGradKernel<S, P><<<BlockEach(rows), kThreads, 0, stream>>>(
        static_cast<const S*>(x), static_cast<const P*>(scale), static_cast<const C*>(invvar),
        static_cast<const S*>(out_grad), static_cast<S*>(x_grad), rows, cols);
    const ColumnSplit split = SplitColumns(rows, cols);
    C* sums = static_cast<C*>(workspace);
    RmsNormScaleGradKernel<S><<<ColumnPartialsGrid(split), kThreads, 0, stream>>>(
        static_cast<const S*>(x), static_cast<const C*>(invvar), static_cast<const S*>(out_grad), rows, cols,
        split.chunk_rows, sums);
    ColumnTotalsKernel<C, P><<<Blocks(cols), kThreads, 0, stream>>>(split.chunks, cols, sums,
                                                                     static_cast<P*>(scale_grad), nullptr);
  });
}

cudaError_t LaunchLayerNorm(ElemType type, ElemType param_type, const void* x, const void* scale, const void* bias,
                            void* y, void* mean, void* variance, int64_t rows, int64_t cols, double eps,
                            cudaStream_t stream) {
  if (rows == 0 || cols == 0) return cudaSuccess;
  return ByNormTypes(type, param_type, [&](auto s, auto p) {
    using S = decltype(s);
    using P = decltype(p);
    using C = typename Compute<S>::type;
    LayerNormKernel<S, P><<<BlockEach(rows), kThreads, 0, stream>>>(
        static_cast<const S*>(x), static_cast<const P*>(scale), static_cast<const P*>(bias), static_cast<S*>(y),
        static_cast<C*>(mean), static_cast<C*>(variance), rows, cols, eps);
  });
}

cudaError_t LaunchLayerNormGrad(ElemType type, ElemType param_type, const void* x, const void* scale, const void* mean,
                                const void* variance, const void* out_grad, void* x_grad, void* scale_grad,
                                void* bias_grad, int64_t rows, int64_t cols, double eps, void* workspace,
                                cudaStream_t stream) {
  if (cols == 0) return cudaSuccess;
  return ByNormTypes(type, param_type, [&](auto s, auto p) {
    using S = decltype(s);
    using P = decltype(p);
    using C = typename Compute<S>::type;
    if (rows == 0) {  // no rows: parameter gradients of zeros, as the CPU's column sums give
      if (scale_grad != nullptr || bias_grad != nullptr) {
        ColumnTotalsKernel<C, P><<<Blocks(cols), kThreads, 0, stream>>>(0, cols, nullptr, static_cast<P*>(scale_grad),
                                                                         static_cast<P*>(bias_grad));
      }
      return;
    }
    LayerNormGradKernel<S, P><<<BlockEach(rows), kThreads, 0, stream>>>(
        static_cast<const S*>(x), static_cast<const P*>(scale), static_cast<const C*>(mean),
        static_cast<const C*>(variance), static_cast<const S*>(out_grad), static_cast<S*>(x_grad), rows, cols, eps);
    if (scale_grad != nullptr || bias_grad != nullptr) {
      const ColumnSplit split = SplitColumns(rows, cols);
      C* sums = static_cast<C*>(workspace);
      LayerNormParamGradKernel<S><<<ColumnPartialsGrid(split), kThreads, 0, stream>>>(
          static_cast<const S*>(x), static_cast<const C*>(mean), static_cast<const C*>(variance),
          static_cast<const S*>(out_grad), rows, cols, eps, split.chunk_rows, sums);
      ColumnTotalsKernel<C, P><<<Blocks(cols), kThreads, 0, stream>>>(
          split.chunks, cols, sums, static_cast<P*>(scale_grad), static_cast<P*>(bias_grad));
    }
  });
}

}  // namespace pdist::exec::cuda

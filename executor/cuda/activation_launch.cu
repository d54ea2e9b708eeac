// Device side of the activation kernels and scale: the CPU's math (executor/math/activation.h)
// instantiated with ScalarArray, one element per thread.
#include <type_traits>

#include "executor/cuda/device_common.cuh"
#include "executor/cuda/launch.h"
#include "executor/math/activation.h"
#include "executor/math/scalar_array.h"

namespace pdist::exec::cuda {
namespace {

template <typename Act, typename S>
__global__ void UnaryKernel(const S* x, S* out, int64_t n) {
  using A = math::ScalarArray<typename Compute<S>::type>;
  PDIST_GRID_STRIDE_LOOP(i, n) { Store(out, i, A(Act::Forward(A(Load(x, i)))).value()); }
}

template <typename Act, typename S>
__global__ void UnaryGradKernel(const S* saved, const S* g, S* dx, int64_t n) {
  using A = math::ScalarArray<typename Compute<S>::type>;
  PDIST_GRID_STRIDE_LOOP(i, n) { Store(dx, i, A(Act::Backward(A(Load(saved, i)), A(Load(g, i)))).value()); }
}

template <typename S>
__global__ void ScaleKernel(const S* x, S* out, int64_t n, double scale, double bias, bool bias_after_scale) {
  using C = typename Compute<S>::type;
  const C s = static_cast<C>(scale), b = static_cast<C>(bias);
  PDIST_GRID_STRIDE_LOOP(i, n) { Store(out, i, bias_after_scale ? Load(x, i) * s + b : (Load(x, i) + b) * s); }
}

// A double as storage type D: bf16 and f16 through f32, as Eigen converts them on the CPU.
template <typename D>
__device__ D FromDouble(double v) {
  if constexpr (std::is_same_v<D, __nv_bfloat16> || std::is_same_v<D, __half>) {
    return static_cast<D>(static_cast<float>(v));
  } else {
    return static_cast<D>(v);
  }
}

template <typename S, typename D>
__global__ void CastKernel(const S* x, D* out, int64_t n) {
  PDIST_GRID_STRIDE_LOOP(i, n) { out[i] = FromDouble<D>(static_cast<double>(static_cast<float>(x[i]))); }
}

template <typename S, typename D>
__global__ void CastWideKernel(const S* x, D* out, int64_t n) {
  PDIST_GRID_STRIDE_LOOP(i, n) { out[i] = FromDouble<D>(static_cast<double>(x[i])); }
}

template <typename Fn>
cudaError_t ByActivation(UnaryOp op, Fn&& fn) {
  switch (op) {
    case UnaryOp::kRelu: return fn(math::Relu{});
    case UnaryOp::kGeluErf: return fn(math::GeluErf{});
    case UnaryOp::kGeluTanh: return fn(math::GeluTanh{});
    case UnaryOp::kSilu: return fn(math::Silu{});
    case UnaryOp::kTanh: return fn(math::Tanh{});
    case UnaryOp::kExp: return fn(math::Exp{});
    case UnaryOp::kSigmoid: return fn(math::Sigmoid{});
    case UnaryOp::kErf: return fn(math::Erf{});
    case UnaryOp::kSqrt: return fn(math::Sqrt{});
    case UnaryOp::kRsqrt: return fn(math::Rsqrt{});
  }
  return cudaErrorInvalidValue;
}

}  // namespace

cudaError_t LaunchUnary(UnaryOp op, ElemType type, const void* x, void* out, int64_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  return ByActivation(op, [&](auto act) {
    return ByType(type, [&](auto s) {
      using S = decltype(s);
      UnaryKernel<decltype(act), S><<<Blocks(n), kThreads, 0, stream>>>(static_cast<const S*>(x), static_cast<S*>(out), n);
    });
  });
}

cudaError_t LaunchUnaryGrad(UnaryOp op, ElemType type, const void* saved, const void* g, void* dx, int64_t n,
                            cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  return ByActivation(op, [&](auto act) {
    return ByType(type, [&](auto s) {
      using S = decltype(s);
      UnaryGradKernel<decltype(act), S><<<Blocks(n), kThreads, 0, stream>>>(
          static_cast<const S*>(saved), static_cast<const S*>(g), static_cast<S*>(dx), n);
    });
  });
}

cudaError_t LaunchScale(ElemType type, const void* x, void* out, int64_t n, double scale, double bias,
                        bool bias_after_scale, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  return ByType(type, [&](auto s) {
    using S = decltype(s);
    ScaleKernel<S><<<Blocks(n), kThreads, 0, stream>>>(static_cast<const S*>(x), static_cast<S*>(out), n, scale, bias,
                                                       bias_after_scale);
  });
}

cudaError_t LaunchCast(ElemType from, ElemType to, const void* x, void* out, int64_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  return ByType(from, [&](auto s) {
    using S = decltype(s);
    ByType(to, [&](auto d) {
      using D = decltype(d);
      // bf16 and f16 widen exactly through f32 (CUDA has no direct conversion of them to double).
      if constexpr (std::is_same_v<S, __nv_bfloat16> || std::is_same_v<S, __half>) {
        CastKernel<S, D><<<Blocks(n), kThreads, 0, stream>>>(static_cast<const S*>(x), static_cast<D*>(out), n);
      } else {
        CastWideKernel<S, D><<<Blocks(n), kThreads, 0, stream>>>(static_cast<const S*>(x), static_cast<D*>(out), n);
      }
    });
  });
}

}  // namespace pdist::exec::cuda

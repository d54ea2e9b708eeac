// Device side of adamw, sgd and momentum: one element per thread; the learning rate, the beta
// powers and skip_update read from device scalars (adamw's factors in double, as the CPU kernel
// computes them on the host). The gradient has its own type: an f32 master weight is updated
// from its bf16/f16 gradient.
#include "executor/cuda/device_common.cuh"
#include "executor/cuda/launch.h"
#include "executor/math/scalar_array.h"

namespace pdist::exec::cuda {
namespace {

template <typename S, typename G>
__global__ void AdamWKernel(const S* param, const G* grad, ScalarRef lr_ref, const S* m1_in, const S* m2_in,
                            ScalarRef beta1_pow_ref, ScalarRef beta2_pow_ref, ScalarRef skip_ref, S* param_out,
                            S* m1_out, S* m2_out, void* beta1_pow_out, void* beta2_pow_out, ElemType pow_type, int64_t n,
                            AdamWConfig cfg) {
  using C = typename Compute<S>::type;
  const bool skip = skip_ref.data != nullptr && ReadScalar(skip_ref) > 0;
  const double beta1_pow = ReadScalar(beta1_pow_ref), beta2_pow = ReadScalar(beta2_pow_ref);
  const double lr = ReadScalar(lr_ref) * cfg.lr_ratio;
  const double decay = cfg.with_decay ? 1.0 - lr * cfg.coeff : 1.0;
  const double lr_t = lr * math::scalar::Sqrt(1.0 - beta2_pow) / (1.0 - beta1_pow);
  const double eps_t = cfg.epsilon * math::scalar::Sqrt(1.0 - beta2_pow);
  PDIST_GRID_STRIDE_LOOP(i, n) {
    if (skip) {
      param_out[i] = param[i];
      m1_out[i] = m1_in[i];
      m2_out[i] = m2_in[i];
      continue;
    }
    const C g = static_cast<C>(Load(grad, i));
    const C m1 = static_cast<C>(cfg.beta1) * Load(m1_in, i) + static_cast<C>(1 - cfg.beta1) * g;
    const C m2 = static_cast<C>(cfg.beta2) * Load(m2_in, i) + static_cast<C>(1 - cfg.beta2) * g * g;
    Store(m1_out, i, m1);
    Store(m2_out, i, m2);
    Store(param_out, i,
          static_cast<C>(decay) * Load(param, i) - static_cast<C>(lr_t) * m1 / (math::scalar::Sqrt(m2) + static_cast<C>(eps_t)));
  }
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    WriteScalar(beta1_pow_out, pow_type, skip ? beta1_pow : beta1_pow * cfg.beta1);
    WriteScalar(beta2_pow_out, pow_type, skip ? beta2_pow : beta2_pow * cfg.beta2);
  }
}

template <typename S, typename G>
__global__ void SgdKernel(const S* param, const G* grad, ScalarRef lr_ref, ScalarRef skip_ref, S* param_out, int64_t n) {
  using C = typename Compute<S>::type;
  const bool skip = skip_ref.data != nullptr && ReadScalar(skip_ref) > 0;
  const C lr = static_cast<C>(ReadScalar(lr_ref));
  PDIST_GRID_STRIDE_LOOP(i, n) {
    if (skip) {
      param_out[i] = param[i];
      continue;
    }
    Store(param_out, i, Load(param, i) - lr * static_cast<C>(Load(grad, i)));
  }
}

template <typename S, typename G>
__global__ void MomentumKernel(const S* param, const G* grad, const S* velocity, ScalarRef lr_ref, ScalarRef skip_ref,
                               S* param_out, S* velocity_out, int64_t n, MomentumConfig cfg) {
  using C = typename Compute<S>::type;
  const bool skip = skip_ref.data != nullptr && ReadScalar(skip_ref) > 0;
  const C lr = static_cast<C>(ReadScalar(lr_ref)), mu = static_cast<C>(cfg.mu);
  const C coeff = static_cast<C>(cfg.regularization_coeff);
  PDIST_GRID_STRIDE_LOOP(i, n) {
    if (skip) {
      param_out[i] = param[i];
      velocity_out[i] = velocity[i];
      continue;
    }
    const C p = Load(param, i);
    const C g = static_cast<C>(Load(grad, i)) + coeff * p;
    const C v = mu * Load(velocity, i) + g;
    Store(velocity_out, i, v);
    Store(param_out, i, cfg.nesterov ? p - lr * (g + mu * v) : p - lr * v);
  }
}

// Calls fn(S{}, G{}) with the parameter's storage type S and the gradient's G: G = S, or the
// bf16/f16 gradient of an f32 master weight (mixed precision's update, checked by the host).
template <typename Fn>
cudaError_t ByParamAndGrad(ElemType type, ElemType grad_type, Fn&& fn) {
  if (grad_type == type) return ByType(type, [&](auto s) { fn(s, s); });
  if (type != ElemType::kF32) return cudaErrorInvalidValue;
  switch (grad_type) {
    case ElemType::kBF16: fn(float{}, __nv_bfloat16{}); break;
    case ElemType::kF16: fn(float{}, __half{}); break;
    default: return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

}  // namespace

cudaError_t LaunchSgd(ElemType type, ElemType grad_type, const void* param, const void* grad, ScalarRef learning_rate,
                      ScalarRef skip_update, void* param_out, int64_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  return ByParamAndGrad(type, grad_type, [&](auto s, auto g) {
    using S = decltype(s);
    using G = decltype(g);
    SgdKernel<S, G><<<Blocks(n), kThreads, 0, stream>>>(static_cast<const S*>(param), static_cast<const G*>(grad),
                                                        learning_rate, skip_update, static_cast<S*>(param_out), n);
  });
}

cudaError_t LaunchMomentum(ElemType type, ElemType grad_type, const void* param, const void* grad, const void* velocity,
                           ScalarRef learning_rate, ScalarRef skip_update, void* param_out, void* velocity_out,
                           int64_t n, const MomentumConfig& config, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  return ByParamAndGrad(type, grad_type, [&](auto s, auto g) {
    using S = decltype(s);
    using G = decltype(g);
    MomentumKernel<S, G><<<Blocks(n), kThreads, 0, stream>>>(
        static_cast<const S*>(param), static_cast<const G*>(grad), static_cast<const S*>(velocity), learning_rate,
        skip_update, static_cast<S*>(param_out), static_cast<S*>(velocity_out), n, config);
  });
}

cudaError_t LaunchAdamW(ElemType type, ElemType grad_type, const void* param, const void* grad, ScalarRef learning_rate,
                        const void* moment1, const void* moment2, ScalarRef beta1_pow, ScalarRef beta2_pow,
                        ScalarRef skip_update, void* param_out, void* moment1_out, void* moment2_out,
                        void* beta1_pow_out, void* beta2_pow_out, ElemType pow_type, int64_t n,
                        const AdamWConfig& config, cudaStream_t stream) {
  return ByParamAndGrad(type, grad_type, [&](auto s, auto g) {
    using S = decltype(s);
    using G = decltype(g);
    // At least one block, so that the beta powers are written for an empty parameter too.
    AdamWKernel<S, G><<<Blocks(n), kThreads, 0, stream>>>(
        static_cast<const S*>(param), static_cast<const G*>(grad), learning_rate, static_cast<const S*>(moment1),
        static_cast<const S*>(moment2), beta1_pow, beta2_pow, skip_update, static_cast<S*>(param_out),
        static_cast<S*>(moment1_out), static_cast<S*>(moment2_out), beta1_pow_out, beta2_pow_out, pow_type, n, config);
  });
}

}  // namespace pdist::exec::cuda

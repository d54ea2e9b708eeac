// Device side of sgd, momentum, adamw and their merged forms: one element per thread (merged: a
// block per 4,096 elements of one of up to 24 parameters per launch); the learning rate, the beta
// powers and skip_update read from device scalars (adamw's factors in double, as the CPU kernel
// computes them on the host). The gradient has its own type: an f32 master weight is updated
// from its bf16/f16 gradient.
#include "executor/cuda/device_common.cuh"
#include "executor/cuda/launch.h"
#include "executor/math/scalar_array.h"

namespace pdist::exec::cuda {
namespace {

// adamw's step-dependent factors, in double from the device scalars, as the CPU computes them.
struct AdamWStep {
  bool skip;
  double beta1_pow, beta2_pow, decay, lr_t, eps_t;
};
__device__ AdamWStep AdamWStepOf(ScalarRef lr_ref, ScalarRef beta1_pow_ref, ScalarRef beta2_pow_ref, ScalarRef skip_ref,
                                 const AdamWConfig& cfg) {
  AdamWStep s;
  s.skip = skip_ref.data != nullptr && ReadScalar(skip_ref) > 0;
  s.beta1_pow = ReadScalar(beta1_pow_ref);
  s.beta2_pow = ReadScalar(beta2_pow_ref);
  const double lr = ReadScalar(lr_ref) * cfg.lr_ratio;
  s.decay = cfg.with_decay ? 1.0 - lr * cfg.coeff : 1.0;
  s.lr_t = lr * math::scalar::Sqrt(1.0 - s.beta2_pow) / (1.0 - s.beta1_pow);
  s.eps_t = cfg.epsilon * math::scalar::Sqrt(1.0 - s.beta2_pow);
  return s;
}

// Element i of one parameter's update (or its copy, for a skipped step); the new parameter
// element as stored.
template <typename S, typename G>
__device__ S AdamWElement(const S* param, const G* grad, const S* m1_in, const S* m2_in, S* param_out, S* m1_out,
                          S* m2_out, int64_t i, const AdamWStep& s, const AdamWConfig& cfg) {
  using C = typename Compute<S>::type;
  if (s.skip) {
    m1_out[i] = m1_in[i];
    m2_out[i] = m2_in[i];
    return param_out[i] = param[i];
  }
  const C g = static_cast<C>(Load(grad, i));
  const C m1 = static_cast<C>(cfg.beta1) * Load(m1_in, i) + static_cast<C>(1 - cfg.beta1) * g;
  const C m2 = static_cast<C>(cfg.beta2) * Load(m2_in, i) + static_cast<C>(1 - cfg.beta2) * (g * g);
  Store(m1_out, i, m1);
  Store(m2_out, i, m2);
  return param_out[i] = static_cast<S>(static_cast<C>(s.decay) * Load(param, i) -
                                       static_cast<C>(s.lr_t) * m1 / (math::scalar::Sqrt(m2) + static_cast<C>(s.eps_t)));
}

// multi_precision's rounded copy of a new master element: the cast kernel's conversion (an f32
// master, a bf16/f16 gradient type G; LaunchCast's FromDouble of an f32 value is this cast).
template <typename S, typename G>
__device__ void StoreRounded(void* rounded_out, int64_t i, S value) {
  if (rounded_out != nullptr) static_cast<G*>(rounded_out)[i] = static_cast<G>(value);
}

// The beta powers after the step (unchanged by a skipped one).
__device__ void WriteBetaPowers(void* beta1_pow_out, void* beta2_pow_out, BetaPowTypes pow_types, const AdamWStep& s,
                                const AdamWConfig& cfg) {
  WriteScalar(beta1_pow_out, pow_types.beta1, s.skip ? s.beta1_pow : s.beta1_pow * cfg.beta1);
  WriteScalar(beta2_pow_out, pow_types.beta2, s.skip ? s.beta2_pow : s.beta2_pow * cfg.beta2);
}

template <typename S, typename G>
__global__ void AdamWKernel(const S* param, const G* grad, ScalarRef lr_ref, const S* m1_in, const S* m2_in,
                            ScalarRef beta1_pow_ref, ScalarRef beta2_pow_ref, ScalarRef skip_ref, S* param_out,
                            S* m1_out, S* m2_out, void* beta1_pow_out, void* beta2_pow_out, BetaPowTypes pow_types, int64_t n,
                            AdamWConfig cfg) {
  const AdamWStep s = AdamWStepOf(lr_ref, beta1_pow_ref, beta2_pow_ref, skip_ref, cfg);
  PDIST_GRID_STRIDE_LOOP(i, n) { AdamWElement(param, grad, m1_in, m2_in, param_out, m1_out, m2_out, i, s, cfg); }
  if (blockIdx.x == 0 && threadIdx.x == 0) WriteBetaPowers(beta1_pow_out, beta2_pow_out, pow_types, s, cfg);
}

// sgd's element i (or its copy, for a skipped step); the new parameter element as stored.
template <typename S, typename G>
__device__ S SgdElement(const S* param, const G* grad, S* param_out, int64_t i, bool skip,
                        typename Compute<S>::type lr) {
  using C = typename Compute<S>::type;
  if (skip) return param_out[i] = param[i];
  return param_out[i] = static_cast<S>(Load(param, i) - lr * static_cast<C>(Load(grad, i)));
}

template <typename S, typename G>
__global__ void SgdKernel(const S* param, const G* grad, ScalarRef lr_ref, ScalarRef skip_ref, S* param_out, int64_t n) {
  using C = typename Compute<S>::type;
  const bool skip = skip_ref.data != nullptr && ReadScalar(skip_ref) > 0;
  const C lr = static_cast<C>(ReadScalar(lr_ref));
  PDIST_GRID_STRIDE_LOOP(i, n) { SgdElement(param, grad, param_out, i, skip, lr); }
}

// momentum's element i (or its copy, for a skipped step); the new parameter element as stored.
template <typename S, typename G>
__device__ S MomentumElement(const S* param, const G* grad, const S* velocity, S* param_out, S* velocity_out,
                             int64_t i, bool skip, typename Compute<S>::type lr, const MomentumConfig& cfg) {
  using C = typename Compute<S>::type;
  if (skip) {
    velocity_out[i] = velocity[i];
    return param_out[i] = param[i];
  }
  const C mu = static_cast<C>(cfg.mu), coeff = static_cast<C>(cfg.regularization_coeff);
  const C p = Load(param, i);
  const C g = static_cast<C>(Load(grad, i)) + coeff * p;
  const C v = mu * Load(velocity, i) + g;
  Store(velocity_out, i, v);
  return param_out[i] = static_cast<S>(cfg.nesterov ? p - lr * (g + mu * v) : p - lr * v);
}

template <typename S, typename G>
__global__ void MomentumKernel(const S* param, const G* grad, const S* velocity, ScalarRef lr_ref, ScalarRef skip_ref,
                               S* param_out, S* velocity_out, int64_t n, MomentumConfig cfg) {
  using C = typename Compute<S>::type;
  const bool skip = skip_ref.data != nullptr && ReadScalar(skip_ref) > 0;
  const C lr = static_cast<C>(ReadScalar(lr_ref));
  PDIST_GRID_STRIDE_LOOP(i, n) { MomentumElement(param, grad, velocity, param_out, velocity_out, i, skip, lr, cfg); }
}

// Merged launches: up to kMergedUpdateTensors parameters per launch, their pointers in the
// kernel's arguments; parameter t owns blocks [first_block[t], first_block[t + 1]), a block per
// kMergedChunk of its elements (at least one, so that adamw's beta powers are written for an
// empty parameter too).
constexpr int64_t kMergedChunk = int64_t{kThreads} * 16;

template <typename Tensors>
struct MergedBatch {
  Tensors tensors[kMergedUpdateTensors];
  int64_t first_block[kMergedUpdateTensors + 1];
  int count;
};

// The parameter block `block` works on, and the elements [begin, end) it updates.
struct BlockShare {
  int tensor;
  int64_t begin, end;
};
template <typename Tensors>
__device__ BlockShare ShareOf(const MergedBatch<Tensors>& batch, int64_t block) {
  int t = 0;
  while (t + 1 < batch.count && batch.first_block[t + 1] <= block) ++t;
  const int64_t begin = (block - batch.first_block[t]) * kMergedChunk, n = batch.tensors[t].n;
  return {t, begin, begin + kMergedChunk < n ? begin + kMergedChunk : n};
}

// Calls launch(batch, blocks) for each batch of up to kMergedUpdateTensors of `tensors`.
template <typename Tensors, typename Launch>
cudaError_t ForEachBatch(const Tensors* tensors, int64_t count, Launch&& launch) {
  for (int64_t first = 0; first < count; first += kMergedUpdateTensors) {
    MergedBatch<Tensors> batch{};
    batch.count = static_cast<int>(count - first < kMergedUpdateTensors ? count - first : kMergedUpdateTensors);
    for (int t = 0; t < batch.count; ++t) {
      batch.tensors[t] = tensors[first + t];
      const int64_t blocks = (batch.tensors[t].n + kMergedChunk - 1) / kMergedChunk;
      batch.first_block[t + 1] = batch.first_block[t] + (blocks > 0 ? blocks : 1);
    }
    const int64_t blocks = batch.first_block[batch.count];
    if (blocks > 0x7fffffff) return cudaErrorInvalidValue;
    const cudaError_t launched = launch(batch, static_cast<unsigned>(blocks));
    if (launched != cudaSuccess) return launched;
  }
  return cudaSuccess;
}

template <typename S, typename G>
__global__ void MergedAdamWKernel(const __grid_constant__ MergedBatch<AdamWTensors> batch, ScalarRef lr_ref,
                                  ScalarRef skip_ref, BetaPowTypes pow_types, AdamWConfig cfg) {
  const BlockShare share = ShareOf(batch, blockIdx.x);
  const AdamWTensors& p = batch.tensors[share.tensor];
  const AdamWStep s = AdamWStepOf(lr_ref, p.beta1_pow, p.beta2_pow, skip_ref, cfg);
  for (int64_t i = share.begin + threadIdx.x; i < share.end; i += kThreads) {
    const S updated = AdamWElement(static_cast<const S*>(p.param), static_cast<const G*>(p.grad),
                                   static_cast<const S*>(p.moment1), static_cast<const S*>(p.moment2),
                                   static_cast<S*>(p.param_out), static_cast<S*>(p.moment1_out),
                                   static_cast<S*>(p.moment2_out), i, s, cfg);
    StoreRounded<S, G>(p.rounded_out, i, updated);
  }
  if (share.begin == 0 && threadIdx.x == 0) WriteBetaPowers(p.beta1_pow_out, p.beta2_pow_out, pow_types, s, cfg);
}

template <typename S, typename G>
__global__ void MergedSgdKernel(const __grid_constant__ MergedBatch<SgdTensors> batch, ScalarRef lr_ref,
                                ScalarRef skip_ref) {
  const BlockShare share = ShareOf(batch, blockIdx.x);
  const SgdTensors& p = batch.tensors[share.tensor];
  const bool skip = skip_ref.data != nullptr && ReadScalar(skip_ref) > 0;
  const auto lr = static_cast<typename Compute<S>::type>(ReadScalar(lr_ref));
  for (int64_t i = share.begin + threadIdx.x; i < share.end; i += kThreads) {
    const S updated =
        SgdElement(static_cast<const S*>(p.param), static_cast<const G*>(p.grad), static_cast<S*>(p.param_out), i, skip, lr);
    StoreRounded<S, G>(p.rounded_out, i, updated);
  }
}

template <typename S, typename G>
__global__ void MergedMomentumKernel(const __grid_constant__ MergedBatch<MomentumTensors> batch, ScalarRef lr_ref,
                                     ScalarRef skip_ref, MomentumConfig cfg) {
  const BlockShare share = ShareOf(batch, blockIdx.x);
  const MomentumTensors& p = batch.tensors[share.tensor];
  const bool skip = skip_ref.data != nullptr && ReadScalar(skip_ref) > 0;
  const auto lr = static_cast<typename Compute<S>::type>(ReadScalar(lr_ref));
  for (int64_t i = share.begin + threadIdx.x; i < share.end; i += kThreads) {
    const S updated = MomentumElement(static_cast<const S*>(p.param), static_cast<const G*>(p.grad),
                                      static_cast<const S*>(p.velocity), static_cast<S*>(p.param_out),
                                      static_cast<S*>(p.velocity_out), i, skip, lr, cfg);
    StoreRounded<S, G>(p.rounded_out, i, updated);
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

cudaError_t LaunchMergedAdamW(ElemType type, ElemType grad_type, const AdamWTensors* tensors, int64_t count,
                              ScalarRef learning_rate, ScalarRef skip_update, BetaPowTypes pow_types,
                              const AdamWConfig& config, cudaStream_t stream) {
  return ForEachBatch(tensors, count, [&](const MergedBatch<AdamWTensors>& batch, unsigned blocks) {
    return ByParamAndGrad(type, grad_type, [&](auto s, auto g) {
      MergedAdamWKernel<decltype(s), decltype(g)><<<blocks, kThreads, 0, stream>>>(batch, learning_rate, skip_update,
                                                                                 pow_types, config);
    });
  });
}

cudaError_t LaunchMergedSgd(ElemType type, ElemType grad_type, const SgdTensors* tensors, int64_t count,
                            ScalarRef learning_rate, ScalarRef skip_update, cudaStream_t stream) {
  return ForEachBatch(tensors, count, [&](const MergedBatch<SgdTensors>& batch, unsigned blocks) {
    return ByParamAndGrad(type, grad_type, [&](auto s, auto g) {
      MergedSgdKernel<decltype(s), decltype(g)><<<blocks, kThreads, 0, stream>>>(batch, learning_rate, skip_update);
    });
  });
}

cudaError_t LaunchMergedMomentum(ElemType type, ElemType grad_type, const MomentumTensors* tensors, int64_t count,
                                 ScalarRef learning_rate, ScalarRef skip_update, const MomentumConfig& config,
                                 cudaStream_t stream) {
  return ForEachBatch(tensors, count, [&](const MergedBatch<MomentumTensors>& batch, unsigned blocks) {
    return ByParamAndGrad(type, grad_type, [&](auto s, auto g) {
      MergedMomentumKernel<decltype(s), decltype(g)><<<blocks, kThreads, 0, stream>>>(batch, learning_rate, skip_update,
                                                                                    config);
    });
  });
}

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
                        void* beta1_pow_out, void* beta2_pow_out, BetaPowTypes pow_types, int64_t n,
                        const AdamWConfig& config, cudaStream_t stream) {
  return ByParamAndGrad(type, grad_type, [&](auto s, auto g) {
    using S = decltype(s);
    using G = decltype(g);
    // At least one block, so that the beta powers are written for an empty parameter too.
    AdamWKernel<S, G><<<Blocks(n), kThreads, 0, stream>>>(
        static_cast<const S*>(param), static_cast<const G*>(grad), learning_rate, static_cast<const S*>(moment1),
        static_cast<const S*>(moment2), beta1_pow, beta2_pow, skip_update, static_cast<S*>(param_out),
        static_cast<S*>(moment1_out), static_cast<S*>(moment2_out), beta1_pow_out, beta2_pow_out, pow_types, n, config);
  });
}

}  // namespace pdist::exec::cuda

// Device side of softmax, log_softmax, cross_entropy_with_softmax and their gradients: one block
// per lane (strided over the grid), the lane's max and sums by BlockMax / BlockSum; the max is
// subtracted before exp, as on the CPU (executor/cpu/row_utils.h SoftmaxLane).
#include "executor/cuda/device_common.cuh"
#include "executor/cuda/launch.h"
#include "executor/math/scalar_array.h"

namespace pdist::exec::cuda {
namespace {

__device__ int64_t LaneStart(const Lanes& l, int64_t lane) { return (lane / l.inner) * l.n * l.inner + lane % l.inner; }

// Writes softmax (or log_softmax) of the lane at `x` into `y` (stride `inner`; nothing when y is
// null); returns the lane's logsumexp.
template <typename S>
__device__ typename Compute<S>::type SoftmaxLane(const S* x, S* y, int64_t n, int64_t inner, bool log) {
  using C = typename Compute<S>::type;
  C max = -static_cast<C>(INFINITY);
  for (int64_t j = threadIdx.x; j < n; j += blockDim.x) max = Load(x, j * inner) > max ? Load(x, j * inner) : max;
  max = BlockMax(max);
  C sum = C(0);
  for (int64_t j = threadIdx.x; j < n; j += blockDim.x) sum += math::scalar::Exp(Load(x, j * inner) - max);
  sum = BlockSum(sum);
  const C lse = max + static_cast<C>(::log(static_cast<double>(sum)));
  for (int64_t j = threadIdx.x; y != nullptr && j < n; j += blockDim.x) {
    const C v = Load(x, j * inner);
    Store(y, j * inner, log ? v - lse : math::scalar::Exp(v - max) / sum);
  }
  return lse;
}

template <typename S>
__global__ void SoftmaxKernel(const S* x, S* y, Lanes l, bool log) {
  for (int64_t lane = blockIdx.x; lane < l.outer * l.inner; lane += gridDim.x) {
    const int64_t s = LaneStart(l, lane);
    SoftmaxLane(x + s, y + s, l.n, l.inner, log);
  }
}

// softmax: dx = y·(g - Σ g·y); log_softmax: dx = g - exp(y)·Σ g.
template <typename S>
__global__ void SoftmaxGradKernel(const S* out, const S* g, S* dx, Lanes l, bool log) {
  using C = typename Compute<S>::type;
  for (int64_t lane = blockIdx.x; lane < l.outer * l.inner; lane += gridDim.x) {
    const int64_t s = LaneStart(l, lane);
    C sum = C(0);
    for (int64_t j = threadIdx.x; j < l.n; j += blockDim.x) {
      const int64_t e = s + j * l.inner;
      sum += log ? Load(g, e) : Load(g, e) * Load(out, e);
    }
    sum = BlockSum(sum);
    for (int64_t j = threadIdx.x; j < l.n; j += blockDim.x) {
      const int64_t e = s + j * l.inner;
      Store(dx, e, log ? Load(g, e) - math::scalar::Exp(Load(out, e)) * sum : Load(out, e) * (Load(g, e) - sum));
    }
  }
}

__device__ int64_t HardLabel(const void* label, bool label_64, int64_t lane) {
  return label_64 ? static_cast<const int64_t*>(label)[lane] : static_cast<const int32_t*>(label)[lane];
}

template <typename S>
__global__ void CrossEntropyKernel(const S* logits, const void* label, S* softmax, typename Compute<S>::type* loss,
                                   Lanes l, CrossEntropyForm f) {
  using C = typename Compute<S>::type;
  for (int64_t lane = blockIdx.x; lane < l.outer * l.inner; lane += gridDim.x) {
    const int64_t s = LaneStart(l, lane);
    C value = C(0);
    if (f.use_softmax) {
      const C lse = SoftmaxLane(logits + s, softmax != nullptr ? softmax + s : nullptr, l.n, l.inner, false);
      if (f.soft_label) {
        C partial = C(0);
        for (int64_t j = threadIdx.x; j < l.n; j += blockDim.x) {
          const int64_t e = s + j * l.inner;
          partial += Load(static_cast<const S*>(label), e) * (lse - Load(logits, e));
        }
        value = BlockSum(partial);
      } else {
        const int64_t cls = HardLabel(label, f.label_64, lane);
        value = cls == f.ignore_index ? C(0) : lse - Load(logits, s + cls * l.inner);
      }
    } else {  // logits are probabilities already
      for (int64_t j = threadIdx.x; softmax != nullptr && j < l.n; j += blockDim.x) {
        softmax[s + j * l.inner] = logits[s + j * l.inner];
      }
      if (f.soft_label) {
        C partial = C(0);
        for (int64_t j = threadIdx.x; j < l.n; j += blockDim.x) {
          const int64_t e = s + j * l.inner;
          partial += Load(static_cast<const S*>(label), e) * static_cast<C>(::log(static_cast<double>(Load(logits, e))));
        }
        value = -BlockSum(partial);
      } else {
        const int64_t cls = HardLabel(label, f.label_64, lane);
        value = cls == f.ignore_index ? C(0) : -static_cast<C>(::log(static_cast<double>(Load(logits, s + cls * l.inner))));
      }
    }
    if (threadIdx.x == 0) Store(loss, lane, value);
  }
}

// With g = loss_grad: softmax, hard: g·(p - onehot); soft: g·(p·Σ label - label); probabilities,
// hard: -g/p at the label; soft: -g·label/p. Ignored lanes: 0. `in` is the softmax, or with
// kFromLogits the logits, whose softmax the lane recomputes first (its max and sum, as the
// forward's SoftmaxLane; without use_softmax the logits are the probabilities).
template <typename S, bool kFromLogits>
__global__ void CrossEntropyGradKernel(const void* label, const S* in, const typename Compute<S>::type* loss_grad,
                                       S* dx, Lanes l, CrossEntropyForm f) {
  using C = typename Compute<S>::type;
  for (int64_t lane = blockIdx.x; lane < l.outer * l.inner; lane += gridDim.x) {
    const int64_t s = LaneStart(l, lane);
    const C g = loss_grad[lane];
    C max = C(0), sum = C(1);
    // An ignored lane's gradient is zero whatever p is: no passes over it (the same for every
    // thread of the block, so the block's reductions stay together).
    const bool ignored = !f.soft_label && HardLabel(label, f.label_64, lane) == f.ignore_index;
    if (kFromLogits && f.use_softmax && !ignored) {
      max = -static_cast<C>(INFINITY);
      for (int64_t j = threadIdx.x; j < l.n; j += blockDim.x) {
        const C v = Load(in, s + j * l.inner);
        max = v > max ? v : max;
      }
      max = BlockMax(max);
      sum = C(0);
      for (int64_t j = threadIdx.x; j < l.n; j += blockDim.x) sum += math::scalar::Exp(Load(in, s + j * l.inner) - max);
      sum = BlockSum(sum);
    }
    const auto prob = [&](int64_t e) -> C {
      return kFromLogits && f.use_softmax ? math::scalar::Exp(Load(in, e) - max) / sum : Load(in, e);
    };
    if (f.soft_label) {
      const S* y = static_cast<const S*>(label);
      C label_sum = C(0);
      if (f.use_softmax) {
        for (int64_t j = threadIdx.x; j < l.n; j += blockDim.x) label_sum += Load(y, s + j * l.inner);
        label_sum = BlockSum(label_sum);
      }
      for (int64_t j = threadIdx.x; j < l.n; j += blockDim.x) {
        const int64_t e = s + j * l.inner;
        Store(dx, e, f.use_softmax ? g * (prob(e) * label_sum - Load(y, e)) : -g * Load(y, e) / prob(e));
      }
      continue;
    }
    const int64_t cls = HardLabel(label, f.label_64, lane);
    for (int64_t j = threadIdx.x; j < l.n; j += blockDim.x) {
      const int64_t e = s + j * l.inner;
      C v = C(0);
      if (cls != f.ignore_index) {
        if (f.use_softmax) {
          v = g * prob(e) - (j == cls ? g : C(0));
        } else if (j == cls) {
          v = -g / prob(e);
        }
      }
      Store(dx, e, v);
    }
  }
}

}  // namespace

cudaError_t LaunchSoftmax(ElemType type, const void* x, void* out, Lanes lanes, bool log, cudaStream_t stream) {
  if (lanes.outer * lanes.inner * lanes.n == 0) return cudaSuccess;
  return ByType(type, [&](auto s) {
    using S = decltype(s);
    SoftmaxKernel<S><<<BlockEach(lanes.outer * lanes.inner), kThreads, 0, stream>>>(static_cast<const S*>(x),
                                                                                    static_cast<S*>(out), lanes, log);
  });
}

cudaError_t LaunchSoftmaxGrad(ElemType type, const void* out, const void* out_grad, void* x_grad, Lanes lanes, bool log,
                              cudaStream_t stream) {
  if (lanes.outer * lanes.inner * lanes.n == 0) return cudaSuccess;
  return ByType(type, [&](auto s) {
    using S = decltype(s);
    SoftmaxGradKernel<S><<<BlockEach(lanes.outer * lanes.inner), kThreads, 0, stream>>>(
        static_cast<const S*>(out), static_cast<const S*>(out_grad), static_cast<S*>(x_grad), lanes, log);
  });
}

cudaError_t LaunchCrossEntropy(ElemType type, const void* logits, const void* label, void* softmax, void* loss,
                               Lanes lanes, CrossEntropyForm form, cudaStream_t stream) {
  if (lanes.outer * lanes.inner == 0) return cudaSuccess;
  return ByType(type, [&](auto s) {
    using S = decltype(s);
    CrossEntropyKernel<S><<<BlockEach(lanes.outer * lanes.inner), kThreads, 0, stream>>>(
        static_cast<const S*>(logits), label, static_cast<S*>(softmax), static_cast<typename Compute<S>::type*>(loss),
        lanes, form);
  });
}

cudaError_t LaunchCrossEntropyGrad(ElemType type, const void* label, const void* softmax, const void* loss_grad,
                                   void* logits_grad, Lanes lanes, CrossEntropyForm form, bool from_logits,
                                   cudaStream_t stream) {
  if (lanes.outer * lanes.inner == 0) return cudaSuccess;
  return ByType(type, [&](auto s) {
    using S = decltype(s);
    using C = typename Compute<S>::type;
    const auto launch = [&](auto kernel) {
      kernel<<<BlockEach(lanes.outer * lanes.inner), kThreads, 0, stream>>>(
          label, static_cast<const S*>(softmax), static_cast<const C*>(loss_grad), static_cast<S*>(logits_grad), lanes,
          form);
    };
    if (from_logits) {
      launch(CrossEntropyGradKernel<S, true>);
    } else {
      launch(CrossEntropyGradKernel<S, false>);
    }
  });
}

}  // namespace pdist::exec::cuda

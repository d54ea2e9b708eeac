// Device side of the vocab-parallel cross entropy (c_softmax_with_cross_entropy and its gradients,
// ir/ops/local_forms.cc) on this rank's classes [start, start + n) of every lane. The forward is
// three passes around the two all-reduces its host side issues on the same stream
// (vocab_parallel_kernels.cc), one block per lane, the lane's sums by BlockMax / BlockSum in the
// compute type (f32 for bf16/f16, as the CPU's float math); the gradient one thread per element.
#include "executor/cuda/device_common.cuh"
#include "executor/cuda/launch.h"
#include "executor/math/scalar_array.h"

namespace pdist::exec::cuda {
namespace {

template <typename S>
using C = typename Compute<S>::type;

// Pass 1: max[lane] = max_j x[lane, j].
template <typename S>
__global__ void RowMaxKernel(const S* x, C<S>* max, int64_t lanes, int64_t n) {
  for (int64_t lane = blockIdx.x; lane < lanes; lane += gridDim.x) {
    C<S> m = -static_cast<C<S>>(INFINITY);
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) m = Load(x, lane * n + j) > m ? Load(x, lane * n + j) : m;
    m = BlockMax(m);
    if (threadIdx.x == 0) max[lane] = m;
  }
}

// Pass 2, on the group's max: sums[lane] = Σ_j exp(x − max); sums[lanes + lane] = the label's
// logit where this rank holds the label's class, else 0 (the all-reduce then adds the holder's).
template <typename S, typename I>
__global__ void ExpSumKernel(const S* x, const I* label, const C<S>* max, C<S>* sums, int64_t lanes, int64_t n,
                             int64_t start) {
  for (int64_t lane = blockIdx.x; lane < lanes; lane += gridDim.x) {
    C<S> sum = C<S>(0);
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) sum += math::scalar::Exp(Load(x, lane * n + j) - max[lane]);
    sum = BlockSum(sum);
    if (threadIdx.x == 0) {
      const int64_t local = static_cast<int64_t>(label[lane]) - start;
      sums[lane] = sum;
      sums[lanes + lane] = local >= 0 && local < n ? Load(x, lane * n + local) : C<S>(0);
    }
  }
}

// Pass 3, on the group's sums: p = exp(x − max) / Σ, loss = log Σ + max − logit[label] (0 for
// ignore_index), as the CPU computes them.
template <typename S, typename I>
__global__ void NormalizeKernel(const S* x, const I* label, const C<S>* max, const C<S>* sums, S* p, C<S>* loss,
                                int64_t lanes, int64_t n, int64_t ignore_index) {
  for (int64_t lane = blockIdx.x; lane < lanes; lane += gridDim.x) {
    const C<S> m = max[lane], total = sums[lane];
    for (int64_t j = threadIdx.x; p != nullptr && j < n; j += blockDim.x) {  // null: no softmax asked for
      Store(p, lane * n + j, math::scalar::Exp(Load(x, lane * n + j) - m) / total);
    }
    if (threadIdx.x == 0) {
      const bool ignored = static_cast<int64_t>(label[lane]) == ignore_index;
      const C<S> log_total = static_cast<C<S>>(::log(static_cast<double>(total)));
      Store(loss, lane, ignored ? C<S>(0) : log_total + m - sums[lanes + lane]);
    }
  }
}

// dx = g · (p − onehot(label − start)) with p read (`in` the softmax piece) or, kFromLogits,
// recomputed from the logits piece `in` and the group's max and sums of passes 1 and 2.
template <typename S, typename I, bool kFromLogits>
__global__ void VocabParallelCrossEntropyGradKernel(const I* label, const S* in, const C<S>* max, const C<S>* sums,
                                                    const C<S>* loss_grad, S* dx, int64_t lanes, int64_t n,
                                                    int64_t start, int64_t ignore_index) {
  PDIST_GRID_STRIDE_LOOP(i, lanes * n) {
    const int64_t lane = i / n, j = i % n;
    const auto cls = static_cast<int64_t>(label[lane]);
    const C<S> g = cls == ignore_index ? C<S>(0) : loss_grad[lane];
    C<S> p;
    if constexpr (kFromLogits) {
      p = math::scalar::Exp(Load(in, i) - max[lane]) / sums[lane];
    } else {
      p = Load(in, i);
    }
    C<S> d = g * p;
    if (cls != ignore_index && j == cls - start) d -= g;
    Store(dx, i, d);
  }
}

// Calls fn(S{}, I{}) with the logits' storage type and the label's index type.
template <typename Fn>
cudaError_t ByTypeAndLabel(ElemType type, bool label_64, Fn&& fn) {
  return ByType(type, [&](auto s) {
    if (label_64) {
      fn(s, int64_t{});
    } else {
      fn(s, int32_t{});
    }
  });
}

}  // namespace

cudaError_t LaunchVocabParallelRowMax(ElemType type, const void* logits, void* max, int64_t lanes, int64_t n,
                                      cudaStream_t stream) {
  if (lanes == 0) return cudaSuccess;
  return ByType(type, [&](auto s) {
    using S = decltype(s);
    RowMaxKernel<S><<<BlockEach(lanes), kThreads, 0, stream>>>(static_cast<const S*>(logits), static_cast<C<S>*>(max),
                                                               lanes, n);
  });
}

cudaError_t LaunchVocabParallelExpSums(ElemType type, const void* logits, const void* label, bool label_64,
                                       const void* max, void* sums, int64_t lanes, int64_t n, int64_t start,
                                       cudaStream_t stream) {
  if (lanes == 0) return cudaSuccess;
  return ByTypeAndLabel(type, label_64, [&](auto s, auto i) {
    using S = decltype(s);
    using I = decltype(i);
    ExpSumKernel<S, I><<<BlockEach(lanes), kThreads, 0, stream>>>(static_cast<const S*>(logits),
                                                                  static_cast<const I*>(label),
                                                                  static_cast<const C<S>*>(max),
                                                                  static_cast<C<S>*>(sums), lanes, n, start);
  });
}

cudaError_t LaunchVocabParallelNormalize(ElemType type, const void* logits, const void* label, bool label_64,
                                         const void* max, const void* sums, void* softmax, void* loss, int64_t lanes,
                                         int64_t n, int64_t ignore_index, cudaStream_t stream) {
  if (lanes == 0) return cudaSuccess;
  return ByTypeAndLabel(type, label_64, [&](auto s, auto i) {
    using S = decltype(s);
    using I = decltype(i);
    NormalizeKernel<S, I><<<BlockEach(lanes), kThreads, 0, stream>>>(
        static_cast<const S*>(logits), static_cast<const I*>(label), static_cast<const C<S>*>(max),
        static_cast<const C<S>*>(sums), static_cast<S*>(softmax), static_cast<C<S>*>(loss), lanes, n, ignore_index);
  });
}

cudaError_t LaunchVocabParallelCrossEntropyGrad(ElemType type, const void* label, bool label_64, const void* softmax,
                                                const void* loss_grad, void* logits_grad, int64_t lanes, int64_t n,
                                                int64_t start, int64_t ignore_index, cudaStream_t stream) {
  if (lanes * n == 0) return cudaSuccess;
  return ByTypeAndLabel(type, label_64, [&](auto s, auto i) {
    using S = decltype(s);
    using I = decltype(i);
    VocabParallelCrossEntropyGradKernel<S, I, false><<<Blocks(lanes * n), kThreads, 0, stream>>>(
        static_cast<const I*>(label), static_cast<const S*>(softmax), nullptr, nullptr,
        static_cast<const C<S>*>(loss_grad), static_cast<S*>(logits_grad), lanes, n, start, ignore_index);
  });
}

cudaError_t LaunchVocabParallelCrossEntropyGradFromLogits(ElemType type, const void* label, bool label_64,
                                                          const void* logits, const void* max, const void* sums,
                                                          const void* loss_grad, void* logits_grad, int64_t lanes,
                                                          int64_t n, int64_t start, int64_t ignore_index,
                                                          cudaStream_t stream) {
  if (lanes * n == 0) return cudaSuccess;
  return ByTypeAndLabel(type, label_64, [&](auto s, auto i) {
    using S = decltype(s);
    using I = decltype(i);
    VocabParallelCrossEntropyGradKernel<S, I, true><<<Blocks(lanes * n), kThreads, 0, stream>>>(
        static_cast<const I*>(label), static_cast<const S*>(logits), static_cast<const C<S>*>(max),
        static_cast<const C<S>*>(sums), static_cast<const C<S>*>(loss_grad), static_cast<S*>(logits_grad), lanes, n,
        start, ignore_index);
  });
}

}  // namespace pdist::exec::cuda

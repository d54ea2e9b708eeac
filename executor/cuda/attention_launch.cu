// Device side of attention's two row kernels (the GEMMs around them: attention_kernels.cc): a
// row's probabilities from its scores, and its scores' gradient. One block per (batch, head,
// query) row of a chunk, the row read from the scores buffer; the math of the CPU kernel
// (scale, additive mask, bottom-right causal mask, a row that sees no key is all zeros).
#include "executor/cuda/device_common.cuh"
#include "executor/cuda/launch.h"
#include "executor/math/scalar_array.h"

namespace pdist::exec::cuda {
namespace {

// One past the last key that query row i sees.
__device__ int64_t KeyEnd(const AttentionShape& a, int64_t i) {
  if (!a.causal) return a.seq_k;
  const int64_t end = i + 1 + a.seq_k - a.seq_q;
  return end < 0 ? 0 : (end > a.seq_k ? a.seq_k : end);
}

// A row of the chunk: its place in the whole batch.
struct Row {
  int64_t global;  // (b · heads_q + h) · seq_q + i: lse's index
  int64_t b, h, i;
  __device__ Row(const AttentionShape& a, int64_t b0, int64_t r) : global(b0 * a.heads_q * a.seq_q + r) {
    b = global / (a.heads_q * a.seq_q);
    h = (global / a.seq_q) % a.heads_q;
    i = global % a.seq_q;
  }
};

// scale · s + mask for key j of `row`.
template <typename S, typename C>
__device__ C Logit(const AttentionShape& a, const Row& row, const C* scores, int64_t j) {
  C s = scores[j] * static_cast<C>(a.scale);
  if (a.mask != nullptr) {
    const int64_t base =
        ((a.mask_batch == 1 ? 0 : row.b) * a.mask_heads + (a.mask_heads == 1 ? 0 : row.h)) * a.seq_q * a.seq_k;
    s += Load(static_cast<const S*>(a.mask), base + row.i * a.seq_k + j);
  }
  return s;
}

template <typename S>
__global__ void AttentionProbsKernel(const typename Compute<S>::type* scores, const typename Compute<S>::type* lse_in,
                                     S* probs, typename Compute<S>::type* lse_out, AttentionShape a, int64_t b0,
                                     int64_t rows) {
  using C = typename Compute<S>::type;
  const C inf = static_cast<C>(INFINITY);
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const Row row(a, b0, r);
    const int64_t keys = KeyEnd(a, row.i);
    const C* s = scores + r * a.seq_k;
    C lse;
    if (lse_in != nullptr) {
      lse = lse_in[row.global];
    } else {
      C max = -inf;
      for (int64_t j = threadIdx.x; j < keys; j += blockDim.x) {
        const C x = Logit<S, C>(a, row, s, j);
        max = x > max ? x : max;
      }
      max = BlockMax(max);
      C sum = C(0);
      if (max != -inf) {
        for (int64_t j = threadIdx.x; j < keys; j += blockDim.x) sum += math::scalar::Exp(Logit<S, C>(a, row, s, j) - max);
      }
      sum = BlockSum(sum);
      lse = max == -inf ? -inf : max + static_cast<C>(::log(static_cast<double>(sum)));
      if (threadIdx.x == 0) lse_out[row.global] = lse;
    }
    const bool empty = lse == -inf;
    S* p = probs + r * a.seq_k;
    for (int64_t j = threadIdx.x; j < a.seq_k; j += blockDim.x) {
      Store(p, j, j < keys && !empty ? math::scalar::Exp(Logit<S, C>(a, row, s, j) - lse) : C(0));
    }
  }
}

template <typename S>
__global__ void AttentionScoreGradKernel(const typename Compute<S>::type* scores, const typename Compute<S>::type* dprobs,
                                         const S* out, const S* out_grad, const typename Compute<S>::type* lse,
                                         S* dscores, AttentionShape a, int64_t b0, int64_t rows) {
  using C = typename Compute<S>::type;
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const Row row(a, b0, r);
    const int64_t keys = KeyEnd(a, row.i);
    const int64_t o_row = ((row.b * a.seq_q + row.i) * a.heads_q + row.h) * a.v_dim;
    C dot = C(0);
    for (int64_t e = threadIdx.x; e < a.v_dim; e += blockDim.x) dot += Load(out_grad, o_row + e) * Load(out, o_row + e);
    const C d = BlockSum(dot);
    const C row_lse = lse[row.global];
    const bool empty = row_lse == -static_cast<C>(INFINITY);
    const C* s = scores + r * a.seq_k;
    const C* dp = dprobs + r * a.seq_k;
    S* ds = dscores + r * a.seq_k;
    for (int64_t j = threadIdx.x; j < a.seq_k; j += blockDim.x) {
      const C p = j < keys && !empty ? math::scalar::Exp(Logit<S, C>(a, row, s, j) - row_lse) : C(0);
      Store(ds, j, p * (dp[j] - d));
    }
  }
}

}  // namespace

cudaError_t LaunchAttentionProbs(ElemType type, const void* scores, const void* lse_in, void* probs, void* lse_out,
                                 const AttentionShape& a, int64_t b0, int64_t batches, cudaStream_t stream) {
  const int64_t rows = batches * a.heads_q * a.seq_q;
  if (rows == 0) return cudaSuccess;
  return ByType(type, [&](auto s) {
    using S = decltype(s);
    using C = typename Compute<S>::type;
    AttentionProbsKernel<S><<<BlockEach(rows), kThreads, 0, stream>>>(static_cast<const C*>(scores),
                                                                      static_cast<const C*>(lse_in), static_cast<S*>(probs),
                                                                      static_cast<C*>(lse_out), a, b0, rows);
  });
}

cudaError_t LaunchAttentionScoreGrad(ElemType type, const void* scores, const void* dprobs, const void* out,
                                     const void* out_grad, const void* lse, void* dscores, const AttentionShape& a,
                                     int64_t b0, int64_t batches, cudaStream_t stream) {
  const int64_t rows = batches * a.heads_q * a.seq_q;
  if (rows == 0) return cudaSuccess;
  return ByType(type, [&](auto s) {
    using S = decltype(s);
    using C = typename Compute<S>::type;
    AttentionScoreGradKernel<S><<<BlockEach(rows), kThreads, 0, stream>>>(
        static_cast<const C*>(scores), static_cast<const C*>(dprobs), static_cast<const S*>(out),
        static_cast<const S*>(out_grad), static_cast<const C*>(lse), static_cast<S*>(dscores), a, b0, rows);
  });
}

}  // namespace pdist::exec::cuda

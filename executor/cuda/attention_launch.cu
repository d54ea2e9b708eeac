// Device side of flash_attn and its gradient: exact attention, one block per query row (forward,
// dq) or key row (dk, dv), the row's scores in shared memory. It is the CPU kernel's math, not
// yet FlashAttention-2's tiling: correct at any size that fits (MaxAttentionSeq), and the
// reference the tiled kernel will be checked against.
#include "executor/cuda/device_common.cuh"
#include "executor/cuda/launch.h"
#include "executor/math/scalar_array.h"

namespace pdist::exec::cuda {
namespace {

constexpr int kMaxRowBlocks = 65535;
constexpr int64_t kSharedBytes = 48 << 10;  // the default dynamic shared memory limit

int RowBlocks(int64_t rows) { return static_cast<int>(rows < kMaxRowBlocks ? (rows > 0 ? rows : 1) : kMaxRowBlocks); }

__device__ int64_t KeyEnd(const AttentionShape& a, int64_t i) {
  if (!a.causal) return a.seq_k;
  const int64_t end = i + 1 + a.seq_k - a.seq_q;
  return end < 0 ? 0 : (end > a.seq_k ? a.seq_k : end);
}

// Scaled score of query row (b, h, i) against key j, plus the additive mask.
template <typename S, typename C>
__device__ C Score(const AttentionShape& a, const S* q, const S* k, int64_t b, int64_t h, int64_t i, int64_t j) {
  const int64_t hk = h / (a.heads_q / a.heads_k);
  const S* qi = q + ((b * a.seq_q + i) * a.heads_q + h) * a.head_dim;
  const S* kj = k + ((b * a.seq_k + j) * a.heads_k + hk) * a.head_dim;
  C dot = C(0);
  for (int64_t d = 0; d < a.head_dim; ++d) dot += Load(qi, d) * Load(kj, d);
  C s = dot * static_cast<C>(a.scale);
  if (a.mask != nullptr) {
    const int64_t base = ((a.mask_batch == 1 ? 0 : b) * a.mask_heads + (a.mask_heads == 1 ? 0 : h)) * a.seq_q * a.seq_k;
    s += Load(static_cast<const S*>(a.mask), base + i * a.seq_k + j);
  }
  return s;
}

template <typename S>
__global__ void FlashAttnKernel(const S* q, const S* k, const S* v, S* out, S* softmax, S* lse, AttentionShape a) {
  using C = typename Compute<S>::type;
  extern __shared__ unsigned char shared[];
  C* p = reinterpret_cast<C*>(shared);
  const C inf = static_cast<C>(INFINITY);
  for (int64_t r = blockIdx.x; r < a.batch * a.heads_q * a.seq_q; r += gridDim.x) {
    const int64_t b = r / (a.heads_q * a.seq_q), h = (r / a.seq_q) % a.heads_q, i = r % a.seq_q;
    const int64_t hk = h / (a.heads_q / a.heads_k);
    const int64_t keys = KeyEnd(a, i);
    C max = -inf;
    for (int64_t j = threadIdx.x; j < keys; j += blockDim.x) {
      p[j] = Score<S, C>(a, q, k, b, h, i, j);
      max = p[j] > max ? p[j] : max;
    }
    max = BlockMax(max);
    C sum = C(0);
    if (max != -inf) {
      for (int64_t j = threadIdx.x; j < keys; j += blockDim.x) {
        p[j] = math::scalar::Exp(p[j] - max);
        sum += p[j];
      }
    }
    sum = BlockSum(sum);
    const bool empty = max == -inf;
    if (threadIdx.x == 0) Store(lse, r, empty ? -inf : max + static_cast<C>(::log(static_cast<double>(sum))));
    S* o = out + ((b * a.seq_q + i) * a.heads_q + h) * a.v_dim;
    for (int64_t d = threadIdx.x; d < a.v_dim; d += blockDim.x) {
      C acc = C(0);
      if (!empty) {
        for (int64_t j = 0; j < keys; ++j) acc += p[j] / sum * Load(v, ((b * a.seq_k + j) * a.heads_k + hk) * a.v_dim + d);
      }
      Store(o, d, acc);
    }
    if (softmax != nullptr) {
      for (int64_t j = threadIdx.x; j < a.seq_k; j += blockDim.x) {
        Store(softmax, r * a.seq_k + j, j < keys && !empty ? p[j] / sum : C(0));
      }
    }
    __syncthreads();  // p is the next row's
  }
}

// Per query row: P = exp(S - lse), D = Σ dO·O, dS = P ∘ (dO·Vᵀ - D), dq = scale · dS·K.
template <typename S>
__global__ void FlashAttnQueryGradKernel(const S* q, const S* k, const S* v, const S* out, const S* lse, const S* g,
                                         S* dq, double* row_dot, AttentionShape a) {
  using C = typename Compute<S>::type;
  extern __shared__ unsigned char shared[];
  C* ds = reinterpret_cast<C*>(shared);
  for (int64_t r = blockIdx.x; r < a.batch * a.heads_q * a.seq_q; r += gridDim.x) {
    const int64_t b = r / (a.heads_q * a.seq_q), h = (r / a.seq_q) % a.heads_q, i = r % a.seq_q;
    const int64_t hk = h / (a.heads_q / a.heads_k);
    const int64_t keys = KeyEnd(a, i);
    const C row_lse = Load(lse, r);
    const int64_t o_row = ((b * a.seq_q + i) * a.heads_q + h) * a.v_dim;
    C dot = C(0);
    for (int64_t d = threadIdx.x; d < a.v_dim; d += blockDim.x) dot += Load(g, o_row + d) * Load(out, o_row + d);
    const C D = BlockSum(dot);
    if (threadIdx.x == 0) row_dot[r] = static_cast<double>(D);
    const bool empty = row_lse == -static_cast<C>(INFINITY);
    for (int64_t j = threadIdx.x; j < keys; j += blockDim.x) {
      const C p = empty ? C(0) : math::scalar::Exp(Score<S, C>(a, q, k, b, h, i, j) - row_lse);
      C dp = C(0);
      for (int64_t d = 0; d < a.v_dim; ++d) dp += Load(g, o_row + d) * Load(v, ((b * a.seq_k + j) * a.heads_k + hk) * a.v_dim + d);
      ds[j] = p * (dp - D);
    }
    __syncthreads();
    const int64_t q_row = ((b * a.seq_q + i) * a.heads_q + h) * a.head_dim;
    for (int64_t d = threadIdx.x; d < a.head_dim; d += blockDim.x) {
      C acc = C(0);
      for (int64_t j = 0; j < keys; ++j) acc += ds[j] * Load(k, ((b * a.seq_k + j) * a.heads_k + hk) * a.head_dim + d);
      Store(dq, q_row + d, acc * static_cast<C>(a.scale));
    }
    __syncthreads();
  }
}

// Per key row (b, hk, j): dv = Σ_h Σ_i P_ij dO_i, dk = scale · Σ_h Σ_i dS_ij q_i, over the q heads
// of the group and the query rows that see key j, in order. Thread t owns element t of dk and of
// dv (head_dim and v_dim at most the block size: the host checks), summed in the compute type
// across the heads and stored once.
template <typename S>
__global__ void FlashAttnKeyGradKernel(const S* q, const S* k, const S* v, const S* lse, const S* g,
                                       const double* row_dot, S* dk, S* dv, AttentionShape a) {
  using C = typename Compute<S>::type;
  extern __shared__ unsigned char shared[];
  C* p = reinterpret_cast<C*>(shared);
  C* ds = p + a.seq_q;
  const int64_t group = a.heads_q / a.heads_k;
  const int64_t d = threadIdx.x;
  for (int64_t r = blockIdx.x; r < a.batch * a.heads_k * a.seq_k; r += gridDim.x) {
    const int64_t b = r / (a.heads_k * a.seq_k), hk = (r / a.seq_k) % a.heads_k, j = r % a.seq_k;
    const int64_t k_row = ((b * a.seq_k + j) * a.heads_k + hk) * a.head_dim;
    const int64_t v_row = ((b * a.seq_k + j) * a.heads_k + hk) * a.v_dim;
    C dk_acc = C(0), dv_acc = C(0);
    for (int64_t h = hk * group; h < (hk + 1) * group; ++h) {
      for (int64_t i = threadIdx.x; i < a.seq_q; i += blockDim.x) {
        const int64_t qr = (b * a.heads_q + h) * a.seq_q + i;
        const C row_lse = Load(lse, qr);
        if (j >= KeyEnd(a, i) || row_lse == -static_cast<C>(INFINITY)) {
          p[i] = C(0);
          ds[i] = C(0);
          continue;
        }
        p[i] = math::scalar::Exp(Score<S, C>(a, q, k, b, h, i, j) - row_lse);
        const int64_t o_row = ((b * a.seq_q + i) * a.heads_q + h) * a.v_dim;
        C dp = C(0);
        for (int64_t e = 0; e < a.v_dim; ++e) dp += Load(g, o_row + e) * Load(v, v_row + e);
        ds[i] = p[i] * (dp - static_cast<C>(row_dot[qr]));
      }
      __syncthreads();
      if (d < a.v_dim) {
        for (int64_t i = 0; i < a.seq_q; ++i) dv_acc += p[i] * Load(g, ((b * a.seq_q + i) * a.heads_q + h) * a.v_dim + d);
      }
      if (d < a.head_dim) {
        for (int64_t i = 0; i < a.seq_q; ++i) dk_acc += ds[i] * Load(q, ((b * a.seq_q + i) * a.heads_q + h) * a.head_dim + d);
      }
      __syncthreads();
    }
    if (d < a.v_dim) Store(dv, v_row + d, dv_acc);
    if (d < a.head_dim) Store(dk, k_row + d, dk_acc * static_cast<C>(a.scale));
  }
}

template <typename S>
size_t ComputeBytes() {
  return sizeof(typename Compute<S>::type);
}

}  // namespace

int64_t MaxAttentionHeadDim() { return kThreads; }

int64_t MaxAttentionSeq(ElemType type) {
  const int64_t element = type == ElemType::kF64 ? 8 : 4;
  return kSharedBytes / (2 * element);  // the key-gradient kernel keeps two rows
}

cudaError_t LaunchFlashAttn(ElemType type, const void* q, const void* k, const void* v, void* out, void* softmax,
                            void* lse, const AttentionShape& a, cudaStream_t stream) {
  const int64_t rows = a.batch * a.heads_q * a.seq_q;
  if (rows == 0) return cudaSuccess;
  return ByType(type, [&](auto s) {
    using S = decltype(s);
    FlashAttnKernel<S><<<RowBlocks(rows), kThreads, a.seq_k * ComputeBytes<S>(), stream>>>(
        static_cast<const S*>(q), static_cast<const S*>(k), static_cast<const S*>(v), static_cast<S*>(out),
        static_cast<S*>(softmax), static_cast<S*>(lse), a);
  });
}

cudaError_t LaunchFlashAttnGrad(ElemType type, const void* q, const void* k, const void* v, const void* out,
                                const void* lse, const void* out_grad, void* q_grad, void* k_grad, void* v_grad,
                                double* row_dot, const AttentionShape& a, cudaStream_t stream) {
  const int64_t query_rows = a.batch * a.heads_q * a.seq_q, key_rows = a.batch * a.heads_k * a.seq_k;
  if (query_rows == 0 && key_rows == 0) return cudaSuccess;
  return ByType(type, [&](auto s) {
    using S = decltype(s);
    if (query_rows > 0) {
      FlashAttnQueryGradKernel<S><<<RowBlocks(query_rows), kThreads, a.seq_k * ComputeBytes<S>(), stream>>>(
          static_cast<const S*>(q), static_cast<const S*>(k), static_cast<const S*>(v), static_cast<const S*>(out),
          static_cast<const S*>(lse), static_cast<const S*>(out_grad), static_cast<S*>(q_grad), row_dot, a);
    }
    if (key_rows > 0) {
      FlashAttnKeyGradKernel<S><<<RowBlocks(key_rows), kThreads, 2 * a.seq_q * ComputeBytes<S>(), stream>>>(
          static_cast<const S*>(q), static_cast<const S*>(k), static_cast<const S*>(v), static_cast<const S*>(lse),
          static_cast<const S*>(out_grad), row_dot, static_cast<S*>(k_grad), static_cast<S*>(v_grad), a);
    }
  });
}

}  // namespace pdist::exec::cuda

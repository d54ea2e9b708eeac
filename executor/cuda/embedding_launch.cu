// Device side of embedding and embedding_grad: one thread per output element; the gradient sums
// each vocabulary row's positions in the order the host sorted them (the CPU's order).
#include "executor/cuda/device_common.cuh"
#include "executor/cuda/launch.h"

namespace pdist::exec::cuda {
namespace {

template <typename S, typename I>
__global__ void EmbeddingKernel(const I* ids, const S* weight, S* out, int64_t n, int64_t hidden, int64_t padding_idx) {
  PDIST_GRID_STRIDE_LOOP(e, n * hidden) {
    const int64_t i = e / hidden, h = e % hidden;
    const int64_t id = static_cast<int64_t>(ids[i]);
    out[e] = id == padding_idx ? S(0.0f) : weight[id * hidden + h];
  }
}

template <typename S>
__global__ void EmbeddingGradKernel(const int64_t* start, const int64_t* order, const S* g, S* dw, int64_t vocab,
                                    int64_t hidden, int64_t padding_idx) {
  using C = typename Compute<S>::type;
  PDIST_GRID_STRIDE_LOOP(e, vocab * hidden) {
    const int64_t v = e / hidden, h = e % hidden;
    C acc = C(0);
    if (v != padding_idx) {
      for (int64_t p = start[v]; p < start[v + 1]; ++p) acc += Load(g, order[p] * hidden + h);
    }
    Store(dw, e, acc);
  }
}

}  // namespace

cudaError_t LaunchEmbedding(ElemType type, const void* ids, bool ids_64, const void* weight, void* out, int64_t n,
                            int64_t hidden, int64_t padding_idx, cudaStream_t stream) {
  if (n * hidden == 0) return cudaSuccess;
  return ByType(type, [&](auto s) {
    using S = decltype(s);
    if (ids_64) {
      EmbeddingKernel<S, int64_t><<<Blocks(n * hidden), kThreads, 0, stream>>>(
          static_cast<const int64_t*>(ids), static_cast<const S*>(weight), static_cast<S*>(out), n, hidden, padding_idx);
    } else {
      EmbeddingKernel<S, int32_t><<<Blocks(n * hidden), kThreads, 0, stream>>>(
          static_cast<const int32_t*>(ids), static_cast<const S*>(weight), static_cast<S*>(out), n, hidden, padding_idx);
    }
  });
}

cudaError_t LaunchEmbeddingGrad(ElemType type, const int64_t* start, const int64_t* order, const void* out_grad,
                                void* weight_grad, int64_t vocab, int64_t hidden, int64_t padding_idx,
                                cudaStream_t stream) {
  if (vocab * hidden == 0) return cudaSuccess;
  return ByType(type, [&](auto s) {
    using S = decltype(s);
    EmbeddingGradKernel<S><<<Blocks(vocab * hidden), kThreads, 0, stream>>>(
        start, order, static_cast<const S*>(out_grad), static_cast<S*>(weight_grad), vocab, hidden, padding_idx);
  });
}

}  // namespace pdist::exec::cuda

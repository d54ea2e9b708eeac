// What every .cu file of the CUDA backend shares: launch geometry (a grid-stride loop of
// 256-thread blocks), loads and stores that compute bf16/f16 in f32 and round each result (as
// the CPU kernels do), a broadcast walk, and the dispatch from ElemType to a storage type.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "executor/cuda/column_split.h"
#include "executor/cuda/launch.h"

namespace pdist::exec::cuda {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 65535;  // past it, kernels stride over the grid

// At least one block, at most kMaxBlocks.
inline int GridOf(int64_t blocks) { return static_cast<int>(blocks < kMaxBlocks ? (blocks > 0 ? blocks : 1) : kMaxBlocks); }
// A thread per element.
inline int Blocks(int64_t n) { return GridOf((n + kThreads - 1) / kThreads); }
// A block per item (a row, a lane, an output summed by BlockSum).
inline int BlockEach(int64_t items) { return GridOf(items); }

// Storage type → the type the math runs in.
template <typename S> struct Compute { using type = S; };
template <> struct Compute<__nv_bfloat16> { using type = float; };
template <> struct Compute<__half> { using type = float; };

template <typename S> __device__ typename Compute<S>::type Load(const S* p, int64_t i) {
  return static_cast<typename Compute<S>::type>(p[i]);
}
template <typename S> __device__ void Store(S* p, int64_t i, typename Compute<S>::type v) { p[i] = static_cast<S>(v); }

// Operand offsets of the element at `flat` (row-major over index.shape). The outermost index is
// what remains of `flat`: no division for it.
// A walk of fewer than 2^32 elements (index.narrow, the same for every thread) divides in 32 bits.
template <int N>
__device__ void Offsets(const StridedIndex<N>& index, int64_t flat, int64_t (&offset)[N]) {
  for (int k = 0; k < N; ++k) offset[k] = 0;
  if (index.narrow) {
    uint32_t rest = static_cast<uint32_t>(flat);
    for (int d = index.rank - 1; d > 0; --d) {
      const uint32_t size = static_cast<uint32_t>(index.shape[d]);
      const uint32_t i = rest % size;
      rest /= size;
      for (int k = 0; k < N; ++k) offset[k] += static_cast<int64_t>(i) * index.stride[k][d];
    }
    flat = rest;
  } else {
    for (int d = index.rank - 1; d > 0; --d) {
      const int64_t i = flat % index.shape[d];
      flat /= index.shape[d];
      for (int k = 0; k < N; ++k) offset[k] += i * index.stride[k][d];
    }
  }
  if (index.rank > 0) {
    for (int k = 0; k < N; ++k) offset[k] += flat * index.stride[k][0];
  }
}

// Calls fn(S{}) with the storage type of `type`.
template <typename Fn>
cudaError_t ByType(ElemType type, Fn&& fn) {
  switch (type) {
    case ElemType::kF32: fn(float{}); break;
    case ElemType::kF64: fn(double{}); break;
    case ElemType::kBF16: fn(__nv_bfloat16{}); break;
    case ElemType::kF16: fn(__half{}); break;
  }
  return cudaGetLastError();
}

// `v` combined over the block's threads by `join` (associative, `identity` its neutral value;
// blockDim.x a multiple of 32, at most 1024), returned to every thread. Called by every thread
// of the block, like __syncthreads.
template <typename C, typename Join>
__device__ C BlockReduce(C v, C identity, Join join) {
  __shared__ C partial[32];
  __shared__ C total;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  for (int offset = 16; offset > 0; offset /= 2) v = join(v, __shfl_down_sync(0xffffffffu, v, offset));
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < static_cast<int>(blockDim.x / 32) ? partial[lane] : identity;
    for (int offset = 16; offset > 0; offset /= 2) v = join(v, __shfl_down_sync(0xffffffffu, v, offset));
    if (lane == 0) total = v;
  }
  __syncthreads();
  const C result = total;
  __syncthreads();  // the next call may overwrite `partial` and `total`
  return result;
}

template <typename C>
__device__ C BlockSum(C v) {
  return BlockReduce(v, C(0), [](C a, C b) { return a + b; });
}

// The maximum (-inf over no elements).
template <typename C>
__device__ C BlockMax(C v) {
  return BlockReduce(v, -static_cast<C>(INFINITY), [](C a, C b) { return a > b ? a : b; });
}

// Two column sums at once over a row-major [rows, cols] walk, in two launches split as
// executor/cuda/column_split.h says: for every column c, Σ_r f(r, c).first and .second (a norm's
// scale and bias gradients).
template <typename C>
struct SumPair {
  C first, second;
};

// The first launch, on a grid of (≤ split.tiles, split.chunks) blocks of kThreads: block (x, y)
// sums column tile x (strided over the grid) over row chunk y, its warps striding the chunk's
// rows; warp 0 adds the warps' partials in order and writes them to workspace[y·cols + c] and
// workspace[(chunks + y)·cols + c].
template <typename C, typename F>
__device__ void ColumnPartials(int64_t rows, int64_t cols, int64_t chunk_rows, F f, C* workspace) {
  __shared__ C partial[2][kThreads / 32][kColumnTile];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  const int64_t chunk = blockIdx.y, chunks = gridDim.y;
  const int64_t first = chunk * chunk_rows, end = first + chunk_rows < rows ? first + chunk_rows : rows;
  for (int64_t tile = blockIdx.x; tile * kColumnTile < cols; tile += gridDim.x) {
    const int64_t c = tile * kColumnTile + lane;
    C s0 = C(0), s1 = C(0);
    if (c < cols) {
#pragma unroll 4
      for (int64_t r = first + warp; r < end; r += warps) {
        const SumPair<C> v = f(r, c);
        s0 += v.first;
        s1 += v.second;
      }
    }
    partial[0][warp][lane] = s0;
    partial[1][warp][lane] = s1;
    __syncthreads();
    if (warp == 0 && c < cols) {
      C t0 = C(0), t1 = C(0);
      for (int w = 0; w < warps; ++w) {
        t0 += partial[0][w][lane];
        t1 += partial[1][w][lane];
      }
      workspace[chunk * cols + c] = t0;
      workspace[(chunks + chunk) * cols + c] = t1;
    }
    __syncthreads();  // the next tile overwrites `partial`
  }
}

inline dim3 ColumnPartialsGrid(const ColumnSplit& split) {
  return dim3(static_cast<unsigned>(GridOf(split.tiles)), static_cast<unsigned>(split.chunks));
}

// The second launch (a thread per column, Blocks(cols)): adds the chunks in order and stores the
// totals as T into `first` and `second` (either may be null; with no chunks, zeros).
template <typename C, typename T>
__global__ void ColumnTotalsKernel(int64_t chunks, int64_t cols, const C* workspace, T* first, T* second) {
  for (int64_t c = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; c < cols;
       c += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    C t0 = C(0), t1 = C(0);
#pragma unroll 8
    for (int64_t k = 0; k < chunks; ++k) {
      t0 += workspace[k * cols + c];
      if (second != nullptr) t1 += workspace[(chunks + k) * cols + c];  // one sum: half the reads
    }
    if (first != nullptr) Store(first, c, t0);
    if (second != nullptr) Store(second, c, t1);
  }
}

// A one-element operand of any float dtype, as double; and a double stored as `type`.
__device__ inline double ReadScalar(const ScalarRef& s) {
  switch (s.type) {
    case ElemType::kF32: return static_cast<const float*>(s.data)[0];
    case ElemType::kF64: return static_cast<const double*>(s.data)[0];
    case ElemType::kBF16: return static_cast<double>(static_cast<float>(static_cast<const __nv_bfloat16*>(s.data)[0]));
    case ElemType::kF16: return static_cast<double>(static_cast<float>(static_cast<const __half*>(s.data)[0]));
  }
  return 0;
}

__device__ inline void WriteScalar(void* p, ElemType type, double v) {
  switch (type) {
    case ElemType::kF32: static_cast<float*>(p)[0] = static_cast<float>(v); break;
    case ElemType::kF64: static_cast<double*>(p)[0] = v; break;
    case ElemType::kBF16: static_cast<__nv_bfloat16*>(p)[0] = __nv_bfloat16(static_cast<float>(v)); break;
    case ElemType::kF16: static_cast<__half*>(p)[0] = __half(static_cast<float>(v)); break;
  }
}

// for (i = this thread's first; i < n; i += the grid's threads)
#define PDIST_GRID_STRIDE_LOOP(i, n)                                                  \
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < (n); \
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)

}  // namespace pdist::exec::cuda

// Device side of the elementwise kernels: broadcast arithmetic, its gradients, dropout. The
// per-element math is the CPU's (executor/math/arithmetic.h, executor/random.h).
#include "executor/cuda/device_common.cuh"
#include "executor/cuda/launch.h"
#include "executor/math/arithmetic.h"
#include "executor/random.h"

namespace pdist::exec::cuda {
namespace {

template <typename Op, typename S>
__global__ void BinaryKernel(const S* x, const S* y, S* out, int64_t n, StridedIndex<2> index) {
  using C = typename Compute<S>::type;
  PDIST_GRID_STRIDE_LOOP(i, n) {
    int64_t o[2];
    Offsets(index, i, o);
    Store(out, i, Op::template F<C>(Load(x, o[0]), Load(y, o[1])));
  }
}

template <typename Op, typename S>
__global__ void BinaryGradKernel(int operand, const S* x, const S* y, const S* g, S* grad, int64_t m,
                                 StridedIndex<3> grad_index, StridedIndex<3> reduced, int64_t terms) {
  using C = typename Compute<S>::type;
  PDIST_GRID_STRIDE_LOOP(j, m) {
    int64_t base[3];
    Offsets(grad_index, j, base);
    C sum = C(0);
    for (int64_t r = 0; r < terms; ++r) {
      int64_t o[3];
      Offsets(reduced, r, o);
      const C a = Load(x, base[0] + o[0]), b = Load(y, base[1] + o[1]), d = Load(g, base[2] + o[2]);
      sum += operand == 0 ? Op::template Dx<C>(a, b, d) : Op::template Dy<C>(a, b, d);
    }
    Store(grad, j, sum);
  }
}

// The same sums for few outputs of many terms (a scalar's gradient sums everything): a block per
// output, its threads splitting the terms, combined by BlockSum.
template <typename Op, typename S>
__global__ void BinaryGradReduceKernel(int operand, const S* x, const S* y, const S* g, S* grad, int64_t m,
                                       StridedIndex<3> grad_index, StridedIndex<3> reduced, int64_t terms) {
  using C = typename Compute<S>::type;
  for (int64_t j = blockIdx.x; j < m; j += gridDim.x) {
    int64_t base[3];
    Offsets(grad_index, j, base);
    C sum = C(0);
    for (int64_t r = threadIdx.x; r < terms; r += blockDim.x) {
      int64_t o[3];
      Offsets(reduced, r, o);
      const C a = Load(x, base[0] + o[0]), b = Load(y, base[1] + o[1]), d = Load(g, base[2] + o[2]);
      sum += operand == 0 ? Op::template Dx<C>(a, b, d) : Op::template Dy<C>(a, b, d);
    }
    sum = BlockSum(sum);
    if (threadIdx.x == 0) Store(grad, j, sum);
  }
}

// The same sums for many outputs of many terms (a bias's gradient: every row, per column): the
// first of ColumnPartials' two launches, a block per 32 outputs and chunk of terms, so that a
// warp reads 32 neighbouring outputs' terms at once.
template <typename Op, typename S, typename C = typename Compute<S>::type>
__global__ void BinaryGradColumnsKernel(int operand, const S* x, const S* y, const S* g, int64_t m,
                                        StridedIndex<3> grad_index, StridedIndex<3> reduced, int64_t terms,
                                        int64_t chunk_rows, C* workspace) {
  ColumnPartials<C>(
      terms, m, chunk_rows,
      [&](int64_t r, int64_t j) {
        int64_t base[3], o[3];
        Offsets(grad_index, j, base);
        Offsets(reduced, r, o);
        const C a = Load(x, base[0] + o[0]), b = Load(y, base[1] + o[1]), d = Load(g, base[2] + o[2]);
        return SumPair<C>{operand == 0 ? Op::template Dx<C>(a, b, d) : Op::template Dy<C>(a, b, d), C(0)};
      },
      workspace);
}

template <typename S>
__global__ void DropoutKernel(const S* x, S* out, bool* mask, int64_t n, double factor, DropoutDraw draw) {
  using C = typename Compute<S>::type;
  PDIST_GRID_STRIDE_LOOP(i, n) {
    int64_t position = i;
    if (draw.piece) {
      int64_t o[1];
      Offsets(draw.global, i, o);
      position = draw.offset + o[0];
    }
    const bool keep = DropoutKeeps(draw.key, draw.first + static_cast<uint64_t>(position), draw.threshold);
    mask[i] = keep;
    Store(out, i, keep ? Load(x, i) * static_cast<C>(factor) : C(0));
  }
}

template <typename S>
__global__ void DropoutGradKernel(const bool* mask, const S* g, S* dx, int64_t n, double factor) {
  using C = typename Compute<S>::type;
  PDIST_GRID_STRIDE_LOOP(i, n) {
    Store(dx, i, mask[i] ? Load(g, i) * static_cast<C>(factor) : C(0));
  }
}

template <typename Fn>
cudaError_t ByOp(BinaryOp op, Fn&& fn) {
  switch (op) {
    case BinaryOp::kAdd: return fn(math::Add{});
    case BinaryOp::kSubtract: return fn(math::Subtract{});
    case BinaryOp::kMultiply: return fn(math::Multiply{});
    case BinaryOp::kDivide: return fn(math::Divide{});
    case BinaryOp::kMaximum: return fn(math::Maximum{});
  }
  return cudaErrorInvalidValue;
}

}  // namespace

cudaError_t LaunchBinary(BinaryOp op, ElemType type, const void* x, const void* y, void* out, int64_t n,
                         const StridedIndex<2>& index, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  return ByOp(op, [&](auto o) {
    return ByType(type, [&](auto s) {
      using S = decltype(s);
      BinaryKernel<decltype(o), S><<<Blocks(n), kThreads, 0, stream>>>(static_cast<const S*>(x), static_cast<const S*>(y),
                                                                        static_cast<S*>(out), n, index);
    });
  });
}

cudaError_t LaunchBinaryGrad(BinaryOp op, int operand, ElemType type, const void* x, const void* y, const void* g,
                             void* grad, int64_t grad_elements, const StridedIndex<3>& grad_index,
                             const StridedIndex<3>& reduced, void* workspace, cudaStream_t stream) {
  if (grad_elements == 0) return cudaSuccess;
  int64_t terms = 1;
  for (int d = 0; d < reduced.rank; ++d) terms *= reduced.shape[d];
  return ByOp(op, [&](auto o) {
    return ByType(type, [&](auto s) {
      using S = decltype(s);
      if (SumsByColumns(terms, grad_elements)) {
        using C = typename Compute<S>::type;
        const ColumnSplit split = SplitColumns(terms, grad_elements);
        C* sums = static_cast<C*>(workspace);
        BinaryGradColumnsKernel<decltype(o), S><<<ColumnPartialsGrid(split), kThreads, 0, stream>>>(
            operand, static_cast<const S*>(x), static_cast<const S*>(y), static_cast<const S*>(g), grad_elements,
            grad_index, reduced, terms, split.chunk_rows, sums);
        ColumnTotalsKernel<C, S><<<Blocks(grad_elements), kThreads, 0, stream>>>(split.chunks, grad_elements, sums,
                                                                                  static_cast<S*>(grad), nullptr);
        return;
      }
      if (terms >= kManyTerms) {
        BinaryGradReduceKernel<decltype(o), S><<<BlockEach(grad_elements), kThreads, 0, stream>>>(
            operand, static_cast<const S*>(x), static_cast<const S*>(y), static_cast<const S*>(g),
            static_cast<S*>(grad), grad_elements, grad_index, reduced, terms);
        return;
      }
      BinaryGradKernel<decltype(o), S><<<Blocks(grad_elements), kThreads, 0, stream>>>(
          operand, static_cast<const S*>(x), static_cast<const S*>(y), static_cast<const S*>(g), static_cast<S*>(grad),
          grad_elements, grad_index, reduced, terms);
    });
  });
}

cudaError_t LaunchDropout(ElemType type, const void* x, void* out, bool* mask, int64_t n, double factor,
                          const DropoutDraw& draw, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  return ByType(type, [&](auto s) {
    using S = decltype(s);
    DropoutKernel<S><<<Blocks(n), kThreads, 0, stream>>>(static_cast<const S*>(x), static_cast<S*>(out), mask, n,
                                                          factor, draw);
  });
}

cudaError_t LaunchDropoutGrad(ElemType type, const bool* mask, const void* out_grad, void* x_grad, int64_t n,
                              double factor, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  return ByType(type, [&](auto s) {
    using S = decltype(s);
    DropoutGradKernel<S><<<Blocks(n), kThreads, 0, stream>>>(mask, static_cast<const S*>(out_grad),
                                                              static_cast<S*>(x_grad), n, factor);
  });
}

}  // namespace pdist::exec::cuda

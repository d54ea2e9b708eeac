// CPU kernels of matmul and matmul_grad: Eigen GEMMs on row-major maps, looped over batches.
#include <Eigen/Core>
#include <cstring>
#include <vector>

#include "executor/cpu/cpu_common.h"
#include "executor/cpu/cpu_kernels.h"
#include "executor/dtype_dispatch.h"
#include "executor/kernel.h"
#include "ir/ops/matmul.h"
#include "ir/status.h"

namespace pdist::exec::cpu {
namespace {

using ir::NumElements;

template <typename T>
using RowMatrix = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <typename T>
using ConstMatrixMap = Eigen::Map<const RowMatrix<T>>;
template <typename T>
using MatrixMap = Eigen::Map<RowMatrix<T>>;

// Eigen splits one GEMM across threads only above ~50k multiply-adds per thread (its
// parallelize_gemm); below that a product runs on one thread anyway.
constexpr int64_t kEigenParallelWork = 100000;
// Work per thread below which forking threads for a batch of small GEMMs does not pay.
constexpr int64_t kMinWorkPerThread = 32768;

// A row-major matrix operand in memory and whether the product uses its transpose.
template <typename T>
struct Operand {
  const T* data;
  int64_t rows, cols;  // as stored
  bool trans;
};

// c = op(a)·op(b), or c += op(a)·op(b). Transposes are Eigen expressions: no copies, the GEMM
// reads the row-major storage as column-major.
template <typename T>
void Gemm(const Operand<T>& a, const Operand<T>& b, T* c, bool accumulate) {
  const ConstMatrixMap<T> am(a.data, a.rows, a.cols);
  const ConstMatrixMap<T> bm(b.data, b.rows, b.cols);
  MatrixMap<T> cm(c, a.trans ? a.cols : a.rows, b.trans ? b.rows : b.cols);
  auto with_op = [](const ConstMatrixMap<T>& m, bool trans, auto&& f) {
    if (trans)
      f(m.transpose());
    else
      f(m);
  };
  with_op(am, a.trans, [&](const auto& lhs) {
    with_op(bm, b.trans, [&](const auto& rhs) {
      if (accumulate)
        cm.noalias() += lhs * rhs;
      else
        cm.noalias() = lhs * rhs;  // Eigen zero-fills when k == 0
    });
  });
}

// Index of the operand batch that output batch `b` reads, for every b (numpy broadcasting).
std::vector<int64_t> BatchIndex(const Shape& operand_batch, const Shape& batch) {
  const std::vector<int64_t> strides = BroadcastStrides(operand_batch, batch);
  const int64_t count = NumElements(batch);
  std::vector<int64_t> index(static_cast<size_t>(count), 0);
  for (int64_t b = 0; b < count; ++b) {
    int64_t rest = b, offset = 0;
    for (int64_t d = static_cast<int64_t>(batch.size()) - 1; d >= 0; --d) {
      offset += (rest % batch[d]) * strides[d];
      rest /= batch[d];
    }
    index[b] = offset;
  }
  return index;
}

// Runs product(b, dst_batch, accumulate) for every output batch b, where dst_of[b] is the
// destination matrix (of `dst_size` elements in `dst`) it adds into. Products into one
// destination are summed in increasing b, whatever the threads: reduction of broadcast batch
// dims is deterministic. Destinations go to threads when there are many, or when each GEMM is too
// small for Eigen to thread; otherwise they run in turn with Eigen threading each GEMM (never
// both, to avoid nested parallelism).
template <typename T, typename Product>
void ForEachDestination(int64_t num_dst, const std::vector<int64_t>& dst_of, int64_t work_per_gemm, T* dst,
                        int64_t dst_size, Product product) {
  std::vector<std::vector<int64_t>> sources(static_cast<size_t>(num_dst));
  for (size_t b = 0; b < dst_of.size(); ++b) sources[dst_of[b]].push_back(static_cast<int64_t>(b));
  auto run = [&](int64_t begin, int64_t end) {
    for (int64_t d = begin; d < end; ++d) {
      const std::vector<int64_t>& from = sources[d];
      if (from.empty()) std::memset(dst + d * dst_size, 0, sizeof(T) * dst_size);
      for (size_t i = 0; i < from.size(); ++i) product(from[i], d, i > 0);
    }
  };
  const int64_t gemms_per_dst =
      std::max<int64_t>(1, static_cast<int64_t>(dst_of.size()) / std::max<int64_t>(num_dst, 1));
  const int64_t work_per_dst = std::max<int64_t>(1, work_per_gemm * gemms_per_dst);
  if (num_dst > 1 && (num_dst >= MaxThreads() || work_per_gemm < kEigenParallelWork)) {
    ParallelFor(num_dst, std::max<int64_t>(1, kMinWorkPerThread / work_per_dst), run);
  } else {
    run(0, num_dst);
  }
}

// The operands of one matmul (or matmul_grad) as batches of stored matrices.
struct Plan {
  ir::ops::MatmulDims dims;
  int64_t batches = 1;                   // output batches
  int64_t x_batches = 1, y_batches = 1;  // operand batches
  std::vector<int64_t> x_of, y_of;       // operand batch read by each output batch
  // A single y matrix and an un-transposed, un-broadcast x: the batch folds into m and the
  // whole op is one GEMM ([B·m,k]·[k,n], the usual activations·weight).
  bool fold = false;
};

absl::StatusOr<Plan> MakePlan(const KernelContext& ctx) {
  PDIST_ASSIGN_OR_RETURN(bool trans_x, ir::GetBool(ctx.attrs(), "trans_x"));
  PDIST_ASSIGN_OR_RETURN(bool trans_y, ir::GetBool(ctx.attrs(), "trans_y"));
  Plan p;
  PDIST_ASSIGN_OR_RETURN(p.dims,
                         ir::ops::InferMatmulDims(ctx.input(0)->shape(), ctx.input(1)->shape(), trans_x, trans_y));
  p.batches = NumElements(p.dims.batch);
  p.x_batches = NumElements(p.dims.x_batch);
  p.y_batches = NumElements(p.dims.y_batch);
  p.fold = p.y_batches == 1 && p.x_batches == p.batches && !p.dims.trans_x;
  if (!p.fold) {
    p.x_of = BatchIndex(p.dims.x_batch, p.dims.batch);
    p.y_of = BatchIndex(p.dims.y_batch, p.dims.batch);
  }
  return p;
}

// Operand views of x, y and out_grad for output batch b (all batches at once when folded).
template <typename T>
struct Views {
  const Plan& p;
  const T* x;
  const T* y;
  const T* g;
  int64_t rows(int64_t m) const { return p.fold ? p.batches * m : m; }
  Operand<T> X(int64_t b, bool trans) const {
    const auto& d = p.dims;
    const int64_t xb = p.fold ? 0 : p.x_of[b];
    return d.trans_x ? Operand<T>{x + xb * d.m * d.k, d.k, d.m, trans}
                     : Operand<T>{x + xb * d.m * d.k, rows(d.m), d.k, trans};
  }
  Operand<T> Y(int64_t b, bool trans) const {
    const auto& d = p.dims;
    const int64_t yb = p.fold ? 0 : p.y_of[b];
    return d.trans_y ? Operand<T>{y + yb * d.k * d.n, d.n, d.k, trans}
                     : Operand<T>{y + yb * d.k * d.n, d.k, d.n, trans};
  }
  Operand<T> G(int64_t b, bool trans) const {
    const auto& d = p.dims;
    return {g + (p.fold ? 0 : b) * d.m * d.n, rows(d.m), d.n, trans};
  }
};

template <typename T>
void MatmulForward(const Plan& p, const Tensor& x, const Tensor& y, Tensor& out) {
  const auto& d = p.dims;
  Views<T> v{p, x.data<T>(), y.data<T>(), nullptr};
  T* o = out.data<T>();
  if (p.fold) {
    Gemm<T>(v.X(0, d.trans_x), v.Y(0, d.trans_y), o, false);
    return;
  }
  std::vector<int64_t> identity(static_cast<size_t>(p.batches));
  for (int64_t b = 0; b < p.batches; ++b) identity[b] = b;
  ForEachDestination<T>(p.batches, identity, d.m * d.n * d.k, o, d.m * d.n, [&](int64_t b, int64_t dst, bool acc) {
    Gemm<T>(v.X(b, d.trans_x), v.Y(b, d.trans_y), o + dst * d.m * d.n, acc);
  });
}

// With G = out_grad and op(x)·op(y) = out:
//   x_grad = G·op(y)ᵀ          (trans_x: op(y)·Gᵀ)
//   y_grad = op(x)ᵀ·G          (trans_y: Gᵀ·op(x))
// each summed over the output batches that broadcast the operand.
template <typename T>
void MatmulBackward(const Plan& p, const Tensor& x, const Tensor& y, const Tensor& g, Tensor& dx, Tensor& dy) {
  const auto& d = p.dims;
  const Views<T> v{p, x.data<T>(), y.data<T>(), g.data<T>()};
  auto x_grad = [&](int64_t b, T* dst, bool acc) {
    if (d.trans_x)
      Gemm<T>(v.Y(b, d.trans_y), v.G(b, true), dst, acc);
    else
      Gemm<T>(v.G(b, false), v.Y(b, !d.trans_y), dst, acc);
  };
  auto y_grad = [&](int64_t b, T* dst, bool acc) {
    if (d.trans_y)
      Gemm<T>(v.G(b, true), v.X(b, d.trans_x), dst, acc);
    else
      Gemm<T>(v.X(b, !d.trans_x), v.G(b, false), dst, acc);
  };
  T* dxp = dx.data<T>();
  T* dyp = dy.data<T>();
  if (p.fold) {
    x_grad(0, dxp, false);
    y_grad(0, dyp, false);
    return;
  }
  const int64_t work = d.m * d.n * d.k;
  const int64_t x_size = d.m * d.k, y_size = d.k * d.n;
  ForEachDestination<T>(p.x_batches, p.x_of, work, dxp, x_size,
                        [&](int64_t b, int64_t dst, bool acc) { x_grad(b, dxp + dst * x_size, acc); });
  ForEachDestination<T>(p.y_batches, p.y_of, work, dyp, y_size,
                        [&](int64_t b, int64_t dst, bool acc) { y_grad(b, dyp + dst * y_size, acc); });
}

absl::Status MatmulKernel(KernelContext& ctx) {
  PDIST_ASSIGN_OR_RETURN(Plan p, MakePlan(ctx));
  Tensor& out = ctx.AllocateOutput(0);
  PDIST_DISPATCH_FLOAT(out.dtype(), T, { MatmulForward<T>(p, *ctx.input(0), *ctx.input(1), out); });
  return absl::OkStatus();
}

absl::Status MatmulGradKernel(KernelContext& ctx) {
  PDIST_ASSIGN_OR_RETURN(Plan p, MakePlan(ctx));
  Tensor& dx = ctx.AllocateOutput(0);
  Tensor& dy = ctx.AllocateOutput(1);
  PDIST_DISPATCH_FLOAT(dx.dtype(), T, { MatmulBackward<T>(p, *ctx.input(0), *ctx.input(1), *ctx.input(2), dx, dy); });
  return absl::OkStatus();
}

}  // namespace

void RegisterMatmulKernels(KernelRegistry& registry) {
  registry.Register(DeviceType::kCPU, "matmul", MatmulKernel);
  registry.Register(DeviceType::kCPU, "matmul_grad", MatmulGradKernel);
}

}  // namespace pdist::exec::cpu

// CPU kernels of matmul and matmul_grad: Eigen GEMMs on row-major maps, looped over batches.
#include <Eigen/Core>
#include <cstring>
#include <vector>

#include "executor/cpu/cpu_common.h"
#include "executor/cpu/cpu_kernels.h"
#include "executor/dtype_dispatch.h"
#include "executor/kernel.h"
#include "executor/matmul_plan.h"
#include "ir/status.h"

namespace pdist::exec::cpu {
namespace {

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

// Runs product(b, dst_batch, accumulate) for every output batch b, where dst_of[b] is the
// destination matrix (of `dst_size` elements in `dst`) it adds into. Products into one
// destination are summed in increasing b, whatever the threads: reduction of broadcast batch
// dims is deterministic. Destinations go to threads when there are many, or when each GEMM is too
// small for Eigen to thread; otherwise they run in turn with Eigen threading each GEMM (never
// both, to avoid nested parallelism).
template <typename T, typename Product>
void ForEachDestination(int64_t num_dst, const std::vector<int64_t>& dst_of, int64_t work_per_gemm, T* dst,
                        int64_t dst_size, Product product) {
  const std::vector<std::vector<int64_t>> sources = MatmulPlan::Sources(num_dst, dst_of);
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

// A stored matrix of the plan as an Eigen operand over the op's tensors.
template <typename T>
struct Operands {
  const T* x;
  const T* y;
  const T* g;
  Operand<T> operator()(const MatrixRef& r) const {
    const T* base = r.source == MatrixRef::kX ? x : r.source == MatrixRef::kY ? y : g;
    return {base + r.offset, r.rows, r.cols, r.trans};
  }
};

template <typename T>
void MatmulForward(const MatmulPlan& p, const Tensor& x, const Tensor& y, Tensor& out) {
  const auto& d = p.dims;
  const Operands<T> of{x.data<T>(), y.data<T>(), nullptr};
  T* o = out.data<T>();
  if (p.fold) {
    const auto [a, b] = p.Forward(0);
    Gemm<T>(of(a), of(b), o, false);
    return;
  }
  std::vector<int64_t> identity(static_cast<size_t>(p.batches));
  for (int64_t b = 0; b < p.batches; ++b) identity[b] = b;
  ForEachDestination<T>(p.batches, identity, d.m * d.n * d.k, o, d.m * d.n, [&](int64_t b, int64_t dst, bool acc) {
    const auto [lhs, rhs] = p.Forward(b);
    Gemm<T>(of(lhs), of(rhs), o + dst * d.m * d.n, acc);
  });
}

// x_grad and y_grad (executor/matmul_plan.h has the formulas), each summed over the output
// batches that broadcast its operand.
template <typename T>
void MatmulBackward(const MatmulPlan& p, const Tensor& x, const Tensor& y, const Tensor& g, Tensor& dx, Tensor& dy) {
  const auto& d = p.dims;
  const Operands<T> of{x.data<T>(), y.data<T>(), g.data<T>()};
  T* dxp = dx.data<T>();
  T* dyp = dy.data<T>();
  if (p.fold) {
    const auto [xa, xb] = p.XGrad(0);
    Gemm<T>(of(xa), of(xb), dxp, false);
    const auto [ya, yb] = p.YGrad(0);
    Gemm<T>(of(ya), of(yb), dyp, false);
    return;
  }
  const int64_t work = d.m * d.n * d.k;
  const int64_t x_size = d.m * d.k, y_size = d.k * d.n;
  ForEachDestination<T>(p.x_batches, p.x_of, work, dxp, x_size, [&](int64_t b, int64_t dst, bool acc) {
    const auto [lhs, rhs] = p.XGrad(b);
    Gemm<T>(of(lhs), of(rhs), dxp + dst * x_size, acc);
  });
  ForEachDestination<T>(p.y_batches, p.y_of, work, dyp, y_size, [&](int64_t b, int64_t dst, bool acc) {
    const auto [lhs, rhs] = p.YGrad(b);
    Gemm<T>(of(lhs), of(rhs), dyp + dst * y_size, acc);
  });
}

absl::Status MatmulKernel(KernelContext& ctx) {
  PDIST_ASSIGN_OR_RETURN(MatmulPlan p, PlanMatmul(ctx));
  Tensor& out = ctx.AllocateOutput(0);
  PDIST_DISPATCH_FLOAT(out.dtype(), T, { MatmulForward<T>(p, *ctx.input(0), *ctx.input(1), out); });
  return absl::OkStatus();
}

absl::Status MatmulGradKernel(KernelContext& ctx) {
  PDIST_ASSIGN_OR_RETURN(MatmulPlan p, PlanMatmul(ctx));
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

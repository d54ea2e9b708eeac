// CPU kernels of gather and gather_grad. x is viewed as [outer, axis, inner] and the result as
// [outer, n, inner] (n: the number of indices): row (o, j) of the result is row (o, index[j]) of x.
// gather_grad adds each result row back into its source row, in index order for every source row
// (deterministic: the same sums on any thread count).
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "executor/cpu/cpu_common.h"
#include "executor/cpu/cpu_kernels.h"
#include "executor/dtype_dispatch.h"
#include "executor/gather_rows.h"
#include "executor/kernel.h"
#include "ir/status.h"

namespace pdist::exec::cpu {
namespace {

absl::Status GatherKernel(KernelContext& ctx) {
  const Tensor& x = *ctx.input(0);
  PDIST_ASSIGN_OR_RETURN(int64_t axis, ir::GetInt(ctx.attrs(), "axis"));
  PDIST_ASSIGN_OR_RETURN(GatherView v, GatherViewOf(x.shape(), axis, *ctx.input(1), "gather"));
  Tensor& out = ctx.AllocateOutput(0);
  const auto n = static_cast<int64_t>(v.rows.size());
  PDIST_DISPATCH_ALL(x.dtype(), T, {
    const T* src = x.data<T>();
    T* dst = out.data<T>();
    ParallelFor(v.outer * n, 1, [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        const int64_t o = r / n, j = r % n;
        const T* row = src + (o * v.axis + v.rows[static_cast<size_t>(j)]) * v.inner;
        std::copy(row, row + v.inner, dst + r * v.inner);
      }
    });
  });
  return absl::OkStatus();
}

absl::Status GatherGradKernel(KernelContext& ctx) {
  const Tensor& out_grad = *ctx.input(1);
  PDIST_ASSIGN_OR_RETURN(int64_t axis, ir::GetInt(ctx.attrs(), "axis"));
  Tensor& x_grad = ctx.AllocateOutput(0);
  PDIST_ASSIGN_OR_RETURN(GatherView v, GatherViewOf(x_grad.shape(), axis, *ctx.input(0), "gather_grad"));
  const auto n = static_cast<int64_t>(v.rows.size());
  PDIST_DISPATCH_FLOAT(out_grad.dtype(), T, {
    const T* g = out_grad.data<T>();
    T* dx = x_grad.data<T>();
    std::fill(dx, dx + x_grad.num_elements(), T(0));
    // Threads split the outer rows: each writes only its own rows of x_grad.
    ParallelFor(v.outer, 1, [&](int64_t begin, int64_t end) {
      for (int64_t o = begin; o < end; ++o) {
        for (int64_t j = 0; j < n; ++j) {
          const T* from = g + (o * n + j) * v.inner;
          T* to = dx + (o * v.axis + v.rows[static_cast<size_t>(j)]) * v.inner;
          for (int64_t k = 0; k < v.inner; ++k) to[k] += from[k];
        }
      }
    });
  });
  return absl::OkStatus();
}

}  // namespace

void RegisterGatherKernels(KernelRegistry& registry) {
  registry.Register(DeviceType::kCPU, "gather", GatherKernel);
  registry.Register(DeviceType::kCPU, "gather_grad", GatherGradKernel);
}

}  // namespace pdist::exec::cpu

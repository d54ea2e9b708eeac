// CPU kernels for softmax, log_softmax, layer_norm, rms_norm and their gradients.
//
// Rows are independent and computed in parallel; the per-column reductions of the parameter
// gradients (scale_grad, bias_grad) are parallelised over columns, each column summing its rows
// in order, so results do not depend on the thread count.
#include <Eigen/Core>
#include <cmath>

#include "executor/cpu/cpu_common.h"
#include "executor/cpu/cpu_kernels.h"
#include "executor/cpu/row_utils.h"
#include "executor/dtype_dispatch.h"
#include "executor/kernel.h"
#include "executor/shape_layout.h"
#include "ir/attribute.h"
#include "ir/status.h"

namespace pdist::exec::cpu {
namespace {

template <typename T>
using Row = Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>>;
template <typename T>
using ConstRow = Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>>;

absl::StatusOr<AxisView> SoftmaxView(const KernelContext& ctx, const Tensor& x) {
  PDIST_ASSIGN_OR_RETURN(int64_t axis, ir::GetInt(ctx.attrs(), "axis"));
  const int64_t rank = static_cast<int64_t>(x.shape().size());
  if (axis < 0) axis += rank;
  return MakeAxisView(x.shape(), axis);
}

// softmax / log_softmax: x → out.
absl::Status SoftmaxKernel(KernelContext& ctx, bool log) {
  const Tensor& x = *ctx.input(0);
  PDIST_ASSIGN_OR_RETURN(AxisView v, SoftmaxView(ctx, x));
  Tensor& out = ctx.AllocateOutput(0);
  PDIST_DISPATCH_FLOAT(x.dtype(), T, {
    const T* in = x.data<T>();
    T* y = out.data<T>();
    ParallelFor(v.lanes(), RowGrain(v.n), [&](int64_t begin, int64_t end) {
      for (int64_t lane = begin; lane < end; ++lane) {
        const int64_t s = v.LaneStart(lane);
        SoftmaxLane(in + s, y + s, v.n, v.inner, log);
      }
    });
  });
  return absl::OkStatus();
}

// (out, out_grad) → x_grad. softmax: y * (g - sum(g * y)); log_softmax: g - exp(y) * sum(g).
absl::Status SoftmaxGradKernel(KernelContext& ctx, bool log) {
  const Tensor& out = *ctx.input(0);
  const Tensor& out_grad = *ctx.input(1);
  PDIST_ASSIGN_OR_RETURN(AxisView v, SoftmaxView(ctx, out));
  Tensor& x_grad = ctx.AllocateOutput(0);
  PDIST_DISPATCH_FLOAT(out.dtype(), T, {
    ParallelFor(v.lanes(), RowGrain(v.n), [&](int64_t begin, int64_t end) {
      const Eigen::InnerStride<> stride(v.inner);
      for (int64_t lane = begin; lane < end; ++lane) {
        const int64_t s = v.LaneStart(lane);
        ConstLaneMap<T> y(out.data<T>() + s, v.n, stride);
        ConstLaneMap<T> g(out_grad.data<T>() + s, v.n, stride);
        LaneMap<T> dx(x_grad.data<T>() + s, v.n, stride);
        if (log) {
          dx = g - y.exp() * g.sum();
        } else {
          dx = y * (g - (g * y).sum());
        }
      }
    });
  });
  return absl::OkStatus();
}

template <typename T>
const T* DataOrNull(const Tensor* t) {
  return t != nullptr && t->defined() ? t->data<T>() : nullptr;
}

// Parameter gradients: for every column c, sum over rows r of f(r, c) with f from `term`, where
// term(r, c0, c1, acc) adds row r's contributions for columns [c0, c1) into acc[0 .. c1-c0).
// Parallel over column blocks; rows are visited in order, so the sums are deterministic.
template <typename T, typename Term>
void ColumnSums(RowsCols rc, T* out, Term term) {
  ParallelFor(rc.cols, RowGrain(rc.rows), [&](int64_t c0, int64_t c1) {
    Row<T> acc(out + c0, c1 - c0);
    acc.setZero();
    for (int64_t r = 0; r < rc.rows; ++r) term(r, c0, c1, acc);
  });
}

// (x, scale?, bias?) → out, mean, variance. out = (x - mean) / sqrt(variance + eps) * scale + bias.
absl::Status LayerNormKernel(KernelContext& ctx) {
  const Tensor& x = *ctx.input(0);
  PDIST_ASSIGN_OR_RETURN(RowsCols rc, NormRowsCols(ctx, x.shape()));
  PDIST_ASSIGN_OR_RETURN(double eps, ir::GetDouble(ctx.attrs(), "epsilon"));
  Tensor& out = ctx.AllocateOutput(0);
  Tensor& mean = ctx.AllocateOutput(1);
  Tensor& variance = ctx.AllocateOutput(2);
  PDIST_DISPATCH_FLOAT(x.dtype(), T, {
    const T* scale = DataOrNull<T>(ctx.input(1));
    const T* bias = DataOrNull<T>(ctx.input(2));
    ParallelFor(rc.rows, RowGrain(rc.cols), [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        ConstRow<T> xr(x.data<T>() + r * rc.cols, rc.cols);
        Row<T> y(out.data<T>() + r * rc.cols, rc.cols);
        const T mu = xr.mean();
        // Two passes (centre, then square) keep the variance accurate when |mean| >> std.
        const T var = (xr - mu).square().mean();
        mean.data<T>()[r] = mu;
        variance.data<T>()[r] = var;
        y = (xr - mu) * (T(1) / std::sqrt(var + static_cast<T>(eps)));
        if (scale) y *= ConstRow<T>(scale, rc.cols);
        if (bias) y += ConstRow<T>(bias, rc.cols);
      }
    });
  });
  return absl::OkStatus();
}

// (x, scale?, bias?, mean, variance, out_grad) → x_grad, scale_grad, bias_grad. With
// xhat = (x - mean) * rstd and gs = out_grad * scale:
//   x_grad = rstd * (gs - mean(gs) - xhat * mean(gs * xhat))
//   scale_grad = sum_rows(out_grad * xhat), bias_grad = sum_rows(out_grad).
absl::Status LayerNormGradKernel(KernelContext& ctx) {
  const Tensor& x = *ctx.input(0);
  const Tensor& mean = *ctx.input(3);
  const Tensor& variance = *ctx.input(4);
  const Tensor& out_grad = *ctx.input(5);
  PDIST_ASSIGN_OR_RETURN(RowsCols rc, NormRowsCols(ctx, x.shape()));
  PDIST_ASSIGN_OR_RETURN(double eps, ir::GetDouble(ctx.attrs(), "epsilon"));
  Tensor& x_grad = ctx.AllocateOutput(0);
  Tensor& scale_grad = ctx.AllocateOutput(1);
  Tensor& bias_grad = ctx.AllocateOutput(2);
  PDIST_DISPATCH_FLOAT(x.dtype(), T, {
    const T* scale = DataOrNull<T>(ctx.input(1));
    auto rstd = [&](int64_t r) { return T(1) / std::sqrt(variance.data<T>()[r] + static_cast<T>(eps)); };
    ParallelFor(rc.rows, RowGrain(rc.cols), [&](int64_t begin, int64_t end) {
      Eigen::Array<T, Eigen::Dynamic, 1> gs(rc.cols);
      for (int64_t r = begin; r < end; ++r) {
        ConstRow<T> xr(x.data<T>() + r * rc.cols, rc.cols);
        ConstRow<T> g(out_grad.data<T>() + r * rc.cols, rc.cols);
        const T s = rstd(r);
        const auto xhat = (xr - mean.data<T>()[r]) * s;
        gs = scale ? (g * ConstRow<T>(scale, rc.cols)).eval() : g.eval();
        const T gs_mean = gs.mean();
        const T gs_xhat_mean = (gs * xhat).mean();
        Row<T>(x_grad.data<T>() + r * rc.cols, rc.cols) = s * (gs - gs_mean - xhat * gs_xhat_mean);
      }
    });
    if (ctx.input(1) != nullptr) {
      ColumnSums<T>(rc, scale_grad.data<T>(), [&](int64_t r, int64_t c0, int64_t c1, Row<T>& acc) {
        const int64_t o = r * rc.cols + c0;
        acc += ConstRow<T>(out_grad.data<T>() + o, c1 - c0) *
               (ConstRow<T>(x.data<T>() + o, c1 - c0) - mean.data<T>()[r]) * rstd(r);
      });
    }
    if (ctx.input(2) != nullptr) {
      ColumnSums<T>(rc, bias_grad.data<T>(), [&](int64_t r, int64_t c0, int64_t c1, Row<T>& acc) {
        acc += ConstRow<T>(out_grad.data<T>() + r * rc.cols + c0, c1 - c0);
      });
    }
  });
  return absl::OkStatus();
}

// (x, scale) → out, invvar. invvar = 1 / sqrt(mean(x²) + eps); out = x * invvar * scale.
absl::Status RmsNormKernel(KernelContext& ctx) {
  const Tensor& x = *ctx.input(0);
  const Tensor& scale = *ctx.input(1);
  PDIST_ASSIGN_OR_RETURN(RowsCols rc, NormRowsCols(ctx, x.shape()));
  PDIST_ASSIGN_OR_RETURN(double eps, ir::GetDouble(ctx.attrs(), "epsilon"));
  Tensor& out = ctx.AllocateOutput(0);
  Tensor& invvar = ctx.AllocateOutput(1);
  PDIST_DISPATCH_FLOAT(x.dtype(), T, {
    ParallelFor(rc.rows, RowGrain(rc.cols), [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        ConstRow<T> xr(x.data<T>() + r * rc.cols, rc.cols);
        const T inv = T(1) / std::sqrt(xr.square().mean() + static_cast<T>(eps));
        invvar.data<T>()[r] = inv;
        Row<T>(out.data<T>() + r * rc.cols, rc.cols) = xr * inv * ConstRow<T>(scale.data<T>(), rc.cols);
      }
    });
  });
  return absl::OkStatus();
}

// (x, scale, invvar, out_grad) → x_grad, scale_grad. With xhat = x * invvar, gs = out_grad * scale:
//   x_grad = invvar * (gs - xhat * mean(gs * xhat)),  scale_grad = sum_rows(out_grad * xhat).
absl::Status RmsNormGradKernel(KernelContext& ctx) {
  const Tensor& x = *ctx.input(0);
  const Tensor& scale = *ctx.input(1);
  const Tensor& invvar = *ctx.input(2);
  const Tensor& out_grad = *ctx.input(3);
  PDIST_ASSIGN_OR_RETURN(RowsCols rc, NormRowsCols(ctx, x.shape()));
  Tensor& x_grad = ctx.AllocateOutput(0);
  Tensor& scale_grad = ctx.AllocateOutput(1);
  PDIST_DISPATCH_FLOAT(x.dtype(), T, {
    ParallelFor(rc.rows, RowGrain(rc.cols), [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        ConstRow<T> xr(x.data<T>() + r * rc.cols, rc.cols);
        ConstRow<T> g(out_grad.data<T>() + r * rc.cols, rc.cols);
        const T inv = invvar.data<T>()[r];
        const auto gs = g * ConstRow<T>(scale.data<T>(), rc.cols);
        const T gs_xhat_mean = (gs * xr).mean() * inv;
        Row<T>(x_grad.data<T>() + r * rc.cols, rc.cols) = inv * (gs - xr * inv * gs_xhat_mean);
      }
    });
    ColumnSums<T>(rc, scale_grad.data<T>(), [&](int64_t r, int64_t c0, int64_t c1, Row<T>& acc) {
      const int64_t o = r * rc.cols + c0;
      acc += ConstRow<T>(out_grad.data<T>() + o, c1 - c0) * ConstRow<T>(x.data<T>() + o, c1 - c0) * invvar.data<T>()[r];
    });
  });
  return absl::OkStatus();
}

}  // namespace

void RegisterNormKernels(KernelRegistry& registry) {
  registry.Register(DeviceType::kCPU, "softmax", [](KernelContext& ctx) { return SoftmaxKernel(ctx, false); });
  registry.Register(DeviceType::kCPU, "log_softmax", [](KernelContext& ctx) { return SoftmaxKernel(ctx, true); });
  registry.Register(DeviceType::kCPU, "softmax_grad", [](KernelContext& ctx) { return SoftmaxGradKernel(ctx, false); });
  registry.Register(DeviceType::kCPU, "log_softmax_grad", [](KernelContext& ctx) { return SoftmaxGradKernel(ctx, true); });
  registry.Register(DeviceType::kCPU, "layer_norm", LayerNormKernel);
  registry.Register(DeviceType::kCPU, "layer_norm_grad", LayerNormGradKernel);
  registry.Register(DeviceType::kCPU, "rms_norm", RmsNormKernel);
  registry.Register(DeviceType::kCPU, "rms_norm_grad", RmsNormGradKernel);
}

}  // namespace pdist::exec::cpu

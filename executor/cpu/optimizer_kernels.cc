// CPU kernels for the optimizer ops sgd, momentum and adamw (the math is documented with each op
// in ir/ops/optimizer.cc) and their merged forms. Element-wise: parallel over elements, no
// reductions.
#include <Eigen/Core>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "executor/cpu/cpu_common.h"
#include "executor/cpu/cpu_kernels.h"
#include "executor/dtype_dispatch.h"
#include "executor/kernel.h"
#include "executor/sub_kernel.h"
#include "ir/attribute.h"
#include "ir/ops/merged_updates.h"
#include "ir/status.h"

namespace pdist::exec::cpu {
namespace {

template <typename T>
using Flat = Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>>;
template <typename T>
using ConstFlat = Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>>;

constexpr int64_t kGrain = 1 << 14;

// Runs fn(offset, count) over chunks of [0, n) in parallel; fn works on Eigen maps of the chunk.
template <typename Fn>
void ForChunks(int64_t n, Fn fn) {
  ParallelFor(n, kGrain, [&](int64_t begin, int64_t end) { fn(begin, end - begin); });
}

// Hyper-parameter tensors (learning rate, beta powers) hold one element of any float dtype.
double ScalarOf(const KernelContext& ctx, size_t input) { return ctx.input(input)->At(0); }

// An optional skip_update operand at `index` greater than zero: the step is skipped.
bool SkipsUpdate(const KernelContext& ctx, size_t index) {
  return ctx.input(index) != nullptr && ctx.input(index)->At(0) > 0;
}

// A skipped step: each result is a copy of the operand it is the new value of.
absl::Status KeepOperands(KernelContext& ctx, std::initializer_list<size_t> operand_of_result) {
  size_t r = 0;
  for (size_t operand : operand_of_result) ctx.SetOutput(r++, ctx.input(operand)->Clone());
  return absl::OkStatus();
}

// (param, learning_rate, grad[, skip_update]) → param_out.
absl::Status SgdKernel(KernelContext& ctx) {
  if (SkipsUpdate(ctx, 3)) return KeepOperands(ctx, {0});
  const Tensor& param = *ctx.input(0);
  const Tensor& grad = *ctx.input(2);
  const double lr = ScalarOf(ctx, 1);
  Tensor& param_out = ctx.AllocateOutput(0);
  PDIST_DISPATCH_FLOAT(param.dtype(), T, {
    ForChunks(param.num_elements(), [&](int64_t o, int64_t n) {
      Flat<T>(param_out.data<T>() + o, n) =
          ConstFlat<T>(param.data<T>() + o, n) - static_cast<T>(lr) * ConstFlat<T>(grad.data<T>() + o, n);
    });
  });
  return absl::OkStatus();
}

// (param, grad, velocity, learning_rate[, skip_update]) → param_out, velocity_out.
absl::Status MomentumKernel(KernelContext& ctx) {
  if (SkipsUpdate(ctx, 4)) return KeepOperands(ctx, {0, 2});
  const Tensor& param = *ctx.input(0);
  const Tensor& grad = *ctx.input(1);
  const Tensor& velocity = *ctx.input(2);
  const double lr = ScalarOf(ctx, 3);
  PDIST_ASSIGN_OR_RETURN(double mu, ir::GetDouble(ctx.attrs(), "mu"));
  PDIST_ASSIGN_OR_RETURN(bool nesterov, ir::GetBool(ctx.attrs(), "use_nesterov"));
  PDIST_ASSIGN_OR_RETURN(double decay, ir::GetDouble(ctx.attrs(), "regularization_coeff"));
  Tensor& param_out = ctx.AllocateOutput(0);
  Tensor& velocity_out = ctx.AllocateOutput(1);
  PDIST_DISPATCH_FLOAT(param.dtype(), T, {
    ForChunks(param.num_elements(), [&](int64_t o, int64_t n) {
      ConstFlat<T> p(param.data<T>() + o, n);
      const auto g = ConstFlat<T>(grad.data<T>() + o, n) + static_cast<T>(decay) * p;
      Flat<T> v_out(velocity_out.data<T>() + o, n);
      v_out = static_cast<T>(mu) * ConstFlat<T>(velocity.data<T>() + o, n) + g;
      Flat<T> p_out(param_out.data<T>() + o, n);
      if (nesterov) {
        p_out = p - static_cast<T>(lr) * (g + static_cast<T>(mu) * v_out);
      } else {
        p_out = p - static_cast<T>(lr) * v_out;
      }
    });
  });
  return absl::OkStatus();
}

// (param, grad, learning_rate, moment1, moment2, beta1_pow, beta2_pow[, skip_update])
//   → param_out, moment1_out, moment2_out, beta1_pow_out, beta2_pow_out.
absl::Status AdamWKernel(KernelContext& ctx) {
  if (SkipsUpdate(ctx, 7)) return KeepOperands(ctx, {0, 3, 4, 5, 6});
  const Tensor& param = *ctx.input(0);
  const Tensor& grad = *ctx.input(1);
  const Tensor& moment1 = *ctx.input(3);
  const Tensor& moment2 = *ctx.input(4);
  const double beta1_pow = ScalarOf(ctx, 5);
  const double beta2_pow = ScalarOf(ctx, 6);
  PDIST_ASSIGN_OR_RETURN(double beta1, ir::GetDouble(ctx.attrs(), "beta1"));
  PDIST_ASSIGN_OR_RETURN(double beta2, ir::GetDouble(ctx.attrs(), "beta2"));
  PDIST_ASSIGN_OR_RETURN(double epsilon, ir::GetDouble(ctx.attrs(), "epsilon"));
  PDIST_ASSIGN_OR_RETURN(double lr_ratio, ir::GetDouble(ctx.attrs(), "lr_ratio"));
  PDIST_ASSIGN_OR_RETURN(double coeff, ir::GetDouble(ctx.attrs(), "coeff"));
  PDIST_ASSIGN_OR_RETURN(bool with_decay, ir::GetBool(ctx.attrs(), "with_decay"));
  const double lr = ScalarOf(ctx, 2) * lr_ratio;
  const double decay = with_decay ? 1.0 - lr * coeff : 1.0;
  const double lr_t = lr * std::sqrt(1.0 - beta2_pow) / (1.0 - beta1_pow);
  const double eps_t = epsilon * std::sqrt(1.0 - beta2_pow);
  Tensor& param_out = ctx.AllocateOutput(0);
  Tensor& moment1_out = ctx.AllocateOutput(1);
  Tensor& moment2_out = ctx.AllocateOutput(2);
  PDIST_DISPATCH_FLOAT(param.dtype(), T, {
    ForChunks(param.num_elements(), [&](int64_t o, int64_t n) {
      ConstFlat<T> g(grad.data<T>() + o, n);
      Flat<T> m1(moment1_out.data<T>() + o, n);
      Flat<T> m2(moment2_out.data<T>() + o, n);
      m1 = static_cast<T>(beta1) * ConstFlat<T>(moment1.data<T>() + o, n) + static_cast<T>(1 - beta1) * g;
      m2 = static_cast<T>(beta2) * ConstFlat<T>(moment2.data<T>() + o, n) + static_cast<T>(1 - beta2) * g.square();
      Flat<T>(param_out.data<T>() + o, n) = static_cast<T>(decay) * ConstFlat<T>(param.data<T>() + o, n) -
                                            static_cast<T>(lr_t) * m1 / (m2.sqrt() + static_cast<T>(eps_t));
    });
  });
  ctx.SetOutput(3, TensorFromDoubles(ctx.output_type(3), {beta1_pow * beta1}, ctx.allocator()));
  ctx.SetOutput(4, TensorFromDoubles(ctx.output_type(4), {beta2_pow * beta2}, ctx.allocator()));
  return absl::OkStatus();
}

// merged_sgd / merged_momentum / merged_adamw (ir/ops/merged_updates.h): `base` run on each
// parameter's operands in its own layout, its results those parameter's, and under
// multi_precision the new master rounded as the cast kernel rounds it — the numbers of the base
// op and the cast by construction.
KernelFn MergedKernel(const ir::MergedUpdate& m, KernelFn base) {
  return [&m, base = std::move(base)](KernelContext& ctx) -> absl::Status {
    const size_t per_parameter = ir::MergedResults(m, ctx.attrs());
    for (size_t p = 0; p < ir::MergedParameters(m, ctx.num_inputs()); ++p) {
      const size_t first = p * per_parameter;
      std::vector<TensorType> types;
      for (size_t r = 0; r < m.results; ++r) types.push_back(ctx.output_type(first + r));
      PDIST_ASSIGN_OR_RETURN(
          std::vector<Tensor> results,
          RunKernelAs(base, ctx.op(), ctx,
                      ir::BaseOperands<const Tensor*>(m, p, [&ctx](size_t i) { return ctx.input(i); }), std::move(types)));
      if (per_parameter > m.results) {
        ctx.SetOutput(first + m.results, CastTensor(results[0], ctx.output_type(first + m.results).dtype));
      }
      for (size_t r = 0; r < m.results; ++r) ctx.SetOutput(first + r, std::move(results[r]));
    }
    return absl::OkStatus();
  };
}

}  // namespace

void RegisterOptimizerKernels(KernelRegistry& registry) {
  const std::map<std::string, KernelFn> kernels = {
      {"sgd", SgdKernel}, {"momentum", MomentumKernel}, {"adamw", AdamWKernel}};
  for (const auto& [type, kernel] : kernels) registry.Register(DeviceType::kCPU, type, kernel);
  for (const ir::MergedUpdate& m : ir::MergedUpdates()) {
    registry.Register(DeviceType::kCPU, m.merged, MergedKernel(m, kernels.at(m.base)));
  }
}

}  // namespace pdist::exec::cpu

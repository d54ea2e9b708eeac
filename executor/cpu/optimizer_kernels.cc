// CPU kernels for the optimizer ops sgd, momentum, adamw and merged_adamw (the math is documented with each op
// in ir/ops/optimizer.cc). Element-wise: parallel over elements, no reductions.
#include <Eigen/Core>
#include <array>
#include <cmath>

#include "executor/cpu/cpu_common.h"
#include "executor/cpu/cpu_kernels.h"
#include "executor/dtype_dispatch.h"
#include "executor/kernel.h"
#include "ir/attribute.h"
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

// adamw's attributes.
struct AdamWAttrs {
  double beta1, beta2, epsilon, lr_ratio, coeff;
  bool with_decay;
};

absl::StatusOr<AdamWAttrs> AdamWAttrsOf(const KernelContext& ctx) {
  AdamWAttrs a;
  PDIST_ASSIGN_OR_RETURN(a.beta1, ir::GetDouble(ctx.attrs(), "beta1"));
  PDIST_ASSIGN_OR_RETURN(a.beta2, ir::GetDouble(ctx.attrs(), "beta2"));
  PDIST_ASSIGN_OR_RETURN(a.epsilon, ir::GetDouble(ctx.attrs(), "epsilon"));
  PDIST_ASSIGN_OR_RETURN(a.lr_ratio, ir::GetDouble(ctx.attrs(), "lr_ratio"));
  PDIST_ASSIGN_OR_RETURN(a.coeff, ir::GetDouble(ctx.attrs(), "coeff"));
  PDIST_ASSIGN_OR_RETURN(a.with_decay, ir::GetBool(ctx.attrs(), "with_decay"));
  return a;
}

// One parameter's adamw: operands at in[0..5] = param, grad, moment1, moment2, beta1_pow,
// beta2_pow; results 0..4 of `ctx` from `first_result` on. Shared by adamw and merged_adamw, so
// that a merged update is bit for bit the parameter's own.
absl::Status AdamWUpdate(KernelContext& ctx, const std::array<const Tensor*, 6>& in, size_t first_result,
                         double learning_rate, bool skip, const AdamWAttrs& a) {
  const Tensor& param = *in[0];
  const Tensor& grad = *in[1];
  const Tensor& moment1 = *in[2];
  const Tensor& moment2 = *in[3];
  const double beta1_pow = in[4]->At(0);
  const double beta2_pow = in[5]->At(0);
  if (skip) {
    for (size_t i = 0; i < 5; ++i) ctx.SetOutput(first_result + i, (i == 0 ? in[0] : in[i + 1])->Clone());
    return absl::OkStatus();
  }
  const double lr = learning_rate * a.lr_ratio;
  const double decay = a.with_decay ? 1.0 - lr * a.coeff : 1.0;
  const double lr_t = lr * std::sqrt(1.0 - beta2_pow) / (1.0 - beta1_pow);
  const double eps_t = a.epsilon * std::sqrt(1.0 - beta2_pow);
  Tensor& param_out = ctx.AllocateOutput(first_result);
  Tensor& moment1_out = ctx.AllocateOutput(first_result + 1);
  Tensor& moment2_out = ctx.AllocateOutput(first_result + 2);
  PDIST_DISPATCH_FLOAT(param.dtype(), T, {
    ForChunks(param.num_elements(), [&](int64_t o, int64_t n) {
      ConstFlat<T> g(grad.data<T>() + o, n);
      Flat<T> m1(moment1_out.data<T>() + o, n);
      Flat<T> m2(moment2_out.data<T>() + o, n);
      m1 = static_cast<T>(a.beta1) * ConstFlat<T>(moment1.data<T>() + o, n) + static_cast<T>(1 - a.beta1) * g;
      m2 = static_cast<T>(a.beta2) * ConstFlat<T>(moment2.data<T>() + o, n) + static_cast<T>(1 - a.beta2) * g.square();
      Flat<T>(param_out.data<T>() + o, n) = static_cast<T>(decay) * ConstFlat<T>(param.data<T>() + o, n) -
                                            static_cast<T>(lr_t) * m1 / (m2.sqrt() + static_cast<T>(eps_t));
    });
  });
  ctx.SetOutput(first_result + 3,
                TensorFromDoubles(ctx.output_type(first_result + 3), {beta1_pow * a.beta1}, ctx.allocator()));
  ctx.SetOutput(first_result + 4,
                TensorFromDoubles(ctx.output_type(first_result + 4), {beta2_pow * a.beta2}, ctx.allocator()));
  return absl::OkStatus();
}

// (param, grad, learning_rate, moment1, moment2, beta1_pow, beta2_pow[, skip_update])
//   → param_out, moment1_out, moment2_out, beta1_pow_out, beta2_pow_out.
absl::Status AdamWKernel(KernelContext& ctx) {
  PDIST_ASSIGN_OR_RETURN(AdamWAttrs attrs, AdamWAttrsOf(ctx));
  return AdamWUpdate(ctx, {ctx.input(0), ctx.input(1), ctx.input(3), ctx.input(4), ctx.input(5), ctx.input(6)}, 0,
                     ScalarOf(ctx, 2), SkipsUpdate(ctx, 7), attrs);
}

// (learning_rate, skip_update?, then per parameter: param, grad, moment1, moment2, beta1_pow,
// beta2_pow) → per parameter adamw's five results: each parameter updated as its adamw would.
absl::Status MergedAdamWKernel(KernelContext& ctx) {
  PDIST_ASSIGN_OR_RETURN(AdamWAttrs attrs, AdamWAttrsOf(ctx));
  const double lr = ScalarOf(ctx, 0);
  const bool skip = SkipsUpdate(ctx, 1);
  for (size_t at = 2, result = 0; at + 6 <= ctx.num_inputs(); at += 6, result += 5) {
    PDIST_RETURN_IF_ERROR(AdamWUpdate(ctx,
                                      {ctx.input(at), ctx.input(at + 1), ctx.input(at + 2), ctx.input(at + 3),
                                       ctx.input(at + 4), ctx.input(at + 5)},
                                      result, lr, skip, attrs));
  }
  return absl::OkStatus();
}

}  // namespace

void RegisterOptimizerKernels(KernelRegistry& registry) {
  registry.Register(DeviceType::kCPU, "sgd", SgdKernel);
  registry.Register(DeviceType::kCPU, "momentum", MomentumKernel);
  registry.Register(DeviceType::kCPU, "adamw", AdamWKernel);
  registry.Register(DeviceType::kCPU, "merged_adamw", MergedAdamWKernel);
}

}  // namespace pdist::exec::cpu

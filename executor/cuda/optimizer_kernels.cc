// Host side of the CUDA sgd, momentum, adamw and their merged forms (device side:
// optimizer_launch.cu). The learning rate, the beta powers and skip_update stay on the device:
// the kernel reads them, so a step never waits for the host.
#include <array>
#include <vector>

#include "absl/strings/str_cat.h"
#include "executor/cuda/cuda_backend.h"
#include "executor/cuda/cuda_kernels.h"
#include "executor/cuda/cuda_status.h"
#include "executor/cuda/elem_type.h"
#include "executor/cuda/launch.h"
#include "executor/kernel.h"
#include "ir/ops/merged_updates.h"
#include "ir/status.h"

namespace pdist::exec::cuda {
namespace {

// The gradient's element type: the parameter's, or bf16/f16 for an f32 parameter (a master
// weight updated from its low-precision gradient).
absl::StatusOr<ElemType> GradTypeOf(const KernelContext& ctx, const Tensor& param, const Tensor& grad) {
  const bool mixed = param.dtype() == ir::DataType::kFloat32 &&
                     ir::IsLowPrecisionFloat(grad.dtype());
  if (grad.dtype() != param.dtype() && !mixed) {
    return absl::InvalidArgumentError(absl::StrCat(ctx.op().type(), ": gradient ", ir::DataTypeName(grad.dtype()),
                                                   " for a ", ir::DataTypeName(param.dtype()),
                                                   " parameter; expected the same dtype, or bf16/f16 for f32"));
  }
  return ElemTypeOf(ctx.op().type().c_str(), grad.dtype());
}

// Operand `input` (one element on the device; absent: a null reference) of `ctx`'s op.
absl::StatusOr<ScalarRef> ScalarOf(const KernelContext& ctx, size_t input, const char* name) {
  const Tensor* t = ctx.input(input);
  if (t == nullptr) return ScalarRef{};
  PDIST_ASSIGN_OR_RETURN(ElemType type, ElemTypeOf(absl::StrCat(ctx.op().type(), "'s ", name).c_str(), t->dtype()));
  return ScalarRef{t->raw(), type};
}

// What every parameter of an update (or a merged one) shares: the element types of the parameter
// at operand `param` and of its gradient at `grad`, the learning rate and skip_update.
struct UpdateShared {
  ElemType type, grad_type;
  ScalarRef lr, skip;
};
absl::StatusOr<UpdateShared> UpdateSharedOf(const KernelContext& ctx, size_t param, size_t grad, size_t lr, size_t skip) {
  UpdateShared u;
  PDIST_ASSIGN_OR_RETURN(u.type, ElemTypeOf(ctx.op().type().c_str(), ctx.input(param)->dtype()));
  PDIST_ASSIGN_OR_RETURN(u.grad_type, GradTypeOf(ctx, *ctx.input(param), *ctx.input(grad)));
  PDIST_ASSIGN_OR_RETURN(u.lr, ScalarOf(ctx, lr, "learning_rate"));
  PDIST_ASSIGN_OR_RETURN(u.skip, ScalarOf(ctx, skip, "skip_update"));
  return u;
}

// (param, learning_rate, grad, skip_update?) → param_out.
absl::Status SgdKernel(KernelContext& ctx) {
  const Tensor& param = *ctx.input(0);
  PDIST_ASSIGN_OR_RETURN(UpdateShared u, UpdateSharedOf(ctx, 0, 2, 1, 3));
  Tensor& param_out = ctx.AllocateOutput(0);
  return CudaStatus(LaunchSgd(u.type, u.grad_type, param.raw(), ctx.input(2)->raw(), u.lr, u.skip, param_out.raw(),
                              param.num_elements(), StreamOf(ctx)),
                    "sgd");
}

absl::StatusOr<MomentumConfig> MomentumConfigOf(const KernelContext& ctx) {
  MomentumConfig config;
  PDIST_ASSIGN_OR_RETURN(config.mu, ir::GetDouble(ctx.attrs(), "mu"));
  PDIST_ASSIGN_OR_RETURN(config.nesterov, ir::GetBool(ctx.attrs(), "use_nesterov"));
  PDIST_ASSIGN_OR_RETURN(config.regularization_coeff, ir::GetDouble(ctx.attrs(), "regularization_coeff"));
  return config;
}

// (param, grad, velocity, learning_rate, skip_update?) → param_out, velocity_out.
absl::Status MomentumKernel(KernelContext& ctx) {
  const Tensor& param = *ctx.input(0);
  PDIST_ASSIGN_OR_RETURN(UpdateShared u, UpdateSharedOf(ctx, 0, 1, 3, 4));
  PDIST_ASSIGN_OR_RETURN(MomentumConfig config, MomentumConfigOf(ctx));
  Tensor& param_out = ctx.AllocateOutput(0);
  Tensor& velocity_out = ctx.AllocateOutput(1);
  return CudaStatus(LaunchMomentum(u.type, u.grad_type, param.raw(), ctx.input(1)->raw(), ctx.input(2)->raw(), u.lr, u.skip,
                                   param_out.raw(), velocity_out.raw(), param.num_elements(), config, StreamOf(ctx)),
                    "momentum");
}

absl::StatusOr<AdamWConfig> AdamWConfigOf(const KernelContext& ctx) {
  AdamWConfig config;
  PDIST_ASSIGN_OR_RETURN(config.beta1, ir::GetDouble(ctx.attrs(), "beta1"));
  PDIST_ASSIGN_OR_RETURN(config.beta2, ir::GetDouble(ctx.attrs(), "beta2"));
  PDIST_ASSIGN_OR_RETURN(config.epsilon, ir::GetDouble(ctx.attrs(), "epsilon"));
  PDIST_ASSIGN_OR_RETURN(config.lr_ratio, ir::GetDouble(ctx.attrs(), "lr_ratio"));
  PDIST_ASSIGN_OR_RETURN(config.coeff, ir::GetDouble(ctx.attrs(), "coeff"));
  PDIST_ASSIGN_OR_RETURN(config.with_decay, ir::GetBool(ctx.attrs(), "with_decay"));
  return config;
}

// One parameter's tensors: operands at `at` (param, grad, moment1, moment2, beta1_pow,
// beta2_pow), results allocated from `first_result` (param_out, moment1_out, moment2_out,
// beta1_pow_out, beta2_pow_out); `pow_types` the element types of the beta powers' results.
absl::StatusOr<AdamWTensors> AdamWTensorsOf(KernelContext& ctx, const std::array<size_t, 6>& at, size_t first_result,
                                            BetaPowTypes* pow_types) {
  AdamWTensors t;
  t.param = ctx.input(at[0])->raw();
  t.grad = ctx.input(at[1])->raw();
  t.moment1 = ctx.input(at[2])->raw();
  t.moment2 = ctx.input(at[3])->raw();
  PDIST_ASSIGN_OR_RETURN(t.beta1_pow, ScalarOf(ctx, at[4], "beta1_pow"));
  PDIST_ASSIGN_OR_RETURN(t.beta2_pow, ScalarOf(ctx, at[5], "beta2_pow"));
  t.param_out = ctx.AllocateOutput(first_result).raw();
  t.moment1_out = ctx.AllocateOutput(first_result + 1).raw();
  t.moment2_out = ctx.AllocateOutput(first_result + 2).raw();
  Tensor& beta1_pow_out = ctx.AllocateOutput(first_result + 3);
  Tensor& beta2_pow_out = ctx.AllocateOutput(first_result + 4);
  t.beta1_pow_out = beta1_pow_out.raw();
  t.beta2_pow_out = beta2_pow_out.raw();
  t.n = ctx.input(at[0])->num_elements();
  PDIST_ASSIGN_OR_RETURN(pow_types->beta1, ElemTypeOf(absl::StrCat(ctx.op().type(), "'s beta1_pow_out").c_str(),
                                                      beta1_pow_out.dtype()));
  PDIST_ASSIGN_OR_RETURN(pow_types->beta2, ElemTypeOf(absl::StrCat(ctx.op().type(), "'s beta2_pow_out").c_str(),
                                                      beta2_pow_out.dtype()));
  return t;
}

// (param, grad, learning_rate, moment1, moment2, beta1_pow, beta2_pow, skip_update?)
//   → param_out, moment1_out, moment2_out, beta1_pow_out, beta2_pow_out.
absl::Status AdamWKernel(KernelContext& ctx) {
  PDIST_ASSIGN_OR_RETURN(UpdateShared u, UpdateSharedOf(ctx, 0, 1, 2, 7));
  PDIST_ASSIGN_OR_RETURN(AdamWConfig config, AdamWConfigOf(ctx));
  BetaPowTypes pow_types;
  PDIST_ASSIGN_OR_RETURN(AdamWTensors t, AdamWTensorsOf(ctx, {0, 1, 3, 4, 5, 6}, 0, &pow_types));
  return CudaStatus(LaunchAdamW(u.type, u.grad_type, t.param, t.grad, u.lr, t.moment1, t.moment2, t.beta1_pow,
                                t.beta2_pow, u.skip, t.param_out, t.moment1_out, t.moment2_out, t.beta1_pow_out,
                                t.beta2_pow_out, pow_types, t.n, config, StreamOf(ctx)),
                    "adamw");
}

// How many parameters a merged op updates, and its results per parameter (ir/ops/merged_updates.h).
size_t MergedParameters(const KernelContext& ctx) {
  return ir::MergedParameters(*ir::MergedUpdateOfMerged(ctx.op().type()), ctx.num_inputs());
}
size_t MergedResults(const KernelContext& ctx) {
  return ir::MergedResults(*ir::MergedUpdateOfMerged(ctx.op().type()), ctx.attrs());
}

// Parameter p's rounded copy under multi_precision (its last result, allocated here), or null.
void* RoundedOut(KernelContext& ctx, size_t p) {
  const ir::MergedUpdate& m = *ir::MergedUpdateOfMerged(ctx.op().type());
  const size_t per_parameter = ir::MergedResults(m, ctx.attrs());
  return per_parameter > m.results ? ctx.AllocateOutput(p * per_parameter + m.results).raw() : nullptr;
}

// (learning_rate, skip_update?, then per parameter: param, grad, moment1, moment2, beta1_pow,
// beta2_pow) → per parameter adamw's five results (and the rounded copy under multi_precision),
// in a launch per 24 parameters.
absl::Status MergedAdamWKernel(KernelContext& ctx) {
  PDIST_ASSIGN_OR_RETURN(UpdateShared u, UpdateSharedOf(ctx, 2, 3, 0, 1));
  PDIST_ASSIGN_OR_RETURN(AdamWConfig config, AdamWConfigOf(ctx));
  // Every parameter's operands have the first one's dtypes (merged_adamw's shape inference), its
  // beta powers included.
  std::vector<AdamWTensors> tensors(MergedParameters(ctx));
  BetaPowTypes pow_types;
  for (size_t p = 0; p < tensors.size(); ++p) {
    const size_t at = 2 + 6 * p;
    PDIST_ASSIGN_OR_RETURN(tensors[p], AdamWTensorsOf(ctx, {at, at + 1, at + 2, at + 3, at + 4, at + 5},
                                                      MergedResults(ctx) * p, &pow_types));
    tensors[p].rounded_out = RoundedOut(ctx, p);
  }
  return CudaStatus(LaunchMergedAdamW(u.type, u.grad_type, tensors.data(), static_cast<int64_t>(tensors.size()), u.lr,
                                      u.skip, pow_types, config, StreamOf(ctx)),
                    "merged_adamw");
}

// (learning_rate, skip_update?, then per parameter: param, grad) → per parameter param_out (and
// the rounded copy under multi_precision).
absl::Status MergedSgdKernel(KernelContext& ctx) {
  PDIST_ASSIGN_OR_RETURN(UpdateShared u, UpdateSharedOf(ctx, 2, 3, 0, 1));
  std::vector<SgdTensors> tensors(MergedParameters(ctx));
  for (size_t p = 0; p < tensors.size(); ++p) {
    tensors[p] = {.param = ctx.input(2 + 2 * p)->raw(), .grad = ctx.input(3 + 2 * p)->raw(),
                  .param_out = ctx.AllocateOutput(MergedResults(ctx) * p).raw(), .rounded_out = RoundedOut(ctx, p),
                  .n = ctx.input(2 + 2 * p)->num_elements()};
  }
  return CudaStatus(LaunchMergedSgd(u.type, u.grad_type, tensors.data(), static_cast<int64_t>(tensors.size()), u.lr,
                                    u.skip, StreamOf(ctx)),
                    "merged_sgd");
}

// (learning_rate, skip_update?, then per parameter: param, grad, velocity) → per parameter
// param_out, velocity_out (and the rounded copy under multi_precision).
absl::Status MergedMomentumKernel(KernelContext& ctx) {
  PDIST_ASSIGN_OR_RETURN(UpdateShared u, UpdateSharedOf(ctx, 2, 3, 0, 1));
  PDIST_ASSIGN_OR_RETURN(MomentumConfig config, MomentumConfigOf(ctx));
  std::vector<MomentumTensors> tensors(MergedParameters(ctx));
  for (size_t p = 0; p < tensors.size(); ++p) {
    const size_t at = 2 + 3 * p, first = MergedResults(ctx) * p;
    tensors[p] = {.param = ctx.input(at)->raw(), .grad = ctx.input(at + 1)->raw(), .velocity = ctx.input(at + 2)->raw(),
                  .param_out = ctx.AllocateOutput(first).raw(), .velocity_out = ctx.AllocateOutput(first + 1).raw(),
                  .rounded_out = RoundedOut(ctx, p), .n = ctx.input(at)->num_elements()};
  }
  return CudaStatus(LaunchMergedMomentum(u.type, u.grad_type, tensors.data(), static_cast<int64_t>(tensors.size()),
                                         u.lr, u.skip, config, StreamOf(ctx)),
                    "merged_momentum");
}

}  // namespace

void RegisterOptimizerKernels(KernelRegistry& registry) {
  registry.Register(DeviceType::kCUDA, "adamw", AdamWKernel);
  registry.Register(DeviceType::kCUDA, "sgd", SgdKernel);
  registry.Register(DeviceType::kCUDA, "momentum", MomentumKernel);
  registry.Register(DeviceType::kCUDA, "merged_adamw", MergedAdamWKernel);
  registry.Register(DeviceType::kCUDA, "merged_sgd", MergedSgdKernel);
  registry.Register(DeviceType::kCUDA, "merged_momentum", MergedMomentumKernel);
}

}  // namespace pdist::exec::cuda

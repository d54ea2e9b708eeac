// CPU kernels of the unary family: scale, the activations and their gradients (Eigen array
// expressions, vectorised), cast, and dropout with its counter-based mask.
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include <Eigen/Core>
#include <unsupported/Eigen/SpecialFunctions>

#include "executor/cpu/cpu_common.h"
#include "executor/cpu/cpu_kernels.h"
#include "executor/dropout_draw.h"
#include "executor/dtype_dispatch.h"
#include "executor/kernel.h"
#include "executor/math/activation.h"
#include "executor/random.h"
#include "ir/status.h"

namespace pdist::exec::cpu {
namespace {

constexpr int64_t kGrain = 32768;  // elements per thread before a loop is split

template <typename T>
using ArrayMap = Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>>;
template <typename T>
using ConstArrayMap = Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>>;

// out = f(in...) over same-shape tensors: f maps Eigen array segments to an array expression,
// evaluated chunk by chunk across threads.
template <typename T, typename F, typename... In>
void MapArrays(Tensor& out, const F& f, const In&... in) {
  ParallelFor(out.num_elements(), kGrain, [&](int64_t begin, int64_t end) {
    const int64_t n = end - begin;
    ArrayMap<T>(out.data<T>() + begin, n) = f(ConstArrayMap<T>(in.template data<T>() + begin, n)...);
  });
}

template <typename Act>
absl::Status Forward(KernelContext& ctx) {
  const Tensor& x = *ctx.input(0);
  Tensor& out = ctx.AllocateOutput(0);
  PDIST_DISPATCH_FLOAT(x.dtype(), T, { MapArrays<T>(out, [](const auto& a) { return Act::Forward(a); }, x); });
  return absl::OkStatus();
}

template <typename Act>
absl::Status Backward(KernelContext& ctx) {
  const Tensor& saved = *ctx.input(0);
  const Tensor& out_grad = *ctx.input(1);
  Tensor& x_grad = ctx.AllocateOutput(0);
  PDIST_DISPATCH_FLOAT(saved.dtype(), T, {
    MapArrays<T>(x_grad, [](const auto& s, const auto& g) { return Act::Backward(s, g); }, saved, out_grad);
  });
  return absl::OkStatus();
}

// gelu and gelu_grad pick the erf or the tanh form from the `approximate` attribute.
absl::Status Gelu(KernelContext& ctx) {
  PDIST_ASSIGN_OR_RETURN(bool approximate, ir::GetBool(ctx.attrs(), "approximate"));
  return approximate ? Forward<math::GeluTanh>(ctx) : Forward<math::GeluErf>(ctx);
}
absl::Status GeluGrad(KernelContext& ctx) {
  PDIST_ASSIGN_OR_RETURN(bool approximate, ir::GetBool(ctx.attrs(), "approximate"));
  return approximate ? Backward<math::GeluTanh>(ctx) : Backward<math::GeluErf>(ctx);
}

absl::Status Scale(KernelContext& ctx) {
  PDIST_ASSIGN_OR_RETURN(double scale, ir::GetDouble(ctx.attrs(), "scale"));
  PDIST_ASSIGN_OR_RETURN(double bias, ir::GetDouble(ctx.attrs(), "bias"));
  PDIST_ASSIGN_OR_RETURN(bool bias_after_scale, ir::GetBool(ctx.attrs(), "bias_after_scale"));
  const Tensor& x = *ctx.input(0);
  Tensor& out = ctx.AllocateOutput(0);
  PDIST_DISPATCH_FLOAT(x.dtype(), T, {
    const T s = static_cast<T>(scale);
    const T b = static_cast<T>(bias);
    if (bias_after_scale) {
      MapArrays<T>(out, [s, b](const auto& a) { return a * s + b; }, x);
    } else {
      MapArrays<T>(out, [s, b](const auto& a) { return (a + b) * s; }, x);
    }
  });
  return absl::OkStatus();
}

absl::Status Cast(KernelContext& ctx) {
  ctx.SetOutput(0, CastTensor(*ctx.input(0), ctx.output_type(0).dtype));
  return absl::OkStatus();
}

// The global flat index of every element of a piece of shape `local` at `offsets` in a tensor
// of shape `global`, in the piece's row-major order.
std::vector<int64_t> GlobalIndices(const Shape& local, const std::vector<int64_t>& global,
                                   const std::vector<int64_t>& offsets) {
  const auto rank = static_cast<int64_t>(local.size());
  std::vector<int64_t> stride(local.size(), 1);
  for (int64_t d = rank - 2; d >= 0; --d) stride[d] = stride[d + 1] * global[d + 1];
  int64_t n = 1;
  for (int64_t d : local) n *= d;
  std::vector<int64_t> out(static_cast<size_t>(n));
  std::vector<int64_t> index(local.size(), 0);
  for (int64_t i = 0; i < n; ++i) {
    int64_t flat = 0;
    for (int64_t d = 0; d < rank; ++d) flat += (offsets[d] + index[d]) * stride[d];
    out[static_cast<size_t>(i)] = flat;
    for (int64_t d = rank - 1; d >= 0 && ++index[d] == local[d]; --d) index[d] = 0;
  }
  return out;
}

// mask[i] = uniform(seed, i) >= p, with uniform the top 53 bits of output i of splitmix64 (state
// key + i·golden, one Mix64 from executor/random.h), compared as integers: the mask is a function
// of (seed, i) only, so it does not depend on threads or chunking. At test time all are kept.
absl::Status Dropout(KernelContext& ctx) {
  std::optional<int64_t> seed_operand;
  if (const Tensor* seed = ctx.input(1)) {  // i32 or i64, read exactly
    seed_operand = seed->dtype() == DataType::kInt64 ? seed->data<int64_t>()[0] : seed->data<int32_t>()[0];
  }
  PDIST_ASSIGN_OR_RETURN(DropoutDrawPlan draw, PlanDropoutDraw(ctx, seed_operand));
  const double factor = draw.factor;
  const uint64_t key = draw.key, threshold = draw.threshold, first = draw.first;
  const Tensor& x = *ctx.input(0);
  Tensor& out = ctx.AllocateOutput(0);
  bool* mask = ctx.AllocateOutput(1).data<bool>();
  std::vector<int64_t> global_index;
  if (!draw.global_shape.empty()) global_index = GlobalIndices(x.shape(), draw.global_shape, draw.offsets);
  const int64_t* g = global_index.empty() ? nullptr : global_index.data();
  PDIST_DISPATCH_FLOAT(x.dtype(), T, {
    const T* in = x.data<T>();
    T* o = out.data<T>();
    const T f = static_cast<T>(factor);
    // Captured by value: stores through bool* may alias anything, which would force reloads.
    ParallelFor(x.num_elements(), kGrain, [=](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        const uint64_t n = first + static_cast<uint64_t>(g == nullptr ? i : g[i]);
        const bool keep = DropoutKeeps(key, n, threshold);
        mask[i] = keep;
        o[i] = keep ? in[i] * f : T(0);
      }
    });
  });
  return absl::OkStatus();
}

absl::Status DropoutGrad(KernelContext& ctx) {
  PDIST_ASSIGN_OR_RETURN(double factor, DropoutFactor(ctx.attrs()));
  const bool* mask = ctx.input(0)->data<bool>();
  const Tensor& out_grad = *ctx.input(1);
  Tensor& x_grad = ctx.AllocateOutput(0);
  PDIST_DISPATCH_FLOAT(out_grad.dtype(), T, {
    const T* g = out_grad.data<T>();
    T* dx = x_grad.data<T>();
    const T f = static_cast<T>(factor);
    ParallelFor(out_grad.num_elements(), kGrain, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) dx[i] = mask[i] ? g[i] * f : T(0);
    });
  });
  return absl::OkStatus();
}

template <typename Act>
void RegisterActivation(KernelRegistry& registry, const std::string& name) {
  registry.Register(DeviceType::kCPU, name, Forward<Act>);
  registry.Register(DeviceType::kCPU, name + "_grad", Backward<Act>);
}

}  // namespace

void RegisterActivationKernels(KernelRegistry& registry) {
  registry.Register(DeviceType::kCPU, "scale", Scale);
  RegisterActivation<math::Relu>(registry, "relu");
  registry.Register(DeviceType::kCPU, "gelu", Gelu);
  registry.Register(DeviceType::kCPU, "gelu_grad", GeluGrad);
  RegisterActivation<math::Silu>(registry, "silu");
  RegisterActivation<math::Tanh>(registry, "tanh");
  RegisterActivation<math::Exp>(registry, "exp");
  RegisterActivation<math::Sigmoid>(registry, "sigmoid");
  RegisterActivation<math::Erf>(registry, "erf");
  RegisterActivation<math::Sqrt>(registry, "sqrt");
  RegisterActivation<math::Rsqrt>(registry, "rsqrt");
  registry.Register(DeviceType::kCPU, "cast", Cast);
  registry.Register(DeviceType::kCPU, "dropout", Dropout);
  registry.Register(DeviceType::kCPU, "c_dropout", Dropout);  // the same draw, at global positions
  registry.Register(DeviceType::kCPU, "dropout_grad", DropoutGrad);
}

}  // namespace pdist::exec::cpu

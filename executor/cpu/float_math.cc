// WithFloatMath: bf16/f16 operands upcast to f32, the f32 kernel, results rounded back.
#include "executor/cpu/float_math.h"

#include <utility>
#include <vector>

namespace pdist::exec::cpu {

namespace {


bool TouchesLowPrecision(const KernelContext& ctx) {
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    if (ctx.input(i) != nullptr && ir::IsLowPrecisionFloat(ctx.input(i)->dtype())) return true;
  }
  for (size_t i = 0; i < ctx.num_outputs(); ++i) {
    if (ir::IsLowPrecisionFloat(ctx.output_type(i).dtype)) return true;
  }
  return false;
}

// The low-precision operand whose upcast `out` is, whole (the same buffer and elements) and of
// the result's declared dtype `want`, or nullptr.
const Tensor* UpcastSource(const Tensor& out, DataType want, const std::vector<Tensor>& upcast,
                           const KernelContext& ctx) {
  if (!out.defined()) return nullptr;
  for (size_t i = 0; i < upcast.size(); ++i) {
    if (upcast[i].defined() && upcast[i].buffer_id() == out.buffer_id() &&
        upcast[i].num_elements() == out.num_elements() && ctx.input(i)->dtype() == want) {
      return ctx.input(i);
    }
  }
  return nullptr;
}

}  // namespace

KernelFn WithFloatMath(KernelFn kernel) {
  return [kernel = std::move(kernel)](KernelContext& ctx) -> absl::Status {
    if (!TouchesLowPrecision(ctx)) return kernel(ctx);
    std::vector<Tensor> upcast(ctx.num_inputs());
    std::vector<const Tensor*> inputs(ctx.num_inputs(), nullptr);
    for (size_t i = 0; i < ctx.num_inputs(); ++i) {
      const Tensor* in = ctx.input(i);
      if (in == nullptr) continue;
      if (ir::IsLowPrecisionFloat(in->dtype())) {
        upcast[i] = CastTensor(*in, DataType::kFloat32);
        in = &upcast[i];
      }
      inputs[i] = in;
    }
    std::vector<TensorType> types;
    for (size_t i = 0; i < ctx.num_outputs(); ++i) {
      TensorType t = ctx.output_type(i);
      if (ir::IsLowPrecisionFloat(t.dtype)) t.dtype = DataType::kFloat32;
      types.push_back(std::move(t));
    }
    std::vector<Tensor> outputs(ctx.num_outputs());
    KernelContext f32(ctx.op(), std::move(inputs), &outputs);
    f32.OverrideOutputTypes(types);
    f32.set_placement(ctx.allocator(), ctx.stream());
    f32.set_keep_alive(ctx.scratch_list());
    f32.set_comm_groups(ctx.comm_groups());
    f32.set_micro_batch(ctx.micro_batch());
    if (absl::Status s = kernel(f32); !s.ok()) return s;
    for (size_t i = 0; i < ctx.num_outputs(); ++i) {
      const DataType want = ctx.output_type(i).dtype;
      Tensor& out = outputs[i];
      // A result the kernel made an operand's storage (KernelContext::AliasOperand, a view) is
      // that operand's upcast, so the operand itself (in the result's shape), not a rounding of
      // its copy.
      if (const Tensor* operand = UpcastSource(out, want, upcast, ctx)) {
        ctx.SetOutput(i, operand->shape() == out.shape() ? *operand : operand->Reshaped(out.shape()));
        continue;
      }
      if (out.defined() && out.dtype() != want) {
        CastInto(out, ctx.AllocateOutput(i));  // over a donated operand's storage, where there is one
      } else {
        ctx.SetOutput(i, std::move(out));
      }
    }
    return absl::OkStatus();
  };
}

void UseFloatMathForLowPrecision(KernelRegistry& registry) {
  for (const std::string& type : registry.OpTypes(DeviceType::kCPU)) {
    if (type == "cast") continue;
    registry.Register(DeviceType::kCPU, type, WithFloatMath(*registry.Find(DeviceType::kCPU, type)));
  }
}

}  // namespace pdist::exec::cpu

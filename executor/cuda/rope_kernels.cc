// Host side of the CUDA fused_rope and fused_rope_grad (device side: rope_launch.cu): the tables
// are made on the host by the CPU's code (executor/rope_tables.h: given sin/cos, or computed from
// rotary_emb_base; position ids checked) and uploaded in the compute type.
#include <cstring>
#include <optional>
#include <vector>

#include "executor/backend.h"
#include "executor/cuda/cuda_backend.h"
#include "executor/cuda/cuda_kernels.h"
#include "executor/cuda/cuda_status.h"
#include "executor/cuda/elem_type.h"
#include "executor/cuda/launch.h"
#include "executor/kernel.h"
#include "executor/rope_tables.h"
#include "ir/status.h"

namespace pdist::exec::cuda {
namespace {

// `t` on the host, converted to `dtype`; nullopt for an absent tensor.
absl::StatusOr<std::optional<Tensor>> HostCopy(const Tensor* t, ir::DataType dtype) {
  if (t == nullptr || !t->defined()) return std::optional<Tensor>();
  PDIST_ASSIGN_OR_RETURN(Tensor host, ToDevice(*t, Device::Cpu()));
  return std::optional<Tensor>(host.dtype() == dtype ? host : CastTensor(host, dtype));
}

// A [positions, head_dim] table of the compute type on the device.
template <typename C>
absl::StatusOr<Tensor> Upload(const C* table, int64_t positions, int64_t head_dim, ir::DataType dtype,
                              const Device& device) {
  Tensor host = Tensor::Empty({{positions, head_dim}, dtype});
  std::memcpy(host.raw(), table, static_cast<size_t>(host.num_bytes()));
  return ToDevice(host, device);
}

template <typename C>
absl::Status Rotate(KernelContext& ctx, ElemType type, ir::DataType compute, const std::vector<const Tensor*>& tensors,
                    const Tensor* sin, const Tensor* cos, const Tensor* position_ids, const RopeLayout& l, double base,
                    bool transpose) {
  PDIST_ASSIGN_OR_RETURN(std::optional<Tensor> host_sin, HostCopy(sin, compute));
  PDIST_ASSIGN_OR_RETURN(std::optional<Tensor> host_cos, HostCopy(cos, compute));
  PDIST_ASSIGN_OR_RETURN(std::optional<Tensor> host_pos, HostCopy(position_ids, ir::DataType::kInt64));
  PDIST_ASSIGN_OR_RETURN(RopeTables<C> tables,
                         MakeRopeTables<C>(l, host_sin ? &*host_sin : nullptr, host_cos ? &*host_cos : nullptr,
                                           host_pos ? &*host_pos : nullptr, base));
  PDIST_ASSIGN_OR_RETURN(Tensor device_sin, Upload(tables.sin, tables.positions, l.head_dim, compute, ctx.device()));
  PDIST_ASSIGN_OR_RETURN(Tensor device_cos, Upload(tables.cos, tables.positions, l.head_dim, compute, ctx.device()));
  const int64_t* positions =
      position_ids != nullptr && position_ids->defined() ? position_ids->data<int64_t>() : nullptr;
  for (size_t t = 0; t < 3; ++t) {
    Tensor& out = ctx.AllocateOutput(t);
    const Tensor* in = tensors[t];
    if (in == nullptr || !in->defined()) continue;
    PDIST_RETURN_IF_ERROR(CudaStatus(LaunchRope(type, in->raw(), out.raw(), in->shape()[2], l, device_sin.raw(),
                                                device_cos.raw(), positions, transpose, StreamOf(ctx)),
                                     ctx.op().type().c_str()));
  }
  return absl::OkStatus();
}

// Shared by fused_rope (q, k, v → out_q, out_k, out_v) and fused_rope_grad (out grads → input
// grads, transpose = true), as on the CPU.
absl::Status RopeKernel(KernelContext& ctx, const std::vector<const Tensor*>& tensors, const Tensor* sin,
                        const Tensor* cos, const Tensor* position_ids, bool transpose) {
  const Tensor& q = *tensors[0];
  PDIST_ASSIGN_OR_RETURN(ElemType type, ElemTypeOf(ctx.op().type().c_str(), q.dtype()));
  PDIST_ASSIGN_OR_RETURN(bool time_major, ir::GetBool(ctx.attrs(), "time_major"));
  PDIST_ASSIGN_OR_RETURN(bool adjacent, ir::GetBool(ctx.attrs(), "use_neox_rotary_style"));
  PDIST_ASSIGN_OR_RETURN(double base, ir::GetDouble(ctx.attrs(), "rotary_emb_base"));
  const RopeLayout l{
      q.shape()[time_major ? 1 : 0], q.shape()[time_major ? 0 : 1], q.shape()[2], q.shape()[3], time_major, adjacent};
  if (type == ElemType::kF64) {
    return Rotate<double>(ctx, type, ir::DataType::kFloat64, tensors, sin, cos, position_ids, l, base, transpose);
  }
  return Rotate<float>(ctx, type, ir::DataType::kFloat32, tensors, sin, cos, position_ids, l, base, transpose);
}

}  // namespace

void RegisterRopeKernels(KernelRegistry& registry) {
  registry.Register(DeviceType::kCUDA, "fused_rope", [](KernelContext& ctx) {
    return RopeKernel(ctx, {ctx.input(0), ctx.input(1), ctx.input(2)}, ctx.input(3), ctx.input(4), ctx.input(5),
                      /*transpose=*/false);
  });
  registry.Register(DeviceType::kCUDA, "fused_rope_grad", [](KernelContext& ctx) {
    return RopeKernel(ctx, {ctx.input(3), ctx.input(4), ctx.input(5)}, ctx.input(0), ctx.input(1), ctx.input(2),
                      /*transpose=*/true);
  });
}

}  // namespace pdist::exec::cuda

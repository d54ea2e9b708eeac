// Host side of the CUDA embedding and embedding_grad (device side: embedding_launch.cu). The ids
// are read on the host (a copy of the small id tensor, which waits for the compute stream): to
// name an id outside the vocabulary as the CPU does, and to sort the positions by id for the
// gradient's deterministic sums. A device-side check that defers the error is the faster form.
#include "executor/backend.h"
#include "executor/cuda/cuda_backend.h"
#include "executor/cuda/cuda_kernels.h"
#include "executor/cuda/cuda_status.h"
#include "executor/cuda/elem_type.h"
#include "executor/cuda/launch.h"
#include "executor/embedding_rows.h"
#include "executor/kernel.h"
#include "ir/status.h"

namespace pdist::exec::cuda {
namespace {

// (x, weight [V, H]) → out [..., H].
absl::Status EmbeddingKernel(KernelContext& ctx) {
  const Tensor& ids = *ctx.input(0);
  const Tensor& weight = *ctx.input(1);
  PDIST_ASSIGN_OR_RETURN(ElemType type, ElemTypeOf("embedding", weight.dtype()));
  PDIST_ASSIGN_OR_RETURN(int64_t padding_idx, ir::GetInt(ctx.attrs(), "padding_idx"));
  PDIST_ASSIGN_OR_RETURN(Tensor host_ids, ToDevice(ids, Device::Cpu()));
  PDIST_RETURN_IF_ERROR(CheckIds(host_ids, weight.shape()[0], "embedding id"));
  Tensor& out = ctx.AllocateOutput(0);
  return CudaStatus(LaunchEmbedding(type, ids.raw(), ids.dtype() == ir::DataType::kInt64, weight.raw(), out.raw(),
                                    ids.num_elements(), weight.shape()[1], padding_idx, StreamOf(ctx)),
                    "embedding");
}

// (x, weight, out_grad) → weight_grad.
absl::Status EmbeddingGradKernel(KernelContext& ctx) {
  const Tensor& ids = *ctx.input(0);
  const Tensor& out_grad = *ctx.input(2);
  PDIST_ASSIGN_OR_RETURN(ElemType type, ElemTypeOf("embedding_grad", out_grad.dtype()));
  PDIST_ASSIGN_OR_RETURN(int64_t padding_idx, ir::GetInt(ctx.attrs(), "padding_idx"));
  Tensor& weight_grad = ctx.AllocateOutput(0);
  const int64_t vocab = weight_grad.shape()[0];
  PDIST_ASSIGN_OR_RETURN(Tensor host_ids, ToDevice(ids, Device::Cpu()));
  PDIST_RETURN_IF_ERROR(CheckIds(host_ids, vocab, "embedding id"));
  const IdGroups groups = GroupIds(host_ids, vocab);
  auto upload = [&](const std::vector<int64_t>& v) {
    return ToDevice(TensorFromDoubles({{static_cast<int64_t>(v.size())}, ir::DataType::kInt64},
                                      std::vector<double>(v.begin(), v.end())),
                    ctx.device());
  };
  PDIST_ASSIGN_OR_RETURN(Tensor start, upload(groups.start));
  PDIST_ASSIGN_OR_RETURN(Tensor order, upload(groups.order));
  return CudaStatus(LaunchEmbeddingGrad(type, start.data<int64_t>(), order.data<int64_t>(), out_grad.raw(),
                                        weight_grad.raw(), vocab, weight_grad.shape()[1], padding_idx, StreamOf(ctx)),
                    "embedding_grad");
}

}  // namespace

void RegisterEmbeddingKernels(KernelRegistry& registry) {
  registry.Register(DeviceType::kCUDA, "embedding", EmbeddingKernel);
  registry.Register(DeviceType::kCUDA, "embedding_grad", EmbeddingGradKernel);
}

}  // namespace pdist::exec::cuda

// Host side of the CUDA vocab-parallel local forms (ir/ops/local_forms.cc): c_embedding and its
// gradient (embedding's launchers on the rank's rows: ids mapped to local rows on the host,
// other ranks' ids reading zeros), and c_softmax_with_cross_entropy with its gradients (device
// side: vocab_parallel_launch.cu). The forward and the gradient from the logits all-reduce twice
// inside the kernel, through the group's communicator on the kernel's own stream: NCCL orders
// them between the passes with no host wait.
#include <vector>

#include "absl/strings/str_cat.h"
#include "executor/backend.h"
#include "executor/comm/comm_groups.h"
#include "executor/cuda/cuda_backend.h"
#include "executor/cuda/cuda_kernels.h"
#include "executor/cuda/cuda_status.h"
#include "executor/cuda/elem_type.h"
#include "executor/cuda/launch.h"
#include "executor/dtype_dispatch.h"
#include "executor/embedding_rows.h"
#include "executor/kernel.h"
#include "ir/status.h"

namespace pdist::exec::cuda {
namespace {

// Each id as a row of this rank's piece [start, start + rows), or `outside` for another rank's.
absl::StatusOr<std::vector<int64_t>> LocalRows(const Tensor& ids, int64_t start, int64_t rows, int64_t outside) {
  PDIST_ASSIGN_OR_RETURN(Tensor host, ToDevice(ids, Device::Cpu()));
  std::vector<int64_t> local(static_cast<size_t>(host.num_elements()));
  PDIST_DISPATCH_INDEX(host.dtype(), I, {
    for (size_t i = 0; i < local.size(); ++i) {
      const auto id = static_cast<int64_t>(host.data<I>()[i]);
      local[i] = id >= start && id < start + rows ? id - start : outside;
    }
  });
  return local;
}

absl::StatusOr<Tensor> Upload(const KernelContext& ctx, const std::vector<int64_t>& values) {
  return ToDevice(TensorFromDoubles({{static_cast<int64_t>(values.size())}, ir::DataType::kInt64},
                                    std::vector<double>(values.begin(), values.end())),
                  ctx.device());
}

// (ids, table piece [rows, H]) → out: the piece's rows, zeros for other ranks' ids.
absl::Status CEmbeddingKernel(KernelContext& ctx) {
  const Tensor& table = *ctx.input(1);
  PDIST_ASSIGN_OR_RETURN(ElemType type, ElemTypeOf("c_embedding", table.dtype()));
  PDIST_ASSIGN_OR_RETURN(int64_t start, ir::GetInt(ctx.attrs(), "start_index"));
  const int64_t rows = table.shape()[0];
  PDIST_ASSIGN_OR_RETURN(std::vector<int64_t> local, LocalRows(*ctx.input(0), start, rows, /*outside=*/-1));
  PDIST_ASSIGN_OR_RETURN(Tensor ids, Upload(ctx, local));
  Tensor& out = ctx.AllocateOutput(0);
  // -1 as the padding row: the launcher writes zeros for it.
  return CudaStatus(LaunchEmbedding(type, ids.raw(), /*ids_64=*/true, table.raw(), out.raw(), ids.num_elements(),
                                    table.shape()[1], /*padding_idx=*/-1, StreamOf(ctx)),
                    "c_embedding");
}

// (ids, table piece, out_grad) → the piece's gradient, each row summing its positions in order.
absl::Status CEmbeddingGradKernel(KernelContext& ctx) {
  const Tensor& out_grad = *ctx.input(2);
  PDIST_ASSIGN_OR_RETURN(ElemType type, ElemTypeOf("c_embedding_grad", out_grad.dtype()));
  PDIST_ASSIGN_OR_RETURN(int64_t start, ir::GetInt(ctx.attrs(), "start_index"));
  Tensor& grad = ctx.AllocateOutput(0);
  const int64_t rows = grad.shape()[0];
  // Other ranks' ids group into an extra row `rows`, which the launcher (rows rows) never reads.
  PDIST_ASSIGN_OR_RETURN(std::vector<int64_t> local, LocalRows(*ctx.input(0), start, rows, /*outside=*/rows));
  const IdGroups groups = GroupIds(TensorFromDoubles({{static_cast<int64_t>(local.size())}, ir::DataType::kInt64},
                                                     std::vector<double>(local.begin(), local.end())),
                                   rows + 1);
  PDIST_ASSIGN_OR_RETURN(Tensor start_of, Upload(ctx, groups.start));
  PDIST_ASSIGN_OR_RETURN(Tensor order, Upload(ctx, groups.order));
  return CudaStatus(LaunchEmbeddingGrad(type, start_of.data<int64_t>(), order.data<int64_t>(), out_grad.raw(),
                                        grad.raw(), rows, grad.shape()[1], /*padding_idx=*/-1, StreamOf(ctx)),
                    "c_embedding_grad");
}

// A vocab piece of the cross entropy as its kernels see it: the storage type, where the piece
// starts among the classes, the ignored label, and `lanes` rows of `n` classes. Only the form
// the vocab-parallel cross entropy takes is accepted: hard labels, softmax, the last axis.
struct VocabPiece {
  ElemType type;
  int64_t start = 0, ignore_index = 0, n = 0, lanes = 0;
  bool label_64 = false;
};

absl::StatusOr<VocabPiece> ReadVocabPiece(const KernelContext& ctx, const Tensor& classes, const Tensor& label) {
  VocabPiece piece;
  PDIST_ASSIGN_OR_RETURN(piece.type, ElemTypeOf(ctx.op().type().c_str(), classes.dtype()));
  PDIST_ASSIGN_OR_RETURN(bool soft_label, ir::GetBool(ctx.attrs(), "soft_label"));
  PDIST_ASSIGN_OR_RETURN(bool use_softmax, ir::GetBool(ctx.attrs(), "use_softmax"));
  PDIST_ASSIGN_OR_RETURN(int64_t axis, ir::GetInt(ctx.attrs(), "axis"));
  const auto rank = static_cast<int64_t>(classes.shape().size());
  if (rank == 0) {
    return absl::InvalidArgumentError(absl::StrCat(ctx.op().type(), ": classes of rank 0 (", classes.type().ToString(),
                                                   "); the classes are the last axis"));
  }
  if (soft_label || !use_softmax || (axis != -1 && axis != rank - 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat(ctx.op().type(), " needs a hard label, use_softmax and the last axis"));
  }
  PDIST_ASSIGN_OR_RETURN(piece.start, ir::GetInt(ctx.attrs(), "start_index"));
  PDIST_ASSIGN_OR_RETURN(piece.ignore_index, ir::GetInt(ctx.attrs(), "ignore_index"));
  piece.n = classes.shape().back();
  // One label per lane: a rank holding no classes still joins its group's all-reduces with
  // every lane, as its peers do.
  piece.lanes = label.num_elements();
  piece.label_64 = label.dtype() == ir::DataType::kInt64;
  return piece;
}

// The group's row max and sums of a logits piece (RowMax, an all-reduce (max), ExpSums, an
// all-reduce (sum)), in scratch kept until the stream's work has run (KernelContext::Scratch):
// max [lanes], sums [2·lanes] (Σ exp(x − max), then the label's logit), in the compute type.
struct GroupRowSums {
  Tensor max, sums;
};
absl::StatusOr<GroupRowSums> ReduceRows(KernelContext& ctx, const VocabPiece& p, const Tensor& logits,
                                        const Tensor& label) {
  const char* name = ctx.op().type().c_str();
  PDIST_ASSIGN_OR_RETURN(std::vector<int64_t> ranks, ir::GetIntList(ctx.attrs(), "ranks"));
  if (ctx.comm_groups() == nullptr || ctx.stream() == nullptr) {
    // Without a stream the all-reduces would go to NCCL's own, unordered after the kernels.
    return absl::FailedPreconditionError(
        absl::StrCat(name, " needs communicators and a stream (run it through the executor)"));
  }
  PDIST_ASSIGN_OR_RETURN(comm::Communicator * group, ctx.comm_groups()->Get(ranks));
  const ir::DataType compute = ir::ComputeDtype(logits.dtype());
  GroupRowSums r{ctx.Scratch({{p.lanes}, compute}), ctx.Scratch({{2 * p.lanes}, compute})};
  const cudaStream_t stream = StreamOf(ctx);
  PDIST_RETURN_IF_ERROR(
      CudaStatus(LaunchVocabParallelRowMax(p.type, logits.raw(), r.max.raw(), p.lanes, p.n, stream), name));
  PDIST_RETURN_IF_ERROR(group->AllReduce(r.max, r.max, comm::ReduceOp::kMax, ctx.stream()));
  PDIST_RETURN_IF_ERROR(CudaStatus(LaunchVocabParallelExpSums(p.type, logits.raw(), label.raw(), p.label_64,
                                                              r.max.raw(), r.sums.raw(), p.lanes, p.n, p.start, stream),
                                   name));
  PDIST_RETURN_IF_ERROR(group->AllReduce(r.sums, r.sums, comm::ReduceOp::kSum, ctx.stream()));
  return r;
}

// (logits piece [..., n], label [..., 1]) → softmax piece, loss: the group's row sums, then the
// softmax and the loss — the CPU kernel's steps, its f32 math for bf16/f16.
absl::Status CSoftmaxCrossEntropyKernel(KernelContext& ctx) {
  const Tensor& logits = *ctx.input(0);
  const Tensor& label = *ctx.input(1);
  PDIST_ASSIGN_OR_RETURN(const VocabPiece p, ReadVocabPiece(ctx, logits, label));
  PDIST_ASSIGN_OR_RETURN(GroupRowSums r, ReduceRows(ctx, p, logits, label));
  Tensor& softmax = ctx.AllocateOutput(0);
  Tensor& loss = ctx.AllocateOutput(1);
  // Without return_softmax the result is an empty f[0]: no softmax piece is written.
  void* softmax_out = softmax.num_elements() == logits.num_elements() ? softmax.raw() : nullptr;
  return CudaStatus(LaunchVocabParallelNormalize(p.type, logits.raw(), label.raw(), p.label_64, r.max.raw(),
                                                 r.sums.raw(), softmax_out, loss.raw(), p.lanes, p.n, p.ignore_index,
                                                 StreamOf(ctx)),
                    "c_softmax_with_cross_entropy");
}

// (label, softmax piece, loss_grad) → logits_grad piece.
absl::Status CSoftmaxCrossEntropyGradKernel(KernelContext& ctx) {
  const Tensor& label = *ctx.input(0);
  const Tensor& softmax = *ctx.input(1);
  PDIST_ASSIGN_OR_RETURN(const VocabPiece p, ReadVocabPiece(ctx, softmax, label));
  Tensor& dx = ctx.AllocateOutput(0);
  return CudaStatus(LaunchVocabParallelCrossEntropyGrad(p.type, label.raw(), p.label_64, softmax.raw(),
                                                        ctx.input(2)->raw(), dx.raw(), p.lanes, p.n, p.start,
                                                        p.ignore_index, StreamOf(ctx)),
                    "c_softmax_with_cross_entropy_grad");
}

// (label, logits piece, loss_grad) → logits_grad piece: the forward's row sums again, then the
// gradient of the softmax they give.
absl::Status CSoftmaxCrossEntropyGradFromLogitsKernel(KernelContext& ctx) {
  const Tensor& label = *ctx.input(0);
  const Tensor& logits = *ctx.input(1);
  PDIST_ASSIGN_OR_RETURN(const VocabPiece p, ReadVocabPiece(ctx, logits, label));
  PDIST_ASSIGN_OR_RETURN(GroupRowSums r, ReduceRows(ctx, p, logits, label));
  Tensor& dx = ctx.AllocateOutput(0);
  return CudaStatus(LaunchVocabParallelCrossEntropyGradFromLogits(
                        p.type, label.raw(), p.label_64, logits.raw(), r.max.raw(), r.sums.raw(), ctx.input(2)->raw(),
                        dx.raw(), p.lanes, p.n, p.start, p.ignore_index, StreamOf(ctx)),
                    "c_softmax_with_cross_entropy_grad_from_logits");
}

}  // namespace

void RegisterVocabParallelKernels(KernelRegistry& registry) {
  registry.Register(DeviceType::kCUDA, "c_embedding", CEmbeddingKernel);
  registry.Register(DeviceType::kCUDA, "c_embedding_grad", CEmbeddingGradKernel);
  registry.Register(DeviceType::kCUDA, "c_softmax_with_cross_entropy", CSoftmaxCrossEntropyKernel);
  registry.Register(DeviceType::kCUDA, "c_softmax_with_cross_entropy_grad", CSoftmaxCrossEntropyGradKernel);
  registry.Register(DeviceType::kCUDA, "c_softmax_with_cross_entropy_grad_from_logits",
                    CSoftmaxCrossEntropyGradFromLogitsKernel);
}

}  // namespace pdist::exec::cuda

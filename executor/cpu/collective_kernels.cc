// CPU kernels of the collective ops (ir/ops/collective.cc): find the group's communicator in
// the rank's CommGroups and move the data with the axis collectives.
#include <cstring>

#include "absl/strings/str_cat.h"
#include "executor/comm/axis_collectives.h"
#include "executor/comm/comm_groups.h"
#include "executor/cpu/cpu_kernels.h"
#include "executor/kernel.h"
#include "ir/dist/placement.h"
#include "ir/status.h"

namespace pdist::exec::cpu {
namespace {

absl::StatusOr<comm::Communicator*> GroupOf(const KernelContext& ctx) {
  if (ctx.comm_groups() == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat(ctx.op().type(), " needs communicators: run the partitioned program through the engine"));
  }
  PDIST_ASSIGN_OR_RETURN(std::vector<int64_t> ranks, ir::GetIntList(ctx.attrs(), "ranks"));
  return ctx.comm_groups()->Get(ranks);
}

absl::StatusOr<comm::ReduceOp> ReduceOf(const KernelContext& ctx) {
  PDIST_ASSIGN_OR_RETURN(std::string name, ir::GetString(ctx.attrs(), "reduce"));
  PDIST_ASSIGN_OR_RETURN(ir::ReduceType type, ir::ParseReduceType(name));
  switch (type) {
    case ir::ReduceType::kSum: return comm::ReduceOp::kSum;
    case ir::ReduceType::kAvg: return comm::ReduceOp::kAvg;
    case ir::ReduceType::kMax: return comm::ReduceOp::kMax;
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown reduce '", name, "'"));
}

absl::Status AllReduceKernel(KernelContext& ctx) {
  PDIST_ASSIGN_OR_RETURN(comm::Communicator * group, GroupOf(ctx));
  PDIST_ASSIGN_OR_RETURN(comm::ReduceOp op, ReduceOf(ctx));
  return group->AllReduce(*ctx.input(0), ctx.AllocateOutput(0), op);
}

absl::Status AllGatherKernel(KernelContext& ctx) {
  PDIST_ASSIGN_OR_RETURN(comm::Communicator * group, GroupOf(ctx));
  PDIST_ASSIGN_OR_RETURN(int64_t axis, ir::GetInt(ctx.attrs(), "axis"));
  return comm::AllGatherAxis(*group, *ctx.input(0), axis, ctx.AllocateOutput(0));
}

absl::Status ReduceScatterKernel(KernelContext& ctx) {
  PDIST_ASSIGN_OR_RETURN(comm::Communicator * group, GroupOf(ctx));
  PDIST_ASSIGN_OR_RETURN(int64_t axis, ir::GetInt(ctx.attrs(), "axis"));
  PDIST_ASSIGN_OR_RETURN(comm::ReduceOp op, ReduceOf(ctx));
  return comm::ReduceScatterAxis(*group, *ctx.input(0), axis, op, ctx.AllocateOutput(0));
}

absl::Status AllToAllKernel(KernelContext& ctx) {
  PDIST_ASSIGN_OR_RETURN(comm::Communicator * group, GroupOf(ctx));
  PDIST_ASSIGN_OR_RETURN(int64_t split_axis, ir::GetInt(ctx.attrs(), "split_axis"));
  PDIST_ASSIGN_OR_RETURN(int64_t concat_axis, ir::GetInt(ctx.attrs(), "concat_axis"));
  return comm::AllToAllAxes(*group, *ctx.input(0), split_axis, concat_axis, ctx.AllocateOutput(0));
}

// All inputs packed into one flat buffer, reduced by one all-reduce, and unpacked: one
// collective's latency for a whole bucket of gradients.
absl::Status AllReduceCoalescedKernel(KernelContext& ctx) {
  PDIST_ASSIGN_OR_RETURN(comm::Communicator * group, GroupOf(ctx));
  PDIST_ASSIGN_OR_RETURN(comm::ReduceOp op, ReduceOf(ctx));
  int64_t total = 0;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) total += ctx.input(i)->num_elements();
  const ir::DataType dtype = ctx.input(0)->dtype();
  const int64_t esize = ir::DataTypeSize(dtype);
  Tensor flat = Tensor::Empty({{total}, dtype});
  int64_t offset = 0;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    std::memcpy(static_cast<char*>(flat.raw()) + offset * esize, ctx.input(i)->raw(),
                static_cast<size_t>(ctx.input(i)->num_bytes()));
    offset += ctx.input(i)->num_elements();
  }
  PDIST_RETURN_IF_ERROR(group->AllReduce(flat, flat, op));
  offset = 0;
  for (size_t i = 0; i < ctx.num_outputs(); ++i) {
    Tensor& out = ctx.AllocateOutput(i);
    std::memcpy(out.raw(), static_cast<const char*>(flat.raw()) + offset * esize, static_cast<size_t>(out.num_bytes()));
    offset += out.num_elements();
  }
  return absl::OkStatus();
}

// Rank r's region of the flat buffer holds piece r (along dim 0) of every input, so one flat
// reduce-scatter leaves each rank its pieces.
absl::Status ReduceScatterCoalescedKernel(KernelContext& ctx) {
  PDIST_ASSIGN_OR_RETURN(comm::Communicator * group, GroupOf(ctx));
  PDIST_ASSIGN_OR_RETURN(comm::ReduceOp op, ReduceOf(ctx));
  const int64_t n = group->size();
  int64_t per_rank = 0;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) per_rank += ctx.input(i)->num_elements() / n;
  const ir::DataType dtype = ctx.input(0)->dtype();
  const int64_t esize = ir::DataTypeSize(dtype);
  Tensor flat = Tensor::Empty({{n * per_rank}, dtype});
  Tensor mine = Tensor::Empty({{per_rank}, dtype});
  char* dst = static_cast<char*>(flat.raw());
  for (int64_t r = 0; r < n; ++r) {
    for (size_t i = 0; i < ctx.num_inputs(); ++i) {
      const int64_t piece = ctx.input(i)->num_bytes() / n;
      std::memcpy(dst, static_cast<const char*>(ctx.input(i)->raw()) + r * piece, static_cast<size_t>(piece));
      dst += piece;
    }
  }
  PDIST_RETURN_IF_ERROR(group->ReduceScatter(flat, mine, op));
  int64_t offset = 0;
  for (size_t i = 0; i < ctx.num_outputs(); ++i) {
    Tensor& out = ctx.AllocateOutput(i);
    std::memcpy(out.raw(), static_cast<const char*>(mine.raw()) + offset * esize, static_cast<size_t>(out.num_bytes()));
    offset += out.num_elements();
  }
  return absl::OkStatus();
}

absl::Status SendKernel(KernelContext& ctx) {
  if (ctx.comm_groups() == nullptr) return absl::FailedPreconditionError("c_send needs communicators");
  PDIST_ASSIGN_OR_RETURN(int64_t peer, ir::GetInt(ctx.attrs(), "peer"));
  PDIST_ASSIGN_OR_RETURN(int64_t tag, ir::GetInt(ctx.attrs(), "tag"));
  return ctx.comm_groups()->world().Send(*ctx.input(0), static_cast<int>(peer), tag);
}

absl::Status RecvKernel(KernelContext& ctx) {
  if (ctx.comm_groups() == nullptr) return absl::FailedPreconditionError("c_recv needs communicators");
  PDIST_ASSIGN_OR_RETURN(int64_t peer, ir::GetInt(ctx.attrs(), "peer"));
  PDIST_ASSIGN_OR_RETURN(int64_t tag, ir::GetInt(ctx.attrs(), "tag"));
  return ctx.comm_groups()->world().Recv(ctx.AllocateOutput(0), static_cast<int>(peer), tag);
}

}  // namespace

void RegisterCollectiveKernels(KernelRegistry& registry) {
  registry.Register(DeviceType::kCPU, "c_allreduce", AllReduceKernel);
  registry.Register(DeviceType::kCPU, "c_allgather", AllGatherKernel);
  registry.Register(DeviceType::kCPU, "c_reduce_scatter", ReduceScatterKernel);
  registry.Register(DeviceType::kCPU, "c_alltoall", AllToAllKernel);
  registry.Register(DeviceType::kCPU, "c_allreduce_coalesced", AllReduceCoalescedKernel);
  registry.Register(DeviceType::kCPU, "c_reduce_scatter_coalesced", ReduceScatterCoalescedKernel);
  registry.Register(DeviceType::kCPU, "c_send", SendKernel);
  registry.Register(DeviceType::kCPU, "c_recv", RecvKernel);
}

}  // namespace pdist::exec::cpu

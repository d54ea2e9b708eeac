// Kernels of the collective ops (ir/ops/collective.cc), written once for every device: find the
// group's communicator in the rank's CommGroups and move the data with the axis collectives, on
// the kernel's stream; temporaries come from its allocator and blocks are regrouped by its
// device's backend (Backend::SwapBlocks, CopyBytes). On the host the communicator moves the
// data at once; NCCL enqueues it on the stream.
#include "executor/collective_kernels.h"

#include "absl/strings/str_cat.h"
#include "executor/backend.h"
#include "executor/comm/axis_collectives.h"
#include "executor/comm/comm_groups.h"
#include "executor/kernel.h"
#include "ir/dist/placement.h"
#include "ir/status.h"

namespace pdist::exec {
namespace {

// The kernel's device, allocator and stream, for the axis collectives.
// The kernel's device, allocator and stream, its temporaries kept as Scratch keeps them.
absl::StatusOr<comm::DataPlace> PlaceOf(KernelContext& ctx) {
  PDIST_ASSIGN_OR_RETURN(Backend * backend, BackendFor(ctx.device()));
  return comm::DataPlace{backend, &ctx.allocator(), ctx.stream(), ctx.scratch_list()};
}

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
  return group->AllReduce(*ctx.input(0), ctx.AllocateOutput(0), op, ctx.stream());
}

absl::Status AllGatherKernel(KernelContext& ctx) {
  PDIST_ASSIGN_OR_RETURN(comm::Communicator * group, GroupOf(ctx));
  PDIST_ASSIGN_OR_RETURN(int64_t axis, ir::GetInt(ctx.attrs(), "axis"));
  PDIST_ASSIGN_OR_RETURN(comm::DataPlace place, PlaceOf(ctx));
  return comm::AllGatherAxis(*group, *ctx.input(0), axis, ctx.AllocateOutput(0), place);
}

absl::Status ReduceScatterKernel(KernelContext& ctx) {
  PDIST_ASSIGN_OR_RETURN(comm::Communicator * group, GroupOf(ctx));
  PDIST_ASSIGN_OR_RETURN(int64_t axis, ir::GetInt(ctx.attrs(), "axis"));
  PDIST_ASSIGN_OR_RETURN(comm::ReduceOp op, ReduceOf(ctx));
  PDIST_ASSIGN_OR_RETURN(comm::DataPlace place, PlaceOf(ctx));
  return comm::ReduceScatterAxis(*group, *ctx.input(0), axis, op, ctx.AllocateOutput(0), place);
}

absl::Status AllToAllKernel(KernelContext& ctx) {
  PDIST_ASSIGN_OR_RETURN(comm::Communicator * group, GroupOf(ctx));
  PDIST_ASSIGN_OR_RETURN(int64_t split_axis, ir::GetInt(ctx.attrs(), "split_axis"));
  PDIST_ASSIGN_OR_RETURN(int64_t concat_axis, ir::GetInt(ctx.attrs(), "concat_axis"));
  PDIST_ASSIGN_OR_RETURN(comm::DataPlace place, PlaceOf(ctx));
  return comm::AllToAllAxes(*group, *ctx.input(0), split_axis, concat_axis, ctx.AllocateOutput(0), place);
}

// All inputs packed into one flat buffer, reduced by one all-reduce, and unpacked: one
// collective's latency for a whole bucket of gradients.
absl::Status AllReduceCoalescedKernel(KernelContext& ctx) {
  PDIST_ASSIGN_OR_RETURN(comm::Communicator * group, GroupOf(ctx));
  PDIST_ASSIGN_OR_RETURN(comm::ReduceOp op, ReduceOf(ctx));
  PDIST_ASSIGN_OR_RETURN(Backend * device, BackendFor(ctx.device()));
  int64_t total = 0;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) total += ctx.input(i)->num_elements();
  const ir::DataType dtype = ctx.input(0)->dtype();
  Tensor flat = ctx.Scratch({{total}, dtype});
  int64_t offset = 0;  // bytes
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    const Tensor& in = *ctx.input(i);
    PDIST_RETURN_IF_ERROR(device->CopyBytes(in, 0, flat, offset, in.num_bytes(), ctx.stream()));
    offset += in.num_bytes();
  }
  PDIST_RETURN_IF_ERROR(group->AllReduce(flat, flat, op, ctx.stream()));
  offset = 0;
  for (size_t i = 0; i < ctx.num_outputs(); ++i) {
    Tensor& out = ctx.AllocateOutput(i);
    PDIST_RETURN_IF_ERROR(device->CopyBytes(flat, offset, out, 0, out.num_bytes(), ctx.stream()));
    offset += out.num_bytes();
  }
  return absl::OkStatus();
}

// Rank r's region of the flat buffer holds piece r (along dim 0) of every input, so one flat
// reduce-scatter leaves each rank its pieces.
absl::Status ReduceScatterCoalescedKernel(KernelContext& ctx) {
  PDIST_ASSIGN_OR_RETURN(comm::Communicator * group, GroupOf(ctx));
  PDIST_ASSIGN_OR_RETURN(comm::ReduceOp op, ReduceOf(ctx));
  PDIST_ASSIGN_OR_RETURN(Backend * device, BackendFor(ctx.device()));
  const int64_t n = group->size();
  int64_t per_rank = 0;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) per_rank += ctx.input(i)->num_elements() / n;
  const ir::DataType dtype = ctx.input(0)->dtype();
  Tensor flat = ctx.Scratch({{n * per_rank}, dtype});
  Tensor mine = ctx.Scratch({{per_rank}, dtype});
  int64_t dst = 0;  // bytes
  for (int64_t r = 0; r < n; ++r) {
    for (size_t i = 0; i < ctx.num_inputs(); ++i) {
      const int64_t piece = ctx.input(i)->num_bytes() / n;
      PDIST_RETURN_IF_ERROR(device->CopyBytes(*ctx.input(i), r * piece, flat, dst, piece, ctx.stream()));
      dst += piece;
    }
  }
  PDIST_RETURN_IF_ERROR(group->ReduceScatter(flat, mine, op, ctx.stream()));
  int64_t offset = 0;
  for (size_t i = 0; i < ctx.num_outputs(); ++i) {
    Tensor& out = ctx.AllocateOutput(i);
    PDIST_RETURN_IF_ERROR(device->CopyBytes(mine, offset, out, 0, out.num_bytes(), ctx.stream()));
    offset += out.num_bytes();
  }
  return absl::OkStatus();
}

absl::Status SendKernel(KernelContext& ctx) {
  if (ctx.comm_groups() == nullptr) return absl::FailedPreconditionError("c_send needs communicators");
  PDIST_ASSIGN_OR_RETURN(int64_t peer, ir::GetInt(ctx.attrs(), "peer"));
  PDIST_ASSIGN_OR_RETURN(int64_t tag, ir::GetInt(ctx.attrs(), "tag"));
  PDIST_ASSIGN_OR_RETURN(int64_t lane, ir::GetInt(ctx.attrs(), "lane"));
  // Over the channel of this direction (comm/comm_groups.h): this rank is its 0, the peer its 1.
  PDIST_ASSIGN_OR_RETURN(comm::Communicator * channel, ctx.comm_groups()->Channel(ctx.comm_groups()->rank(), peer, lane));
  return channel->Send(*ctx.input(0), 1, tag, ctx.stream());
}

absl::Status RecvKernel(KernelContext& ctx) {
  if (ctx.comm_groups() == nullptr) return absl::FailedPreconditionError("c_recv needs communicators");
  PDIST_ASSIGN_OR_RETURN(int64_t peer, ir::GetInt(ctx.attrs(), "peer"));
  PDIST_ASSIGN_OR_RETURN(int64_t tag, ir::GetInt(ctx.attrs(), "tag"));
  PDIST_ASSIGN_OR_RETURN(int64_t lane, ir::GetInt(ctx.attrs(), "lane"));
  PDIST_ASSIGN_OR_RETURN(comm::Communicator * channel, ctx.comm_groups()->Channel(peer, ctx.comm_groups()->rank(), lane));
  return channel->Recv(ctx.AllocateOutput(0), 0, tag, ctx.stream());
}

}  // namespace

void RegisterCollectiveKernels(KernelRegistry& registry, DeviceType device) {
  registry.Register(device, "c_allreduce", AllReduceKernel);
  registry.Register(device, "c_allgather", AllGatherKernel);
  registry.Register(device, "c_reduce_scatter", ReduceScatterKernel);
  registry.Register(device, "c_alltoall", AllToAllKernel);
  registry.Register(device, "c_allreduce_coalesced", AllReduceCoalescedKernel);
  registry.Register(device, "c_reduce_scatter_coalesced", ReduceScatterCoalescedKernel);
  registry.Register(device, "c_send", SendKernel);
  registry.Register(device, "c_recv", RecvKernel);
}

}  // namespace pdist::exec

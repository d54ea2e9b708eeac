// CPU kernel of `reshard` for a single rank running the global program: the identity.
//
// A reshard changes where the pieces of a tensor live, not its value. One rank that runs the
// whole (global) program holds every piece, so the result simply aliases the input. On several
// ranks the partition pass (passes/partition.h) lowers each reshard into collectives (all_reduce,
// all_gather, reduce_scatter, all_to_all, slice, send/recv) before the executor sees it.
#include "executor/cpu/cpu_kernels.h"
#include "executor/kernel.h"

namespace pdist::exec::cpu {
namespace {

absl::Status ReshardKernel(KernelContext& ctx) {
  ctx.SetOutput(0, *ctx.input(0));
  return absl::OkStatus();
}

}  // namespace

void RegisterReshardKernels(KernelRegistry& registry) { registry.Register(DeviceType::kCPU, "reshard", ReshardKernel); }

}  // namespace pdist::exec::cpu

#include "executor/sub_kernel.h"

#include <utility>

#include "ir/status.h"

namespace pdist::exec {

absl::StatusOr<std::vector<Tensor>> RunKernelAs(const KernelFn& kernel, const ir::Operation& op, KernelContext& ctx,
                                                std::vector<const Tensor*> inputs, std::vector<TensorType> types) {
  std::vector<Tensor> results(types.size());
  KernelContext share(op, std::move(inputs), &results);
  share.OverrideOutputTypes(std::move(types));
  share.set_placement(ctx.allocator(), ctx.stream());
  share.set_keep_alive(ctx.scratch_list());  // its scratch lives as long as ctx's (a GPU kernel may still read it)
  share.set_comm_groups(ctx.comm_groups());
  share.set_micro_batch(ctx.micro_batch());
  PDIST_RETURN_IF_ERROR(kernel(share));
  return results;
}

BiasAddGradOp::BiasAddGradOp(const TensorType& out_grad, const TensorType& bias) {
  auto value = [this](const TensorType& t) { return types_.NewValue(t, ir::ValueRole::kActivation); };
  op_ = std::make_unique<ir::Operation>("add_grad", std::vector<ir::Value*>{value(out_grad), value(bias), value(out_grad)},
                                        ir::AttributeMap{});
  op_->add_result(value(out_grad));
  op_->add_result(value(bias));
}

}  // namespace pdist::exec

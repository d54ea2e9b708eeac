// Views, and the piece layout of split and concat.
#include "executor/shape_layout.h"

#include "ir/op_def.h"
#include "ir/ops/op_helpers.h"
#include "ir/status.h"

namespace pdist::exec {

absl::Status ViewKernel(KernelContext& ctx) {
  ctx.SetOutput(0, ctx.input(0)->Reshaped(ctx.output_type(0).shape));
  return absl::OkStatus();
}

void RegisterViewKernels(KernelRegistry& registry, DeviceType device) {
  const ir::OpRegistry& ops = ir::OpRegistry::Global();
  for (const std::string& name : ops.Names()) {
    if (ops.Find(name)->view) registry.Register(device, name, ViewKernel);
  }
}

Pieces PiecesOf(const ir::Shape& whole, int64_t axis, const std::vector<const Tensor*>& pieces, int64_t element_size) {
  Pieces p;
  for (int64_t d = 0; d < axis; ++d) p.outer *= whole[d];
  p.inner_bytes = element_size;
  for (size_t d = static_cast<size_t>(axis) + 1; d < whole.size(); ++d) p.inner_bytes *= whole[d];
  for (const Tensor* t : pieces) {
    p.offsets.push_back(p.total);
    p.sizes.push_back(t->shape()[axis]);
    p.total += t->shape()[axis];
  }
  return p;
}

absl::StatusOr<PieceCopy> PlanSplit(KernelContext& ctx) {
  const Tensor& x = *ctx.input(0);
  PDIST_ASSIGN_OR_RETURN(int64_t axis, AxisOf(ctx, x.shape()));
  PieceCopy c;
  std::vector<const Tensor*> outs;
  for (size_t i = 0; i < ctx.num_outputs(); ++i) {
    Tensor& t = ctx.AllocateOutput(i);
    outs.push_back(&t);
    c.pieces.push_back(static_cast<char*>(t.raw()));
  }
  c.layout = PiecesOf(x.shape(), axis, outs, ir::DataTypeSize(x.dtype()));
  c.whole = static_cast<char*>(x.raw());
  return c;
}

absl::StatusOr<PieceCopy> PlanConcat(KernelContext& ctx) {
  Tensor& out = ctx.AllocateOutput(0);
  PDIST_ASSIGN_OR_RETURN(int64_t axis, AxisOf(ctx, out.shape()));
  PieceCopy c;
  std::vector<const Tensor*> ins;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    ins.push_back(ctx.input(i));
    c.pieces.push_back(static_cast<char*>(ctx.input(i)->raw()));
  }
  c.layout = PiecesOf(out.shape(), axis, ins, ir::DataTypeSize(out.dtype()));
  c.whole = static_cast<char*>(out.raw());
  return c;
}

absl::StatusOr<RowsCols> NormRowsCols(const KernelContext& ctx, const ir::Shape& x) {
  PDIST_ASSIGN_OR_RETURN(int64_t begin, ir::GetInt(ctx.attrs(), "begin_norm_axis"));
  const int64_t rank = static_cast<int64_t>(x.size());
  if (begin < 0) begin += rank;
  RowsCols rc;
  for (int64_t i = 0; i < rank; ++i) (i < begin ? rc.rows : rc.cols) *= x[static_cast<size_t>(i)];
  return rc;
}

absl::StatusOr<int64_t> AxisOf(const KernelContext& ctx, const ir::Shape& shape) {
  PDIST_ASSIGN_OR_RETURN(int64_t axis, ir::GetInt(ctx.attrs(), "axis"));
  return ir::ops::NormalizeAxis(axis, static_cast<int64_t>(shape.size()));
}

}  // namespace pdist::exec

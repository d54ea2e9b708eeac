// MatmulPlan: the stored matrices of each product of matmul and matmul_grad.
#include "executor/matmul_plan.h"

#include "executor/strides.h"
#include "ir/status.h"

namespace pdist::exec {
namespace {

// Index of the operand batch that output batch `b` reads, for every b (numpy broadcasting).
std::vector<int64_t> BatchIndex(const ir::Shape& operand_batch, const ir::Shape& batch) {
  const std::vector<int64_t> strides = BroadcastStrides(operand_batch, batch);
  const int64_t count = ir::NumElements(batch);
  std::vector<int64_t> index(static_cast<size_t>(count), 0);
  for (int64_t b = 0; b < count; ++b) {
    int64_t rest = b, offset = 0;
    for (int64_t d = static_cast<int64_t>(batch.size()) - 1; d >= 0; --d) {
      offset += (rest % batch[d]) * strides[d];
      rest /= batch[d];
    }
    index[b] = offset;
  }
  return index;
}

}  // namespace

MatrixRef MatmulPlan::X(int64_t b, bool trans) const {
  const auto& d = dims;
  const int64_t offset = (fold ? 0 : x_of[b]) * d.m * d.k;
  if (d.trans_x) return {MatrixRef::kX, offset, d.k, d.m, trans};
  return {MatrixRef::kX, offset, fold ? batches * d.m : d.m, d.k, trans};
}

MatrixRef MatmulPlan::Y(int64_t b, bool trans) const {
  const auto& d = dims;
  const int64_t offset = (fold ? 0 : y_of[b]) * d.k * d.n;
  if (d.trans_y) return {MatrixRef::kY, offset, d.n, d.k, trans};
  return {MatrixRef::kY, offset, d.k, d.n, trans};
}

MatrixRef MatmulPlan::G(int64_t b, bool trans) const {
  const auto& d = dims;
  return {MatrixRef::kG, (fold ? 0 : b) * d.m * d.n, fold ? batches * d.m : d.m, d.n, trans};
}

std::pair<MatrixRef, MatrixRef> MatmulPlan::Forward(int64_t b) const { return {X(b, dims.trans_x), Y(b, dims.trans_y)}; }

std::pair<MatrixRef, MatrixRef> MatmulPlan::XGrad(int64_t b) const {
  if (dims.trans_x) return {Y(b, dims.trans_y), G(b, true)};
  return {G(b, false), Y(b, !dims.trans_y)};
}

std::pair<MatrixRef, MatrixRef> MatmulPlan::YGrad(int64_t b) const {
  if (dims.trans_y) return {G(b, true), X(b, dims.trans_x)};
  return {X(b, !dims.trans_x), G(b, false)};
}

std::vector<std::vector<int64_t>> MatmulPlan::Sources(int64_t destinations, const std::vector<int64_t>& destination_of) {
  std::vector<std::vector<int64_t>> sources(static_cast<size_t>(destinations));
  for (size_t b = 0; b < destination_of.size(); ++b) sources[destination_of[b]].push_back(static_cast<int64_t>(b));
  return sources;
}

absl::StatusOr<MatmulPlan> PlanMatmul(const KernelContext& ctx) {
  PDIST_ASSIGN_OR_RETURN(bool trans_x, ir::GetBool(ctx.attrs(), "trans_x"));
  PDIST_ASSIGN_OR_RETURN(bool trans_y, ir::GetBool(ctx.attrs(), "trans_y"));
  MatmulPlan p;
  PDIST_ASSIGN_OR_RETURN(p.dims, ir::ops::InferMatmulDims(ctx.input(0)->shape(), ctx.input(1)->shape(), trans_x, trans_y));
  p.batches = ir::NumElements(p.dims.batch);
  p.x_batches = ir::NumElements(p.dims.x_batch);
  p.y_batches = ir::NumElements(p.dims.y_batch);
  p.fold = p.y_batches == 1 && p.x_batches == p.batches && !p.dims.trans_x;
  if (!p.fold) {
    p.x_of = BatchIndex(p.dims.x_batch, p.dims.batch);
    p.y_of = BatchIndex(p.dims.y_batch, p.dims.batch);
  }
  return p;
}

}  // namespace pdist::exec

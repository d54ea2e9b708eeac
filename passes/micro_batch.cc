// SplitMicroBatches: batch dims found by completion on a mesh of micro-batches, then divided.
#include "passes/micro_batch.h"

#include "absl/strings/str_cat.h"
#include "ir/builder.h"
#include "ir/dist/shard_tensor.h"
#include "ir/op_def.h"
#include "ir/status.h"
#include "ir/verifier.h"
#include "passes/batch_inputs.h"
#include "passes/completion.h"
#include "passes/optimizer.h"

namespace pdist::passes {
namespace {

// The data inputs completion cut along the micro-batches: the batch's, and those whose uses
// follow the batch (a flattened [batch·seq] label vector). The feeds are split along dim 0
// (SplitMicroBatchFeeds), so one cut along another dim cannot be fed.
absl::StatusOr<std::vector<std::string>> SplitInputs(const ir::Program& program) {
  std::vector<std::string> split;
  for (const ir::Value* arg : program.block().arguments()) {
    if (arg->role() != ir::ValueRole::kDataInput || !arg->dist_attr() || arg->dist_attr()->is_replicated()) continue;
    if (arg->dist_attr()->dims_mapping.empty() || arg->dist_attr()->dims_mapping[0] != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "micro-batches: data input '", arg->name(), "' ", arg->type().ToString(), " follows the batch along ",
          arg->dist_attr()->ToString(), ", not along dim 0: its feed cannot be cut into micro-batches"));
    }
    split.push_back(arg->name());
  }
  return split;
}

// The op that reads what completion had to reshard: it needs samples of other micro-batches.
absl::Status MixesSamples(const ir::Program& program) {
  const auto& ops = program.block().ops();
  for (size_t i = 0; i < ops.size(); ++i) {
    if (ops[i]->type() != "reshard") continue;
    for (size_t j = i + 1; j < ops.size(); ++j) {
      for (const ir::Value* v : ops[j]->operands()) {
        if (v != ops[i]->result(0)) continue;
        return absl::InvalidArgumentError(absl::StrCat(
            "micro-batches: ", ops[j]->Describe(), " reads samples of the whole batch (its operand %",
            ops[i]->operand(0)->id(), " would need ", ops[i]->operand(0)->dist_attr()->ToString(), " → ",
            v->dist_attr()->ToString(), "); it cannot run one micro-batch at a time"));
      }
    }
  }
  return absl::InternalError("micro-batches: completion inserted a reshard that nothing reads");
}

// Every value takes its micro-batch shape; the attributes that spell a shape follow.
absl::Status Localise(ir::Program& program) {
  for (int64_t id = 0; id < program.num_values(); ++id) {
    ir::Value* v = program.FindValue(id);
    if (!v->dist_attr()) continue;
    const ir::DistAttr& attr = *v->dist_attr();
    for (size_t d = 0; d < attr.dims_mapping.size(); ++d) {
      const int64_t m = attr.dims_mapping[d];
      if (m >= 0 && v->type().shape[d] % attr.mesh.dim_size(m) != 0) {
        return absl::InvalidArgumentError(absl::StrCat("micro-batches: dim ", d, " of ", v->type().ToString(),
                                                       " (from the batch) is not divisible by ", attr.mesh.dim_size(m)));
      }
    }
    v->set_type({attr.LocalShape(v->type().shape), v->type().dtype});
    v->set_dist_attr(std::nullopt);
    v->set_dist_annotated(false);
  }
  for (const auto& op : program.block().ops()) {
    const ir::OpDef* def = ir::OpRegistry::Global().Find(op->type());
    if (def == nullptr) return absl::NotFoundError(absl::StrCat("unknown op '", op->type(), "'"));
    if (!def->result_shape_attr.empty()) op->mutable_attrs()[def->result_shape_attr] = op->result(0)->type().shape;
    PDIST_ASSIGN_OR_RETURN(std::vector<ir::TensorType> types, ir::InferResultTypes(*def, op->operands(), op->attrs()));
    for (size_t r = 0; r < op->num_results(); ++r) {
      if (types[r] != op->result(r)->type()) {
        return absl::InvalidArgumentError(absl::StrCat("micro-batches: ", op->Describe(), " gives ", types[r].ToString(),
                                                       " on a micro-batch, not ", op->result(r)->type().ToString(),
                                                       ": an attribute of it spells the whole batch"));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<MicroBatchProgram> SplitMicroBatches(const ir::Program& forward, int64_t micro_batches,
                                                    bool average) {
  if (micro_batches < 1) {
    return absl::InvalidArgumentError(absl::StrCat("micro-batches: the count must be at least 1, got ", micro_batches));
  }
  if (!forward.gradients().empty()) return absl::FailedPreconditionError("micro-batches: split the forward program, before autodiff");
  if (forward.loss() == nullptr) return absl::InvalidArgumentError("micro-batches: the program has no loss");
  for (int64_t id = 0; id < forward.num_values(); ++id) {
    if (forward.FindValue(id)->dist_attr()) {
      return absl::FailedPreconditionError("micro-batches: split the program before it is annotated");
    }
  }
  MicroBatchProgram out{forward.Clone(), {}, micro_batches};
  absl::StatusOr<BatchInputs> found = FindBatchInputs(out.program);
  if (!found.ok()) return WithContext(found.status(), "micro-batches");
  const std::vector<ir::Value*>& inputs = found->inputs;
  for (const ir::Value* v : inputs) out.split_inputs.push_back(v->name());
  if (found->batch % micro_batches != 0) {
    return absl::InvalidArgumentError(absl::StrCat("micro-batches: the batch (", found->batch, ", dim 0 of '",
                                                   inputs.front()->name(), "') is not divisible by ", micro_batches,
                                                   " micro-batches (pipeline.accumulate_steps or gradient_merge.k_steps)"));
  }
  if (micro_batches == 1) return out;

  const ir::ProcessMesh mesh = ir::ProcessMesh::Range({micro_batches}, {"micro_batch"});
  for (ir::Value* v : inputs) PDIST_RETURN_IF_ERROR(ir::ShardTensor(v, mesh, {ir::Placement::Shard(0)}));
  PDIST_ASSIGN_OR_RETURN(CompletionReport report, CompleteDistAttrs(out.program));
  if (report.reshards > 0) return MixesSamples(out.program);
  PDIST_ASSIGN_OR_RETURN(out.split_inputs, SplitInputs(out.program));

  ir::Value* loss = out.program.loss();
  // A mean, or independent of the batch: 1/m, unless the step sums the micro-batches' gradients.
  double loss_scale = average ? 1.0 / static_cast<double>(micro_batches) : 1.0;
  if (loss->dist_attr() && loss->dist_attr()->is_partial()) {
    const ir::ReduceType reduce = loss->dist_attr()->partial.begin()->second;
    if (reduce == ir::ReduceType::kSum) {
      loss_scale = 1.0;
    } else if (reduce != ir::ReduceType::kAvg) {
      return absl::InvalidArgumentError(absl::StrCat("micro-batches: the loss is the ", ir::ReduceTypeName(reduce),
                                                     " over the batch; only a sum or a mean accumulates"));
    }
  }
  PDIST_RETURN_IF_ERROR(Localise(out.program));
  if (loss_scale != 1.0) {
    ir::Builder b(&out.program);
    b.SetOpRoleAndChunkFrom(*loss->producer());
    PDIST_ASSIGN_OR_RETURN(ir::Value * scaled, b.Op1("scale", {loss}, {{"scale", loss_scale}, {"bias", 0.0}}));
    out.program.set_loss(scaled);
  }
  PDIST_RETURN_IF_ERROR(WithContext(ir::VerifyProgram(out.program), "micro-batch program"));
  return out;
}

}  // namespace pdist::passes

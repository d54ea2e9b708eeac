// Builder: op creation with attribute normalisation and type inference.
#include "ir/builder.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "ir/dist/shard_tensor.h"
#include "ir/status.h"

namespace pdist::ir {

Value* Builder::Data(const std::string& name, TensorType type) {
  Value* v = program_->NewValue(std::move(type), ValueRole::kDataInput);
  v->set_name(name);
  v->set_trainable(false);
  program_->block().add_argument(v);
  return v;
}

Value* Builder::Parameter(const std::string& name, TensorType type, const std::string& init, bool trainable) {
  Value* v = program_->NewValue(std::move(type), ValueRole::kParameter);
  v->set_name(name);
  v->set_init(init);
  v->set_trainable(trainable);
  program_->block().add_argument(v);
  return v;
}

Value* Builder::State(const std::string& name, TensorType type, const std::string& init) {
  Value* v = program_->NewValue(std::move(type), ValueRole::kOptimizerState);
  v->set_name(name);
  v->set_init(init);
  v->set_trainable(false);
  program_->block().add_argument(v);
  return v;
}

absl::StatusOr<std::vector<TensorType>> InferResultTypes(const OpDef& def, const std::vector<Value*>& operands,
                                                          const AttributeMap& attrs) {
  InputTypes types;
  for (const Value* v : operands) types.push_back(v ? &v->type() : nullptr);
  absl::StatusOr<std::vector<TensorType>> result = def.infer_meta(types, attrs);
  if (!result.ok()) {
    std::vector<std::string> shapes;
    for (const TensorType* t : types) shapes.push_back(t ? t->ToString() : "none");
    return absl::Status(result.status().code(), absl::StrCat(def.name, "(", absl::StrJoin(shapes, ", "),
                                                             "): ", result.status().message()));
  }
  return result;
}

absl::StatusOr<std::vector<Value*>> Builder::Create(const std::string& type, const std::vector<Value*>& operands,
                                                    const AttributeMap& attrs) {
  PDIST_ASSIGN_OR_RETURN(const OpDef* def, OpRegistry::Global().Lookup(type));
  PDIST_RETURN_IF_ERROR(CheckOperandCount(*def, operands.size()));
  for (size_t i = 0; i < operands.size(); ++i) {
    const bool optional = i < def->inputs.size() ? def->inputs[i].optional : false;
    if (operands[i] == nullptr && !optional) {
      return absl::InvalidArgumentError(absl::StrCat("op '", type, "': operand ", i, " (",
                                                     i < def->inputs.size() ? def->inputs[i].name : def->inputs.back().name,
                                                     ") is missing"));
    }
  }
  PDIST_ASSIGN_OR_RETURN(AttributeMap normalized, NormalizeAttributes(*def, attrs));
  PDIST_ASSIGN_OR_RETURN(std::vector<TensorType> result_types, InferResultTypes(*def, operands, normalized));
  auto op = std::make_unique<Operation>(type, operands, std::move(normalized));
  op->set_role(op_role_);
  op->set_chunk(op_chunk_);
  std::vector<Value*> results;
  for (TensorType& t : result_types) {
    Value* v = program_->NewValue(std::move(t), result_role_);
    op->add_result(v);
    results.push_back(v);
  }
  if (insertion_point_ < 0) {
    program_->block().Append(std::move(op));
  } else {
    program_->block().Insert(static_cast<size_t>(insertion_point_), std::move(op));
    ++insertion_point_;
  }
  return results;
}

absl::StatusOr<Value*> Builder::ShardTensor(Value* value, const ProcessMesh& mesh,
                                            const std::vector<Placement>& placements) {
  PDIST_RETURN_IF_ERROR(ir::ShardTensor(value, mesh, placements));
  return value;
}

absl::StatusOr<Value*> Builder::Op1(const std::string& type, const std::vector<Value*>& operands,
                                    const AttributeMap& attrs) {
  PDIST_ASSIGN_OR_RETURN(std::vector<Value*> results, Create(type, operands, attrs));
  if (results.size() != 1) {
    return absl::InternalError(absl::StrCat("op '", type, "' has ", results.size(), " results, expected 1"));
  }
  return results[0];
}

}  // namespace pdist::ir

// Builder: appends operations to a Program, inferring result types through the op registry.
//
//   Builder b(&program);
//   Value* x = b.Data("x", {{8, 64}, DataType::kFloat32});
//   Value* w = b.Parameter("w", {{64, 64}, DataType::kFloat32}, "normal(0.02)");
//   PDIST_ASSIGN_OR_RETURN(Value* y, b.Op1("matmul", {x, w}, {{"trans_y", true}}));
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "ir/attribute.h"
#include "ir/op_def.h"
#include "ir/program.h"

namespace pdist::ir {

class Builder {
 public:
  explicit Builder(Program* program) : program_(program) {}

  Program& program() { return *program_; }

  Value* Data(const std::string& name, TensorType type);
  Value* Parameter(const std::string& name, TensorType type, const std::string& init, bool trainable = true);
  Value* State(const std::string& name, TensorType type, const std::string& init);

  // Appends (or inserts, see SetInsertionPoint) an op; InferMeta gives the result types.
  // Results get `result_role` (kActivation by default; autodiff uses kGradient).
  absl::StatusOr<std::vector<Value*>> Create(const std::string& type, const std::vector<Value*>& operands,
                                             const AttributeMap& attrs = {});
  // Same, for an op with exactly one result.
  absl::StatusOr<Value*> Op1(const std::string& type, const std::vector<Value*>& operands,
                             const AttributeMap& attrs = {});

  // Annotates `value` (ir/dist/shard_tensor.h) and returns it, so that a declaration and its
  // annotation read as one line:
  //   PDIST_ASSIGN_OR_RETURN(Value* w, b.ShardTensor(b.Parameter("w", type, "normal(0.02)"), mesh,
  //                                                 {Placement::Replicate(), Placement::Shard(1)}));
  absl::StatusOr<Value*> ShardTensor(Value* value, const ProcessMesh& mesh, const std::vector<Placement>& placements);

  void set_result_role(ValueRole role) { result_role_ = role; }
  ValueRole result_role() const { return result_role_; }
  // Role and model chunk of the ops created from now on (ir/pipeline_job.h).
  void set_op_role(OpRole role) { op_role_ = role; }
  void set_op_chunk(int64_t chunk) { op_chunk_ = chunk; }
  void SetOpRoleAndChunkFrom(const Operation& op) {
    op_role_ = op.role();
    op_chunk_ = op.chunk();
  }
  // New ops go before the op at `index` (and the point advances); -1 appends at the end.
  void SetInsertionPoint(int64_t index) { insertion_point_ = index; }

 private:
  Program* program_;
  ValueRole result_role_ = ValueRole::kActivation;
  OpRole op_role_ = OpRole::kForward;
  int64_t op_chunk_ = 0;
  int64_t insertion_point_ = -1;
};

// Runs InferMeta of `def` on operand types; errors name the op and the operand shapes.
absl::StatusOr<std::vector<TensorType>> InferResultTypes(const OpDef& def, const std::vector<Value*>& operands,
                                                          const AttributeMap& attrs);

}  // namespace pdist::ir

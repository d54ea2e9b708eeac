// The SSA program: Program owns one Block of Operations; Operations consume and produce Values.
//
//   program {
//     %0 = data "tokens" : i64[8,32]
//     %1 = param "wte" : f32[256,64] {init = "normal(0.02)"}
//     %2 = embedding(%0, %1) {padding_idx = -1, sparse = false} : f32[8,32,64]
//     ...
//     loss %9
//     output "logits" %8
//     update %1 <- %20
//   }
//
// Values are produced exactly once: either as a block argument (data input, parameter,
// optimizer state) or as a result of one operation. Optimizer updates are expressed as
// `update` bindings: after a step, the state value takes the new value's contents.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ir/attribute.h"
#include "ir/dist/dist_attr.h"
#include "ir/pipeline_job.h"
#include "ir/types.h"

namespace pdist::ir {

class Operation;
struct OpDef;

// The init of a value whose numbers the program itself carries (Value::stored()).
inline constexpr char kStoredInit[] = "stored";

// A tensor's numbers, row-major, little-endian. Their dtype is the one they were stored in, which
// a later pass may change for the value (mixed precision lowers parameters): the initialiser
// rounds them to the value's dtype.
struct StoredNumbers {
  DataType dtype;
  std::string bytes;
};

enum class ValueRole : int8_t {
  kDataInput = 0,       // fed per step (tokens, labels, learning rate)
  kParameter = 1,       // trainable or frozen weights, initialised from `init`
  kOptimizerState = 2,  // moments, beta powers: persistent, initialised from `init`
  kActivation = 3,      // produced by a forward op
  kGradient = 4,        // produced by a backward op
};
const char* ValueRoleName(ValueRole role);

class Value {
 public:
  Value(int64_t id, TensorType type, ValueRole role) : id_(id), type_(std::move(type)), role_(role) {}

  int64_t id() const { return id_; }
  const TensorType& type() const { return type_; }
  void set_type(TensorType type) { type_ = std::move(type); }
  ValueRole role() const { return role_; }
  void set_role(ValueRole role) { role_ = role; }
  bool is_argument() const { return producer_ == nullptr; }
  bool is_persistent() const { return role_ == ValueRole::kParameter || role_ == ValueRole::kOptimizerState; }

  // Block arguments carry a name (the parameter or feed name); results usually do not.
  const std::string& name() const { return name_; }
  void set_name(std::string name) { name_ = std::move(name); }
  // Initialiser of a parameter or optimizer state: "zeros", "ones", "const(0.9)", "normal(0.02)",
  // "uniform(0.1)", or kStoredInit for a value whose numbers the program carries (an imported
  // model's weights). Empty for data inputs and results.
  const std::string& init() const { return init_; }
  void set_init(std::string init) { init_ = std::move(init); }
  // The stored numbers of a kStoredInit value: the whole (global) tensor — also in a partitioned
  // program, whose ranks each cut their piece out. Shared, never copied: every clone and every
  // rank's local program points at the same bytes.
  const std::shared_ptr<const StoredNumbers>& stored() const { return stored_; }
  void set_stored(std::shared_ptr<const StoredNumbers> numbers) { stored_ = std::move(numbers); }
  bool trainable() const { return trainable_; }
  void set_trainable(bool trainable) { trainable_ = trainable; }

  // Distribution over a ProcessMesh: set by an annotation (shard_tensor) or by completion.
  const std::optional<DistAttr>& dist_attr() const { return dist_attr_; }
  void set_dist_attr(std::optional<DistAttr> attr) { dist_attr_ = std::move(attr); }
  // True when the user fixed the DistAttr (completion never changes an annotated value).
  bool dist_annotated() const { return dist_annotated_; }
  void set_dist_annotated(bool annotated) { dist_annotated_ = annotated; }

  Operation* producer() const { return producer_; }
  int result_index() const { return result_index_; }
  void set_producer(Operation* op, int index) { producer_ = op; result_index_ = index; }

 private:
  int64_t id_;
  TensorType type_;
  ValueRole role_;
  std::string name_;
  std::string init_;
  std::shared_ptr<const StoredNumbers> stored_;
  bool trainable_ = true;
  Operation* producer_ = nullptr;
  int result_index_ = -1;
  std::optional<DistAttr> dist_attr_;
  bool dist_annotated_ = false;
};

class Operation {
 public:
  Operation(std::string type, std::vector<Value*> operands, AttributeMap attrs)
      : type_(std::move(type)), operands_(std::move(operands)), attrs_(std::move(attrs)) {}

  const std::string& type() const { return type_; }
  // Retypes the op in place (partition swaps in an op's local form, e.g. c_embedding).
  void set_type(std::string type) { type_ = std::move(type); }
  // An absent optional operand is nullptr.
  const std::vector<Value*>& operands() const { return operands_; }
  Value* operand(size_t i) const { return operands_.at(i); }
  void set_operand(size_t i, Value* v) { operands_.at(i) = v; }
  // Appends a trailing optional operand the op was created without (an update's skip_update).
  void add_operand(Value* v) { operands_.push_back(v); }
  size_t num_operands() const { return operands_.size(); }
  const std::vector<Value*>& results() const { return results_; }
  Value* result(size_t i) const { return results_.at(i); }
  size_t num_results() const { return results_.size(); }
  void add_result(Value* v) { v->set_producer(this, static_cast<int>(results_.size())); results_.push_back(v); }
  const AttributeMap& attrs() const { return attrs_; }
  AttributeMap& mutable_attrs() { return attrs_; }

  // "matmul(%3, %4)" — for error messages.
  std::string Describe() const;

  // Where the op runs in a pipelined step (ir/pipeline_job.h): its role and model chunk. The
  // passes that make ops set them (autodiff: backward, the optimizer pass: optimizer, the stage
  // split: chunks) and every rewrite keeps them, like Paddle's op_role and chunk_id.
  OpRole role() const { return role_; }
  void set_role(OpRole role) { role_ = role; }
  int64_t chunk() const { return chunk_; }
  void set_chunk(int64_t chunk) { chunk_ = chunk; }
  void CopyRoleAndChunk(const Operation& from) {
    role_ = from.role_;
    chunk_ = from.chunk_;
  }

 private:
  std::string type_;
  std::vector<Value*> operands_;
  std::vector<Value*> results_;
  AttributeMap attrs_;
  OpRole role_ = OpRole::kForward;
  int64_t chunk_ = 0;
};

class Block {
 public:
  const std::vector<Value*>& arguments() const { return arguments_; }
  void add_argument(Value* v) { arguments_.push_back(v); }
  std::vector<Value*>& mutable_arguments() { return arguments_; }
  const std::vector<std::unique_ptr<Operation>>& ops() const { return ops_; }
  std::vector<std::unique_ptr<Operation>>& mutable_ops() { return ops_; }
  Operation* Append(std::unique_ptr<Operation> op) { ops_.push_back(std::move(op)); return ops_.back().get(); }
  Operation* Insert(size_t index, std::unique_ptr<Operation> op) {
    return ops_.insert(ops_.begin() + static_cast<ptrdiff_t>(index), std::move(op))->get();
  }

 private:
  std::vector<Value*> arguments_;
  std::vector<std::unique_ptr<Operation>> ops_;
};

// A value the program gives its caller by name: what `predict` returns (the logits of a
// language model, an imported ONNX graph's outputs). Printed as `output "logits" %9`.
struct ProgramOutput {
  std::string name;
  Value* value;
  friend bool operator==(const ProgramOutput&, const ProgramOutput&) = default;
};

struct StateUpdate {
  Value* state;      // a parameter or optimizer state
  Value* new_value;  // same type; its contents replace `state` after the step
  friend bool operator==(const StateUpdate&, const StateUpdate&) = default;
};

class Program {
 public:
  Program() = default;
  Program(Program&&) = default;
  Program& operator=(Program&&) = default;
  Program(const Program&) = delete;
  Program& operator=(const Program&) = delete;

  // A deep copy with the same value ids.
  Program Clone() const;
  // A deep copy of the ops `keep_op` accepts and the arguments `keep_argument` accepts, with the
  // values they define. Values keep their order, so ids change where something is left out;
  // bindings (loss, outputs, updates, gradients) naming a value left out are dropped. A kept op
  // must read only kept values (the verifier reports a null operand otherwise).
  Program CloneIf(const std::function<bool(const Operation&)>& keep_op,
                  const std::function<bool(const Value&)>& keep_argument) const;

  Block& block() { return block_; }
  const Block& block() const { return block_; }

  // Creates a value owned by the program. The id is fresh unless given (the parser keeps ids).
  Value* NewValue(TensorType type, ValueRole role);
  Value* FindValue(int64_t id) const;
  Value* FindArgument(const std::string& name) const;
  int64_t num_values() const { return static_cast<int64_t>(values_.size()); }

  Value* loss() const { return loss_; }
  void set_loss(Value* v) { loss_ = v; }
  const std::vector<ProgramOutput>& outputs() const { return outputs_; }
  void add_output(std::string name, Value* v) { outputs_.push_back({std::move(name), v}); }
  std::vector<ProgramOutput>& mutable_outputs() { return outputs_; }
  const std::vector<StateUpdate>& updates() const { return updates_; }
  void add_update(Value* state, Value* new_value) { updates_.push_back({state, new_value}); }
  void clear_updates() { updates_.clear(); }

  // Gradient of each trainable parameter, recorded by autodiff for the optimizer pass and for
  // later passes (sharding, gradient fusion). Printed as `gradient %1 <- %40`.
  const std::vector<StateUpdate>& gradients() const { return gradients_; }
  void add_gradient(Value* param, Value* grad) { gradients_.push_back({param, grad}); }
  void clear_gradients() { gradients_.clear(); }
  Value* GradientOf(const Value* param) const {
    for (const StateUpdate& g : gradients_) {
      if (g.state == param) return g.new_value;
    }
    return nullptr;
  }

  // Parameters in declaration order.
  std::vector<Value*> Parameters() const;

  // The rank whose local program this is (set by partition: every value's type is that rank's
  // piece of the tensor its DistAttr describes), or -1 for a global program. Printed as
  // `program rank 1 {`.
  int64_t local_rank() const { return local_rank_; }
  void set_local_rank(int64_t rank) { local_rank_ = rank; }

 private:
  std::vector<std::unique_ptr<Value>> values_;  // indexed by id
  Block block_;
  Value* loss_ = nullptr;
  std::vector<ProgramOutput> outputs_;
  std::vector<StateUpdate> updates_;
  int64_t local_rank_ = -1;
  std::vector<StateUpdate> gradients_;
};

}  // namespace pdist::ir

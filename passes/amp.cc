// ApplyAmp: casts around the op lists of passes/amp.h, result types re-inferred op by op.
#include "passes/amp.h"

#include <map>
#include <tuple>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "ir/builder.h"
#include "ir/op_def.h"
#include "ir/status.h"

namespace pdist::passes {

namespace {

using ir::DataType;
using ir::Operation;
using ir::Value;

bool IsFloat(const Value* v) { return v != nullptr && ir::IsFloatingPoint(v->type().dtype); }

class AmpRewriter {
 public:
  AmpRewriter(ir::Program& program, DataType low, AmpLevel level, const AmpCustomLists& custom)
      : program_(program),
        low_(low),
        level_(level),
        white_(custom.low_precision.begin(), custom.low_precision.end()),
        black_(custom.float32.begin(), custom.float32.end()) {}

  absl::StatusOr<AmpReport> Run() {
    PDIST_RETURN_IF_ERROR(CheckInput());
    if (level_ == AmpLevel::kO2) LowerParameters();
    const absl::flat_hash_set<const Value*> read = ReadValues();
    ir::Builder b(&program_);
    std::vector<std::unique_ptr<Operation>>& ops = program_.block().mutable_ops();
    for (size_t i = 0; i < ops.size(); ++i) {
      Operation* op = ops[i].get();
      if (op->type() == "cast") continue;  // an explicit cast says what it wants
      if (const std::optional<DataType> want = OperandDtype(*op)) {
        b.SetInsertionPoint(static_cast<int64_t>(i));
        b.SetOpRoleAndChunkFrom(*op);
        for (size_t k = 0; k < op->num_operands(); ++k) {
          Value* x = op->operand(k);
          const DataType dtype = KeepsOperandInFloat32(*op, k) ? DataType::kFloat32 : *want;
          if (!IsFloat(x) || x->type().dtype == dtype) continue;
          PDIST_ASSIGN_OR_RETURN(Value * cast, CastOf(b, x, dtype, op->chunk()));
          op->set_operand(k, cast);
        }
        i = FindOp(op, i);
      }
      // o2's cross entropy on bf16 logits: its backward recomputes the softmax from the logits
      // (ir/ops/nn.cc), so a softmax nothing reads is not made at all (2 bytes per token and
      // class written and held for nothing: the head's largest transient).
      if (op->type() == "cross_entropy_with_softmax" && TakesLow(*op) && !read.contains(op->result(0))) {
        op->mutable_attrs()["return_softmax"] = false;
      }
      PDIST_RETURN_IF_ERROR(Retype(*op));  // its operands may have changed dtype upstream
    }
    return report_;
  }

 private:
  absl::Status CheckInput() const {
    if (!program_.gradients().empty() || !program_.updates().empty()) {
      return absl::FailedPreconditionError(
          "amp: the program already has a backward or an optimizer; mixed precision rewrites the forward program, "
          "before autodiff");
    }
    for (const Value* arg : program_.block().arguments()) {
      if (arg->type().dtype == DataType::kFloat64) {
        return absl::InvalidArgumentError(absl::StrCat("amp: '", arg->name(), "' is ", arg->type().ToString(),
                                                       "; mixed precision takes an f32 program (export it with --dtype f32)"));
      }
      // A program that is mixed precision already (exported with --dtype bf16): a second pass
      // left bf16 as it was and turned it into f16 for dtype float16, without a word.
      if (arg->role() == ir::ValueRole::kParameter && ir::IsLowPrecisionFloat(arg->type().dtype)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "amp: parameter '", arg->name(), "' is ", arg->type().ToString(),
            " already: the program is mixed precision (exported with --dtype bf16?); drop the strategy's amp, or "
            "export the model in f32"));
      }
    }
    return absl::OkStatus();
  }

  // Values some op reads, or the program gives out (its loss and outputs).
  absl::flat_hash_set<const Value*> ReadValues() const {
    absl::flat_hash_set<const Value*> read;
    for (const auto& op : program_.block().ops()) read.insert(op->operands().begin(), op->operands().end());
    if (program_.loss() != nullptr) read.insert(program_.loss());
    for (const ir::ProgramOutput& out : program_.outputs()) read.insert(out.value);
    return read;
  }

  // o2: every trainable float parameter that some op outside the f32 list reads, other than
  // as a norm's parameter.
  void LowerParameters() {
    absl::flat_hash_set<const Value*> read_low;
    for (const auto& op : program_.block().ops()) {
      if (InFloat32List(*op)) continue;
      for (size_t k = 0; k < op->num_operands(); ++k) {
        if (!KeepsOperandInFloat32(*op, k)) read_low.insert(op->operand(k));
      }
    }
    for (Value* arg : program_.block().arguments()) {
      if (arg->role() != ir::ValueRole::kParameter || !arg->trainable() || !IsFloat(arg) || !read_low.contains(arg)) {
        continue;
      }
      if (arg->type().dtype == low_) continue;
      arg->set_type({arg->type().shape, low_});
      ++report_.low_precision_params;
    }
  }

  // The dtype `op`'s float operands must have, or nullopt to leave them as they are. The op
  // that makes the loss runs in f32 whatever its type (the micro-batch pass's `scale` of the
  // loss, say): the loss is reported, and it seeds the backward, where a float16 loss scale
  // would not even be representable.
  std::optional<DataType> OperandDtype(const Operation& op) const {
    const bool makes_loss = program_.loss() != nullptr && program_.loss()->producer() == &op;
    bool any_low = false;
    bool any_f32 = false;
    for (const Value* x : op.operands()) {
      if (!IsFloat(x)) continue;
      any_low = any_low || ir::IsLowPrecisionFloat(x->type().dtype);
      any_f32 = any_f32 || x->type().dtype == DataType::kFloat32;
    }
    if (!any_low && !any_f32) return std::nullopt;
    if (InFloat32List(op) || makes_loss) return DataType::kFloat32;
    if (InLowPrecisionList(op.type()) || level_ == AmpLevel::kO2) return low_;
    if (any_low && any_f32) return DataType::kFloat32;  // o1 promotes a mixed op
    return std::nullopt;
  }

  absl::StatusOr<Value*> CastOf(ir::Builder& b, Value* x, DataType dtype, int64_t chunk) {
    Value*& cast = casts_[{x, dtype, chunk}];
    if (cast == nullptr) {
      PDIST_ASSIGN_OR_RETURN(cast, b.Op1("cast", {x}, {{"dtype", dtype}}));
      ++report_.casts;
    }
    return cast;
  }

  // `op`'s index now that casts may sit before it (it was at `from` or later).
  size_t FindOp(const Operation* op, size_t from) const {
    const auto& ops = program_.block().ops();
    while (ops[from].get() != op) ++from;
    return from;
  }

  absl::Status Retype(Operation& op) {
    const ir::OpDef* def = ir::OpRegistry::Global().Find(op.type());
    if (def == nullptr) return absl::NotFoundError(absl::StrCat("amp: unknown op '", op.type(), "'"));
    PDIST_ASSIGN_OR_RETURN(std::vector<ir::TensorType> types, ir::InferResultTypes(*def, op.operands(), op.attrs()));
    bool low = false;
    for (size_t r = 0; r < op.num_results(); ++r) {
      op.result(r)->set_type(types.at(r));
      low = low || ir::IsLowPrecisionFloat(types.at(r).dtype);
    }
    if (low) ++report_.low_precision_ops;
    return absl::OkStatus();
  }

  // The built-in lists with the strategy's custom ones over them.
  bool InFloat32List(const Operation& op) const {
    const std::string& type = op.type();
    return black_.contains(type) || (RunsInFloat32(type) && !white_.contains(type) && !TakesLow(op));
  }
  // o2's norms and cross entropy: f32 math on a low-precision activation (operand 0), f32
  // parameters. A soft label is a distribution the op's type must match: it stays f32.
  bool TakesLow(const Operation& op) const {
    const std::string& type = op.type();
    if (level_ != AmpLevel::kO2 || !TakesLowPrecisionActivations(type) || white_.contains(type) ||
        black_.contains(type)) {
      return false;
    }
    return type != "cross_entropy_with_softmax" || op.num_operands() < 2 || !IsFloat(op.operand(1));
  }
  bool KeepsOperandInFloat32(const Operation& op, size_t k) const { return k > 0 && TakesLow(op); }
  bool InLowPrecisionList(const std::string& type) const {
    return white_.contains(type) || (RunsInLowPrecision(type) && !black_.contains(type));
  }

  ir::Program& program_;
  const DataType low_;
  const AmpLevel level_;
  const absl::flat_hash_set<std::string> white_;  // custom low-precision ops
  const absl::flat_hash_set<std::string> black_;  // custom f32 ops
  AmpReport report_;
  std::map<std::tuple<const Value*, DataType, int64_t>, Value*> casts_;
};

}  // namespace

absl::StatusOr<AmpLevel> ParseAmpLevel(const std::string& name) {
  if (name == "o1" || name == "O1") return AmpLevel::kO1;
  if (name == "o2" || name == "O2") return AmpLevel::kO2;
  return absl::InvalidArgumentError(absl::StrCat("amp level '", name, "': expected o1 or o2"));
}

const char* AmpLevelName(AmpLevel level) { return level == AmpLevel::kO1 ? "o1" : "o2"; }

absl::StatusOr<ir::DataType> ParseAmpDtype(const std::string& name) {
  if (name == "bfloat16" || name == "bf16") return DataType::kBFloat16;
  if (name == "float16" || name == "f16") return DataType::kFloat16;
  return absl::InvalidArgumentError(absl::StrCat("amp dtype '", name, "': expected bfloat16 or float16"));
}

bool RunsInFloat32(const std::string& op_type) {
  static const auto* ops = new absl::flat_hash_set<std::string>{
      "layer_norm", "rms_norm", "softmax", "log_softmax", "cross_entropy_with_softmax", "mean", "sum", "max", "min",
      "exp"};
  return ops->contains(op_type);
}

bool TakesLowPrecisionActivations(const std::string& op_type) {
  return op_type == "layer_norm" || op_type == "rms_norm" || op_type == "cross_entropy_with_softmax";
}

bool RunsInLowPrecision(const std::string& op_type) {
  static const auto* ops = new absl::flat_hash_set<std::string>{"matmul", "flash_attn"};
  return ops->contains(op_type);
}

absl::StatusOr<AmpReport> ApplyAmp(ir::Program& program, ir::DataType low, AmpLevel level,
                                   const AmpCustomLists& custom) {
  if (!ir::IsLowPrecisionFloat(low)) {
    return absl::InvalidArgumentError(
        absl::StrCat("amp: the low-precision dtype must be bf16 or f16, got ", ir::DataTypeName(low)));
  }
  return AmpRewriter(program, low, level, custom).Run();
}

}  // namespace pdist::passes

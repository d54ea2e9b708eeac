// VerifyProgram: SSA, signatures, attributes, inferred types, loss and state bindings.
#include "ir/verifier.h"

#include <limits>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "ir/builder.h"
#include "ir/dist/local_slice.h"
#include "ir/init_spec.h"
#include "ir/op_def.h"
#include "ir/printer.h"
#include "ir/status.h"

namespace pdist::ir {

absl::Status CheckTensorType(const TensorType& type) {
  if (static_cast<int>(type.dtype) < 0 || static_cast<int>(type.dtype) > static_cast<int>(DataType::kBool)) {
    return absl::InvalidArgumentError(absl::StrCat("invalid data type code ", static_cast<int>(type.dtype)));
  }
  int64_t elements = 1;
  for (int64_t d : type.shape) {
    if (d < 0) return absl::InvalidArgumentError(absl::StrCat("negative dimension in shape ", ShapeToString(type.shape)));
    if (d != 0 && elements > std::numeric_limits<int64_t>::max() / 16 / d) {
      // /16: room for the byte size of the largest dtype and for sums of a few such tensors.
      return absl::InvalidArgumentError(absl::StrCat("shape ", ShapeToString(type.shape), " has too many elements"));
    }
    elements *= d;
  }
  return absl::OkStatus();
}

bool IsValidUtf8(std::string_view text) {
  size_t i = 0;
  while (i < text.size()) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    int extra = 0;
    uint32_t code = 0, min = 0;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xe0) == 0xc0) {
      extra = 1, code = c & 0x1f, min = 0x80;
    } else if ((c & 0xf0) == 0xe0) {
      extra = 2, code = c & 0x0f, min = 0x800;
    } else if ((c & 0xf8) == 0xf0) {
      extra = 3, code = c & 0x07, min = 0x10000;
    } else {
      return false;
    }
    if (i + static_cast<size_t>(extra) >= text.size()) return false;
    for (int k = 1; k <= extra; ++k) {
      const unsigned char cont = static_cast<unsigned char>(text[i + k]);
      if ((cont & 0xc0) != 0x80) return false;
      code = (code << 6) | (cont & 0x3f);
    }
    if (code < min || code > 0x10ffff || (code >= 0xd800 && code <= 0xdfff)) return false;
    i += extra + 1;
  }
  return true;
}

namespace {

// Every string the program carries that model.pb stores as a protobuf `string`.
absl::Status CheckUtf8(std::string_view text, absl::string_view what) {
  if (IsValidUtf8(text)) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(what, " is not valid UTF-8"));
}

class Verifier {
 public:
  explicit Verifier(const Program& program) : program_(program), numbering_(program) {}

  absl::Status Run();

 private:
  // A value's defining site: arguments and results must be owned by the program and new.
  absl::Status CheckDefinition(const Value* v, const std::string& where);
  absl::Status CheckUse(const Value* v, const std::string& where) const;
  absl::Status CheckDistAttr(const Value& v, const std::string& where) const;
  absl::Status CheckStored(const Value& v, const std::string& where) const;
  absl::Status CheckOp(size_t index, const Operation& op);
  absl::Status CheckAttributes(const OpDef& def, const Operation& op, const std::string& where) const;
  absl::Status CheckBindings();
  std::string Name(const Value* v) const { return numbering_.Name(v); }

  const Program& program_;
  const ValueNumbering numbering_;
  absl::flat_hash_set<const Value*> defined_;
};

absl::Status Verifier::CheckDefinition(const Value* v, const std::string& where) {
  if (v == nullptr) return absl::InvalidArgumentError(absl::StrCat(where, ": null value"));
  if (program_.FindValue(v->id()) != v) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": value ", Name(v), " (id ", v->id(),
                                                   ") does not belong to this program"));
  }
  if (!defined_.insert(v).second) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": value ", Name(v), " is defined more than once"));
  }
  PDIST_RETURN_IF_ERROR(CheckUtf8(v->name(), absl::StrCat(where, ": the name of ", Name(v))));
  PDIST_RETURN_IF_ERROR(CheckUtf8(v->init(), absl::StrCat(where, ": the init of ", Name(v))));
  // Its grammar here, so that a program that verifies (pdist-opt --verify-only) initialises;
  // whether a cast_of names a parameter is the initialiser's to say.
  if (!v->init().empty()) {
    absl::StatusOr<InitSpec> init = ParseInitSpec(v->init());
    if (!init.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": value ", Name(v), ": ", init.status().message()));
    }
  }
  absl::Status type = CheckTensorType(v->type());
  if (!type.ok()) return absl::InvalidArgumentError(absl::StrCat(where, ": value ", Name(v), ": ", type.message()));
  // A parameter or optimizer state of no elements trains nothing and stores no numbers (a model
  // file cannot say "stored" for it): refused by name, where it was written as a model that no
  // tool could read back, or failed inside a pass.
  if (v->is_persistent() && NumElements(v->type().shape) == 0) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": value ", Name(v), " '", v->name(), "' ",
                                                   v->type().ToString(), " is a parameter or state of no elements"));
  }
  PDIST_RETURN_IF_ERROR(CheckDistAttr(*v, where));
  return CheckStored(*v, where);
}

// Stored numbers and init "stored" come together, and the numbers are the whole tensor's.
absl::Status Verifier::CheckStored(const Value& v, const std::string& where) const {
  const bool says_stored = v.init() == kStoredInit;
  if (v.stored() == nullptr) {
    if (!says_stored) return absl::OkStatus();
    return absl::InvalidArgumentError(absl::StrCat(
        where, ": value ", Name(&v), " has init \"stored\" but carries no numbers (textual IR does not hold "
        "tensor data: read the model.pb the importer wrote)"));
  }
  if (!says_stored) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": value ", Name(&v), " carries stored numbers but its init is '",
                                                   v.init(), "', not \"stored\""));
  }
  const Shape global = program_.local_rank() >= 0 && v.dist_attr() ? GlobalShapeOf(*v.dist_attr(), v.type().shape)
                                                                   : v.type().shape;
  const int64_t expected = NumElements(global) * DataTypeSize(v.stored()->dtype);
  if (static_cast<int64_t>(v.stored()->bytes.size()) != expected) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": value ", Name(&v), " (", v.type().ToString(), ") stores ",
                                                   v.stored()->bytes.size(), " bytes of ", DataTypeName(v.stored()->dtype),
                                                   "; its whole tensor has ", expected));
  }
  return absl::OkStatus();
}

// Per value only: whether the ops' operands and results agree on a mesh is the completion
// pass's business (it inserts reshards), not an IR invariant.
absl::Status Verifier::CheckDistAttr(const Value& v, const std::string& where) const {
  if (!v.dist_attr()) {
    if (!v.dist_annotated()) return absl::OkStatus();
    return absl::InvalidArgumentError(absl::StrCat(where, ": value ", Name(&v), " is marked annotated but has no dist attr"));
  }
  absl::Status valid = v.dist_attr()->Verify(v.type().shape);
  if (!valid.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": value ", Name(&v), " (", v.type().ToString(), "): ",
                                                   valid.message()));
  }
  return absl::OkStatus();
}

absl::Status Verifier::CheckUse(const Value* v, const std::string& where) const {
  if (v == nullptr || !defined_.contains(v)) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": uses ", v ? Name(v) : "a null value",
                                                   v ? absl::StrCat(" (id ", v->id(), ")") : "",
                                                   ", which is not defined before"));
  }
  return absl::OkStatus();
}

absl::Status Verifier::Run() {
  absl::flat_hash_set<std::string> names;
  for (size_t i = 0; i < program_.block().arguments().size(); ++i) {
    const Value* v = program_.block().arguments()[i];
    const std::string where = absl::StrCat("argument ", i);
    PDIST_RETURN_IF_ERROR(CheckDefinition(v, where));
    if (v->producer() != nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": ", Name(v), " is also the result of an op"));
    }
    if (v->name().empty()) return absl::InvalidArgumentError(absl::StrCat(where, ": ", Name(v), " has no name"));
    if (!names.insert(v->name()).second) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": ", Name(v), ": argument name \"", v->name(),
                                                     "\" is used twice"));
    }
  }
  for (size_t i = 0; i < program_.block().ops().size(); ++i) {
    const Operation* op = program_.block().ops()[i].get();
    if (op == nullptr) return absl::InvalidArgumentError(absl::StrCat("op ", i, " is null"));
    PDIST_RETURN_IF_ERROR(CheckOp(i, *op));
  }
  return CheckBindings();
}

absl::Status Verifier::CheckOp(size_t index, const Operation& op) {
  const std::string where = absl::StrCat("op ", index, " `", PrintOperation(op, numbering_), "`");
  auto error = [&where](absl::string_view message) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": ", message));
  };
  absl::StatusOr<const OpDef*> def = OpRegistry::Global().Lookup(op.type());
  if (!def.ok()) return error(def.status().message());
  absl::Status count = CheckOperandCount(**def, op.num_operands());
  if (!count.ok()) return error(count.message());
  for (size_t i = 0; i < op.num_operands(); ++i) {
    const Value* v = op.operand(i);
    const OperandSpec& spec = (*def)->inputs[std::min(i, (*def)->inputs.size() - 1)];
    if (v == nullptr) {
      if (!spec.optional) return error(absl::StrCat("operand ", i, " (", spec.name, ") is absent but not optional"));
      continue;
    }
    PDIST_RETURN_IF_ERROR(CheckUse(v, where));
    // Within a model chunk the backward job of a micro-batch runs before its backward_weight job
    // (ir/pipeline_job.h): a backward op cannot read what a backward_weight op computes.
    const Operation* producer = v->producer();
    if (producer != nullptr && op.role() == OpRole::kBackward && producer->role() == OpRole::kBackwardWeight &&
        producer->chunk() == op.chunk()) {
      return error(absl::StrCat("runs in job backward but reads ", Name(v), ", which `",
                                PrintOperation(*producer, numbering_), "` computes in backward_weight, a later job"));
    }
    // The prologue runs once per step before every micro-batch: on parameters and states only
    // (a data input differs per micro-batch, every other op runs after it).
    if (op.role() == OpRole::kPrologue && ir::ReadsOperand(op, i)) {
      const bool persistent = producer == nullptr && v->role() != ValueRole::kDataInput;
      if (!persistent && (producer == nullptr || producer->role() != OpRole::kPrologue)) {
        return error(absl::StrCat("runs in the prologue (once per step, before every micro-batch) but reads ", Name(v),
                                  producer == nullptr ? ", a data input" : ", which a later job computes",
                                  ": a prologue op reads parameters, states and other prologue ops' results"));
      }
    }
  }
  PDIST_RETURN_IF_ERROR(CheckAttributes(**def, op, where));
  for (size_t i = 0; i < op.num_results(); ++i) {
    const Value* r = op.result(i);
    PDIST_RETURN_IF_ERROR(CheckDefinition(r, where));
    if (r->producer() != &op || r->result_index() != static_cast<int>(i)) {
      return error(absl::StrCat("result ", i, " ", Name(r), " does not point back at this op"));
    }
    // Data, parameters and states are the program's arguments (fed, or kept across steps): an
    // op's result in one of those roles would be taken for persistent state it is not.
    if (r->role() != ValueRole::kActivation && r->role() != ValueRole::kGradient) {
      return error(absl::StrCat("result ", Name(r), " has role '", ValueRoleName(r->role()),
                                "': an op makes activations and gradients; arguments are data, parameters and states"));
    }
  }
  absl::StatusOr<std::vector<TensorType>> inferred = InferResultTypes(**def, op.operands(), op.attrs());
  if (!inferred.ok()) return error(inferred.status().message());
  if (inferred->size() != op.num_results()) {
    return error(absl::StrCat("has ", op.num_results(), " results, ", op.type(), " infers ", inferred->size()));
  }
  for (size_t i = 0; i < op.num_results(); ++i) {
    if ((*inferred)[i] != op.result(i)->type()) {
      return error(absl::StrCat("result ", Name(op.result(i)), " is ", op.result(i)->type().ToString(), " but ",
                                op.type(), " infers ", (*inferred)[i].ToString()));
    }
  }
  return absl::OkStatus();
}

absl::Status Verifier::CheckAttributes(const OpDef& def, const Operation& op, const std::string& where) const {
  absl::StatusOr<AttributeMap> normalized = NormalizeAttributes(def, op.attrs());
  if (!normalized.ok()) return absl::InvalidArgumentError(absl::StrCat(where, ": ", normalized.status().message()));
  for (const auto& [name, value] : op.attrs()) {
    const auto* text = std::get_if<std::string>(&value);
    const auto* texts = std::get_if<std::vector<std::string>>(&value);
    const std::string what = absl::StrCat(where, ": attribute '", name, "'");
    if (text) PDIST_RETURN_IF_ERROR(CheckUtf8(*text, what));
    for (size_t i = 0; texts && i < texts->size(); ++i) PDIST_RETURN_IF_ERROR(CheckUtf8((*texts)[i], what));
  }
  for (const auto& [name, value] : *normalized) {
    auto it = op.attrs().find(name);
    if (it == op.attrs().end()) return absl::InvalidArgumentError(absl::StrCat(where, ": attribute '", name, "' is missing"));
    if (KindOf(it->second) != KindOf(value)) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": attribute '", name, "' is ", AttrKindName(KindOf(it->second)),
                                                     ", expected ", AttrKindName(KindOf(value))));
    }
  }
  return absl::OkStatus();
}

absl::Status Verifier::CheckBindings() {
  if (const Value* loss = program_.loss()) {
    PDIST_RETURN_IF_ERROR(CheckUse(loss, "loss"));
    const TensorType& t = loss->type();
    const bool scalar = t.shape.empty() || (t.shape.size() == 1 && t.shape[0] == 1);
    if (!scalar || !IsFloatingPoint(t.dtype)) {
      return absl::InvalidArgumentError(absl::StrCat("loss ", Name(loss), " must be a floating-point scalar ([] or [1]), got ",
                                                     t.ToString()));
    }
  }
  absl::flat_hash_set<std::string> output_names;
  for (const ProgramOutput& o : program_.outputs()) {
    const std::string where = absl::StrCat("output \"", o.name, "\"");
    PDIST_RETURN_IF_ERROR(CheckUse(o.value, where));
    if (o.name.empty()) return absl::InvalidArgumentError(absl::StrCat("output ", Name(o.value), " has no name"));
    if (!output_names.insert(o.name).second) return absl::InvalidArgumentError(absl::StrCat(where, " is given twice"));
  }
  auto check = [this](const StateUpdate& b, absl::string_view keyword, bool params_only) -> absl::Status {
    const std::string where = absl::StrCat(keyword, " ", Name(b.state), " <- ", Name(b.new_value));
    PDIST_RETURN_IF_ERROR(CheckUse(b.state, where));
    PDIST_RETURN_IF_ERROR(CheckUse(b.new_value, where));
    const bool role_ok = b.state->role() == ValueRole::kParameter ||
                         (!params_only && b.state->role() == ValueRole::kOptimizerState);
    if (!b.state->is_argument() || !role_ok) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": ", Name(b.state), " is not a ",
                                                     params_only ? "parameter" : "parameter or optimizer state"));
    }
    if (b.state->type() == b.new_value->type()) return absl::OkStatus();
    // In a local program the two are pieces, and a gradient may be split otherwise than its
    // parameter (a Partial sum, a sequence-parallel shard): the tensors they are pieces of match.
    if (program_.local_rank() >= 0 && b.state->dist_attr() && b.new_value->dist_attr() &&
        b.state->type().dtype == b.new_value->type().dtype &&
        GlobalShapeOf(*b.state->dist_attr(), b.state->type().shape) ==
            GlobalShapeOf(*b.new_value->dist_attr(), b.new_value->type().shape)) {
      return absl::OkStatus();
    }
    return absl::InvalidArgumentError(absl::StrCat(where, ": type mismatch: ", b.state->type().ToString(), " vs ",
                                                   b.new_value->type().ToString()));
  };
  absl::flat_hash_set<const Value*> bound;
  for (const StateUpdate& g : program_.gradients()) {
    PDIST_RETURN_IF_ERROR(check(g, "gradient", true));
    if (!bound.insert(g.state).second) {
      return absl::InvalidArgumentError(absl::StrCat("parameter ", Name(g.state), " has two gradients"));
    }
  }
  bound.clear();
  for (const StateUpdate& u : program_.updates()) {
    PDIST_RETURN_IF_ERROR(check(u, "update", false));
    if (!bound.insert(u.state).second) {
      return absl::InvalidArgumentError(absl::StrCat(Name(u.state), " is updated twice"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status VerifyProgram(const Program& program) { return Verifier(program).Run(); }

}  // namespace pdist::ir

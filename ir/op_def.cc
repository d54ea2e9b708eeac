// OpRegistry: registration with completeness checks, lookup, attribute normalisation.
#include "ir/op_def.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "ir/ops/op_families.h"
#include "ir/status.h"

namespace pdist::ir {

const AttrSpec* OpDef::FindAttr(const std::string& attr) const {
  for (const AttrSpec& spec : attrs) {
    if (spec.name == attr) return &spec;
  }
  return nullptr;
}

absl::Status OpRegistry::Register(OpDef def) {
  const std::string name = def.name;
  if (name.empty()) return absl::InvalidArgumentError("op registered without a name");
  if (defs_.count(name)) return absl::AlreadyExistsError(absl::StrCat("op '", name, "' registered twice"));
  if (!def.infer_meta) return absl::InvalidArgumentError(absl::StrCat("op '", name, "' has no shape inference"));
  if (!def.cost) return absl::InvalidArgumentError(absl::StrCat("op '", name, "' has no cost"));
  if (!def.infer_spmd || !def.infer_spmd_reverse || !def.describe_spmd) {
    return absl::InvalidArgumentError(
        absl::StrCat("op '", name, "' lacks an SPMD rule (forward, reverse and describe are all required)"));
  }
  if (def.grad_kind == GradKind::kDifferentiable && !def.grad) {
    return absl::InvalidArgumentError(absl::StrCat("op '", name, "' is differentiable but has no gradient builder"));
  }
  // Only an op that talks to other ranks (c_send) may exist for its effect alone.
  if (def.outputs.empty() && !def.communicates) {
    return absl::InvalidArgumentError(absl::StrCat("op '", name, "' has no outputs"));
  }
  for (size_t i = 0; i + 1 < def.inputs.size(); ++i) {
    if (def.inputs[i].variadic) return absl::InvalidArgumentError(absl::StrCat("op '", name, "': only the last input may be variadic"));
  }
  if (!def.result_shape_attr.empty() && (def.FindAttr(def.result_shape_attr) == nullptr || def.outputs.size() != 1)) {
    return absl::InvalidArgumentError(absl::StrCat("op '", name, "': result_shape_attr '", def.result_shape_attr,
                                                   "' must be a declared attribute of an op with one result"));
  }
  defs_.emplace(name, std::move(def));
  return absl::OkStatus();
}

const OpDef* OpRegistry::Find(const std::string& name) const {
  auto it = defs_.find(name);
  return it == defs_.end() ? nullptr : &it->second;
}

absl::StatusOr<const OpDef*> OpRegistry::Lookup(const std::string& name) const {
  if (const OpDef* def = Find(name)) return def;
  std::vector<std::string> close;
  for (const auto& [known, def] : defs_) {
    if (known.find(name) != std::string::npos || name.find(known) != std::string::npos) close.push_back(known);
  }
  std::string hint = close.empty() ? "" : absl::StrCat(" (did you mean ", absl::StrJoin(close, ", "), "?)");
  return absl::NotFoundError(absl::StrCat("unknown op type '", name, "'", hint));
}

std::vector<std::string> OpRegistry::Names() const {
  std::vector<std::string> names;
  for (const auto& [name, def] : defs_) names.push_back(name);
  return names;
}

bool ReadsOperand(const Operation& op, size_t i) {
  if (i >= op.num_operands() || op.operand(i) == nullptr) return false;
  const OpDef* def = OpRegistry::Global().Find(op.type());
  return def == nullptr ||
         std::find(def->type_only_operands.begin(), def->type_only_operands.end(), i) == def->type_only_operands.end();
}

std::optional<size_t> AliasedOperand(const Operation& op, size_t r) {
  const OpDef* def = OpRegistry::Global().Find(op.type());
  if (def == nullptr || r >= op.num_results() || op.result(r) == nullptr) return std::nullopt;
  if (def->view && r == 0 && op.num_operands() > 0 && op.operand(0) != nullptr) return size_t{0};
  for (const auto& [result, operand] : def->aliases_if_same_type) {
    if (result == r && operand < op.num_operands() && op.operand(operand) != nullptr &&
        op.operand(operand)->type() == op.result(r)->type()) {
      return operand;
    }
  }
  return std::nullopt;
}

std::vector<std::pair<size_t, size_t>> OverwritableOperands(const Operation& op) {
  std::vector<std::pair<size_t, size_t>> pairs;
  const OpDef* def = OpRegistry::Global().Find(op.type());
  if (def == nullptr) return pairs;
  for (const auto& [result, operand] : def->overwrites_dying_operand) {
    if (result < op.num_results() && op.result(result) != nullptr && operand < op.num_operands() &&
        op.operand(operand) != nullptr && op.operand(operand)->type() == op.result(result)->type()) {
      pairs.emplace_back(result, operand);
    }
  }
  return pairs;
}

const OpRegistry& OpRegistry::Global() {
  static const OpRegistry* registry = [] {
    auto* r = new OpRegistry();
    absl::Status status = RegisterAllOps(*r);
    if (!status.ok()) {
      // A programmer error in ir/ops: fail loudly at start-up.
      std::fprintf(stderr, "pdist: op registration failed: %s\n", std::string(status.message()).c_str());
      std::abort();
    }
    return r;
  }();
  return *registry;
}

absl::StatusOr<AttributeMap> NormalizeAttributes(const OpDef& def, const AttributeMap& attrs) {
  AttributeMap out;
  for (const auto& [name, value] : attrs) {
    const AttrSpec* spec = def.FindAttr(name);
    if (spec == nullptr) {
      std::vector<std::string> known;
      for (const AttrSpec& s : def.attrs) known.push_back(s.name);
      return absl::InvalidArgumentError(absl::StrCat("op '", def.name, "' has no attribute '", name,
                                                     "' (known: ", absl::StrJoin(known, ", "), ")"));
    }
    Attribute v = value;
    // Integers are accepted where a double is expected (epsilon = 1).
    if (KindOf(spec->default_value) == AttrKind::kDouble && KindOf(v) == AttrKind::kInt) {
      v = static_cast<double>(std::get<int64_t>(v));
    }
    if (KindOf(spec->default_value) == AttrKind::kDoubleList && KindOf(v) == AttrKind::kIntList) {
      std::vector<double> d;
      for (int64_t i : std::get<std::vector<int64_t>>(v)) d.push_back(static_cast<double>(i));
      v = d;
    }
    // An empty list of any kind is accepted for a list attribute.
    if (KindOf(v) != KindOf(spec->default_value)) {
      return absl::InvalidArgumentError(absl::StrCat("op '", def.name, "': attribute '", name, "' is ",
                                                     AttrKindName(KindOf(v)), ", expected ",
                                                     AttrKindName(KindOf(spec->default_value))));
    }
    out.emplace(name, std::move(v));
  }
  for (const AttrSpec& spec : def.attrs) out.emplace(spec.name, spec.default_value);
  return out;
}

absl::Status CheckOperandCount(const OpDef& def, size_t num_operands) {
  size_t required = 0;
  bool variadic = false;
  for (const OperandSpec& spec : def.inputs) {
    if (spec.variadic) variadic = true;
    else if (!spec.optional) ++required;
  }
  const size_t fixed = def.inputs.size() - (variadic ? 1 : 0);
  if (variadic ? num_operands < fixed : (num_operands < required || num_operands > def.inputs.size())) {
    return absl::InvalidArgumentError(absl::StrCat("op '", def.name, "' takes ",
                                                   variadic ? absl::StrCat("at least ", fixed) : absl::StrCat(def.inputs.size()),
                                                   " operands, got ", num_operands));
  }
  return absl::OkStatus();
}

}  // namespace pdist::ir

// ImportContext: ONNX names → program values or known numbers.
#include "import/onnx_context.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "ir/glob.h"
#include "ir/status.h"

namespace pdist::onnx_import {

std::string Describe(const onnx::NodeProto& node) {
  return absl::StrCat("node '", node.name(), "' (", node.op_type(), ")");
}

const onnx::AttributeProto* FindAttr(const onnx::NodeProto& node, const std::string& name) {
  for (const onnx::AttributeProto& a : node.attribute()) {
    if (a.name() == name) return &a;
  }
  return nullptr;
}

int64_t IntAttr(const onnx::NodeProto& node, const std::string& name, int64_t fallback) {
  const onnx::AttributeProto* a = FindAttr(node, name);
  return a != nullptr ? a->i() : fallback;
}

double FloatAttr(const onnx::NodeProto& node, const std::string& name, double fallback) {
  const onnx::AttributeProto* a = FindAttr(node, name);
  return a != nullptr ? a->f() : fallback;
}

std::optional<std::vector<int64_t>> IntsAttr(const onnx::NodeProto& node, const std::string& name) {
  const onnx::AttributeProto* a = FindAttr(node, name);
  if (a == nullptr) return std::nullopt;
  return std::vector<int64_t>(a->ints().begin(), a->ints().end());
}

bool ImportContext::Frozen(const std::string& name) const {
  for (const std::string& pattern : options_.frozen) {
    if (ir::GlobMatch(pattern, name)) return true;
  }
  return false;
}

bool ImportContext::IsInitializer(const std::string& name) const {
  auto it = entries_.find(name);
  return it != entries_.end() && it->second.initializer;
}

void ImportContext::DefineKnown(const std::string& name, OnnxTensor numbers, bool initializer) {
  Entry& e = entries_[name];
  e.known = std::move(numbers);
  e.initializer = initializer;
}

absl::Status ImportContext::DefineCopyOfInitializer(const std::string& name, const std::string& source) {
  DefineKnown(name, *entries_.at(source).known, /*initializer=*/true);
  return absl::OkStatus();
}

absl::StatusOr<ir::Value*> ImportContext::ValueOf(const std::string& name) {
  auto it = entries_.find(name);
  if (it == entries_.end()) {
    return absl::InvalidArgumentError(absl::StrCat("'", name, "' is read before any node, input or initializer defines it "
                                                   "(the graph's nodes must be in topological order)"));
  }
  Entry& e = it->second;
  if (e.value != nullptr) return e.value;
  // Known numbers read as data: a parameter carrying them.
  const bool trainable = e.initializer && ir::IsFloatingPoint(e.known->type.dtype) && !Frozen(name);
  e.value = builder_.Parameter(name, e.known->type, ir::kStoredInit, trainable);
  e.value->set_stored(e.known->numbers);
  ++parameters_;
  return e.value;
}

absl::StatusOr<ir::Value*> ImportContext::Input(const onnx::NodeProto& node, int i) {
  if (!HasInput(node, i)) {
    return absl::InvalidArgumentError(absl::StrCat(Describe(node), " has no input ", i));
  }
  return ValueOf(node.input(i));
}

const OnnxTensor* ImportContext::Known(const onnx::NodeProto& node, int i) const {
  if (!HasInput(node, i)) return nullptr;
  auto it = entries_.find(node.input(i));
  if (it == entries_.end() || !it->second.known) return nullptr;
  return &*it->second.known;
}

absl::StatusOr<std::vector<int64_t>> ImportContext::KnownInts(const onnx::NodeProto& node, int i, const char* what) const {
  const OnnxTensor* t = Known(node, i);
  if (t == nullptr) {
    return absl::UnimplementedError(absl::StrCat(Describe(node), ": its ", what, " (input ", i, ", '",
                                                 HasInput(node, i) ? node.input(i) : "", "') is computed at run time; pdist "
                                                 "needs it known when the model is imported (static shapes)"));
  }
  absl::StatusOr<std::vector<int64_t>> ints = t->Ints();
  if (!ints.ok()) return absl::InvalidArgumentError(absl::StrCat(Describe(node), ": its ", what, ": ", ints.status().message()));
  return ints;
}

absl::StatusOr<std::vector<ir::Value*>> ImportContext::Create(const onnx::NodeProto& node, const std::string& type,
                                                              const std::vector<ir::Value*>& operands,
                                                              const ir::AttributeMap& attrs) {
  absl::StatusOr<std::vector<ir::Value*>> r = builder_.Create(type, operands, attrs);
  if (!r.ok()) {
    std::vector<std::string> types;
    for (const ir::Value* v : operands) types.push_back(v ? v->type().ToString() : "none");
    return absl::Status(r.status().code(), absl::StrCat(Describe(node), " as pdist ", type, "(", absl::StrJoin(types, ", "),
                                                        "): ", r.status().message()));
  }
  return r;
}

absl::StatusOr<ir::Value*> ImportContext::Op1(const onnx::NodeProto& node, const std::string& type,
                                              const std::vector<ir::Value*>& operands, const ir::AttributeMap& attrs) {
  PDIST_ASSIGN_OR_RETURN(std::vector<ir::Value*> r, Create(node, type, operands, attrs));
  return r.at(0);
}

}  // namespace pdist::onnx_import

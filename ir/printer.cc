// Textual IR printer: canonical value numbering, one line per argument, op and binding.
#include "ir/printer.h"

#include <sstream>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace pdist::ir {

ValueNumbering::ValueNumbering(const Program& program) {
  // try_emplace keeps the first definition of a value defined twice (the verifier reports it).
  for (const Value* v : program.block().arguments()) numbers_.try_emplace(v, static_cast<int64_t>(numbers_.size()));
  for (const auto& op : program.block().ops()) {
    for (const Value* r : op->results()) numbers_.try_emplace(r, static_cast<int64_t>(numbers_.size()));
  }
}

int64_t ValueNumbering::Number(const Value* v) const {
  auto it = numbers_.find(v);
  return it == numbers_.end() ? -1 : it->second;
}

std::string ValueNumbering::Name(const Value* v) const {
  if (v == nullptr) return "none";
  const int64_t n = Number(v);
  // Deliberately unparsable: a dump of broken IR must not read back as a valid program.
  if (n < 0) return absl::StrCat("%<undefined id ", v->id(), ">");
  return absl::StrCat("%", n);
}

namespace {

// The trainable flag each role gets from Builder; the printer writes it only when it differs.
bool DefaultTrainable(ValueRole role) { return role == ValueRole::kParameter; }

std::string PrintArgument(const Value& v, const ValueNumbering& n) {
  std::vector<std::string> attrs;
  if (!v.init().empty()) attrs.push_back(absl::StrCat("init = ", AttributeToString(Attribute(v.init()))));
  if (v.trainable() != DefaultTrainable(v.role())) {
    attrs.push_back(absl::StrCat("trainable = ", AttributeToString(Attribute(v.trainable()))));
  }
  std::string line = absl::StrCat(n.Name(&v), " = ", ValueRoleName(v.role()), " ",
                                  AttributeToString(Attribute(v.name())), " : ", PrintValueType(v, false));
  if (!attrs.empty()) absl::StrAppend(&line, " {", absl::StrJoin(attrs, ", "), "}");
  return line;
}

std::string PrintBinding(absl::string_view keyword, const StateUpdate& b, const ValueNumbering& n) {
  return absl::StrCat(keyword, " ", n.Name(b.state), " <- ", n.Name(b.new_value));
}

}  // namespace

std::string PrintValueType(const Value& value, bool with_role) {
  std::string text;
  if (with_role && value.role() != ValueRole::kActivation) absl::StrAppend(&text, ValueRoleName(value.role()), " ");
  absl::StrAppend(&text, value.type().ToString());
  // Per-value suffixes, each introduced by its own keyword (the parser's ParseValueSuffix):
  // ` dist {...}`, or ` dist! {...}` for a user annotation that completion must keep.
  if (value.dist_attr()) {
    absl::StrAppend(&text, value.dist_annotated() ? " dist! " : " dist ", value.dist_attr()->ToString());
  }
  return text;
}

std::string PrintOperation(const Operation& op, const ValueNumbering& n) {
  std::string line;
  if (op.num_results() > 0) {
    std::vector<std::string> results;
    for (const Value* r : op.results()) results.push_back(n.Name(r));
    absl::StrAppend(&line, absl::StrJoin(results, ", "), " = ");
  }
  std::vector<std::string> operands;
  for (const Value* v : op.operands()) operands.push_back(n.Name(v));
  absl::StrAppend(&line, op.type(), "(", absl::StrJoin(operands, ", "), ")");
  if (!op.attrs().empty()) {
    std::vector<std::string> attrs;
    for (const auto& [name, value] : op.attrs()) attrs.push_back(absl::StrCat(name, " = ", AttributeToString(value)));
    absl::StrAppend(&line, " {", absl::StrJoin(attrs, ", "), "}");
  }
  if (op.num_results() > 0) {
    std::vector<std::string> types;
    for (const Value* r : op.results()) types.push_back(r ? PrintValueType(*r, true) : "<null>");
    absl::StrAppend(&line, " : ", absl::StrJoin(types, ", "));
  }
  // The pipeline job the op runs in (ir/pipeline_job.h), unless it is the default forward.0.
  if (op.role() != OpRole::kForward || op.chunk() != 0) {
    absl::StrAppend(&line, " @", OpRoleName(op.role()), op.chunk() != 0 ? absl::StrCat(".", op.chunk()) : "");
  }
  return line;
}

void PrintProgram(const Program& program, std::ostream& os) {
  const ValueNumbering n(program);
  if (program.local_rank() >= 0) {
    os << "program rank " << program.local_rank() << " {\n";
  } else {
    os << "program {\n";
  }
  for (const Value* v : program.block().arguments()) {
    os << "  " << (v ? PrintArgument(*v, n) : "<null argument>") << "\n";
  }
  for (const auto& op : program.block().ops()) os << "  " << PrintOperation(*op, n) << "\n";
  if (program.loss() != nullptr) os << "  loss " << n.Name(program.loss()) << "\n";
  for (const ProgramOutput& o : program.outputs()) {
    os << "  output " << AttributeToString(Attribute(o.name)) << " " << n.Name(o.value) << "\n";
  }
  for (const StateUpdate& g : program.gradients()) os << "  " << PrintBinding("gradient", g, n) << "\n";
  for (const StateUpdate& u : program.updates()) os << "  " << PrintBinding("update", u, n) << "\n";
  os << "}\n";
}

std::string PrintProgram(const Program& program) {
  std::ostringstream os;
  PrintProgram(program, os);
  return os.str();
}

}  // namespace pdist::ir

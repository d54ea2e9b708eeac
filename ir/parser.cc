// Textual IR parser: recursive descent over the Lexer's tokens, building a Program as it goes.
#include "ir/parser.h"

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <optional>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "ir/builder.h"
#include "ir/legacy_types.h"
#include "ir/lexer.h"
#include "ir/op_def.h"
#include "ir/status.h"
#include "ir/verifier.h"

namespace pdist::ir {

namespace {

constexpr ValueRole kRoles[] = {ValueRole::kDataInput, ValueRole::kParameter, ValueRole::kOptimizerState,
                                ValueRole::kActivation, ValueRole::kGradient};

const ValueRole* FindRole(std::string_view name) {
  for (const ValueRole& role : kRoles) {
    if (name == ValueRoleName(role)) return &role;
  }
  return nullptr;
}

class Parser {
 public:
  explicit Parser(std::string_view text) : lexer_(text) {}

  absl::StatusOr<Program> Parse();
  // One attribute value filling the whole text.
  absl::StatusOr<Attribute> ParseOneAttribute();
  // One `{mesh: ..., dims_mapping: ...}` filling the whole text.
  absl::StatusOr<DistAttr> ParseOneDistAttr();

 private:
  struct Definition {
    Value* value;
    int line;
    int column;
  };
  // What follows a value's tensor type: ` dist {...}` or ` dist! {...}` (annotated), or nothing.
  struct ValueSuffix {
    std::optional<DistAttr> dist;
    bool annotated = false;
    void ApplyTo(Value* v) const {
      v->set_dist_attr(dist);
      v->set_dist_annotated(annotated);
    }
  };

  absl::Status Advance();
  absl::Status Error(const Token& at, absl::string_view message) const { return ErrorAt(at.line, at.column, message); }
  absl::Status Unexpected(absl::string_view expected) const {
    return Error(tok_, absl::StrCat("expected ", expected, ", got ", tok_.Describe()));
  }
  // Consumes punctuation `p`, or fails with "expected 'p' <context>, got ...".
  absl::Status Expect(const char* p, absl::string_view context);

  absl::Status ParseStatement();
  absl::Status ParseArgument(const Token& name, const Token& role);
  // Called with the op type consumed (`op_token`) and tok_ at '('.
  absl::Status ParseOperation(const Token& op_token, const std::vector<Token>& result_names);
  absl::Status ParseRoleAndChunk(Operation& op);
  absl::Status ParseBinding();
  absl::Status ParseOutput();

  absl::StatusOr<Value*> ParseUse();
  absl::Status Define(const Token& name, Value* value);
  absl::StatusOr<TensorType> ParseType();
  absl::StatusOr<ValueSuffix> ParseValueSuffix(const TensorType& type);
  absl::StatusOr<DistAttr> ParseDistAttr();
  absl::StatusOr<ProcessMesh> ParseMesh();
  absl::StatusOr<PartialDims> ParsePartialDims();
  absl::StatusOr<std::vector<int64_t>> ParseIntList(absl::string_view what);
  // Consumes `key :` of a dist attr field.
  absl::Status ExpectKey(const char* key);
  absl::StatusOr<ValueRole> ParseResultRole();
  absl::StatusOr<AttributeMap> ParseAttrDict();
  absl::StatusOr<Attribute> ParseAttrValue();
  absl::StatusOr<Attribute> ParseScalar();
  absl::StatusOr<Attribute> ParseList();
  absl::StatusOr<int64_t> ParseInt(const Token& t) const;
  absl::StatusOr<double> ParseDouble(const Token& t) const;

  Lexer lexer_;
  Token tok_;
  Program program_;
  absl::flat_hash_map<std::string, Definition> defs_;
};

absl::Status Parser::Advance() {
  PDIST_ASSIGN_OR_RETURN(tok_, lexer_.Next());
  return absl::OkStatus();
}

absl::Status Parser::Expect(const char* p, absl::string_view context) {
  if (!tok_.Is(p)) return Unexpected(absl::StrCat("'", p, "' ", context));
  return Advance();
}

absl::StatusOr<Program> Parser::Parse() {
  PDIST_RETURN_IF_ERROR(Advance());
  if (!tok_.IsIdent("program")) return Unexpected("'program'");
  PDIST_RETURN_IF_ERROR(Advance());
  if (tok_.IsIdent("rank")) {  // a local program: `program rank 1 {`
    PDIST_RETURN_IF_ERROR(Advance());
    if (tok_.kind != TokenKind::kInt) return Unexpected("a rank (a non-negative integer) after 'program rank'");
    PDIST_ASSIGN_OR_RETURN(int64_t rank, ParseInt(tok_));
    program_.set_local_rank(rank);
    PDIST_RETURN_IF_ERROR(Advance());
  }
  PDIST_RETURN_IF_ERROR(Expect("{", "after 'program'"));
  while (!tok_.Is("}")) {
    if (tok_.kind == TokenKind::kEof) return Unexpected("'}' at the end of the program");
    PDIST_RETURN_IF_ERROR(ParseStatement());
  }
  PDIST_RETURN_IF_ERROR(Advance());
  if (tok_.kind != TokenKind::kEof) return Unexpected("end of input after the program's '}'");
  PDIST_RETURN_IF_ERROR(UpgradeLegacyResultTypes(program_));
  return std::move(program_);
}

absl::StatusOr<Attribute> Parser::ParseOneAttribute() {
  PDIST_RETURN_IF_ERROR(Advance());
  PDIST_ASSIGN_OR_RETURN(Attribute value, ParseAttrValue());
  if (tok_.kind != TokenKind::kEof) return Unexpected("end of input after the attribute value");
  return value;
}

absl::StatusOr<DistAttr> Parser::ParseOneDistAttr() {
  PDIST_RETURN_IF_ERROR(Advance());
  PDIST_ASSIGN_OR_RETURN(DistAttr attr, ParseDistAttr());
  if (tok_.kind != TokenKind::kEof) return Unexpected("end of input after the dist attr");
  return attr;
}

absl::Status Parser::ParseStatement() {
  if (tok_.IsIdent("loss") || tok_.IsIdent("gradient") || tok_.IsIdent("update")) return ParseBinding();
  if (tok_.IsIdent("output")) return ParseOutput();
  if (tok_.kind == TokenKind::kIdent) {  // an op without results
    const Token op_token = tok_;
    PDIST_RETURN_IF_ERROR(Advance());
    return ParseOperation(op_token, {});
  }
  if (tok_.kind != TokenKind::kValueRef) return Unexpected("a statement (%value = ..., loss, output, gradient, update)");
  std::vector<Token> names = {tok_};
  PDIST_RETURN_IF_ERROR(Advance());
  while (tok_.Is(",")) {
    PDIST_RETURN_IF_ERROR(Advance());
    if (tok_.kind != TokenKind::kValueRef) return Unexpected("a result name after ','");
    names.push_back(tok_);
    PDIST_RETURN_IF_ERROR(Advance());
  }
  PDIST_RETURN_IF_ERROR(Expect("=", "after the result names"));
  if (tok_.kind != TokenKind::kIdent) return Unexpected("an op type or an argument role");
  const Token head = tok_;
  PDIST_RETURN_IF_ERROR(Advance());
  if (tok_.kind == TokenKind::kString) {  // %0 = data "x" : f32[8]
    if (names.size() != 1) return Error(names[1], "an argument defines exactly one value");
    return ParseArgument(names[0], head);
  }
  return ParseOperation(head, names);
}

absl::Status Parser::ParseArgument(const Token& name, const Token& role_token) {
  const ValueRole* role = FindRole(role_token.text);
  if (role == nullptr) {
    return Error(role_token, absl::StrCat("unknown argument role '", role_token.text,
                                          "' (expected data, param, state, act or grad)"));
  }
  const std::string arg_name = tok_.text;
  PDIST_RETURN_IF_ERROR(Advance());
  PDIST_RETURN_IF_ERROR(Expect(":", "before the argument's type"));
  PDIST_ASSIGN_OR_RETURN(TensorType type, ParseType());
  PDIST_ASSIGN_OR_RETURN(ValueSuffix suffix, ParseValueSuffix(type));
  Value* v = program_.NewValue(std::move(type), *role);
  suffix.ApplyTo(v);
  v->set_name(arg_name);
  v->set_trainable(*role == ValueRole::kParameter);
  if (tok_.Is("{")) {
    const Token at = tok_;
    PDIST_ASSIGN_OR_RETURN(AttributeMap attrs, ParseAttrDict());
    for (const auto& [key, value] : attrs) {
      if (key == "init" && std::holds_alternative<std::string>(value)) {
        v->set_init(std::get<std::string>(value));
      } else if (key == "trainable" && std::holds_alternative<bool>(value)) {
        v->set_trainable(std::get<bool>(value));
      } else {
        return Error(at, absl::StrCat("argument attribute '", key,
                                      "' is unknown or of the wrong kind (expected init = \"...\", trainable = true|false)"));
      }
    }
  }
  program_.block().add_argument(v);
  return Define(name, v);
}

// `@backward`, `@forward.1`: the op's pipeline role and model chunk (ir/pipeline_job.h).
absl::Status Parser::ParseRoleAndChunk(Operation& op) {
  PDIST_RETURN_IF_ERROR(Advance());  // '@'
  if (tok_.kind != TokenKind::kIdent) return Unexpected("a role after '@' (forward, backward, backward_weight, optimizer, prologue)");
  const Token role_token = tok_;
  const std::string text = tok_.text;
  const size_t dot = text.find('.');
  std::optional<OpRole> role = ParseOpRole(std::string_view(text).substr(0, dot));
  if (!role) {
    return Error(role_token, absl::StrCat("unknown role '", text.substr(0, dot),
                                          "' (forward, backward, backward_weight, optimizer, prologue)"));
  }
  int64_t chunk = 0;
  if (dot != std::string::npos && !absl::SimpleAtoi(text.substr(dot + 1), &chunk)) {
    return Error(role_token, absl::StrCat("chunk '", text.substr(dot + 1), "' after the role is not a number"));
  }
  op.set_role(*role);
  op.set_chunk(chunk);
  return Advance();
}

absl::Status Parser::ParseOperation(const Token& op_token, const std::vector<Token>& result_names) {
  absl::StatusOr<const OpDef*> def = OpRegistry::Global().Lookup(op_token.text);
  if (!def.ok()) {
    return absl::Status(def.status().code(),
                        absl::StrCat("line ", op_token.line, ":", op_token.column, ": ", def.status().message()));
  }
  PDIST_RETURN_IF_ERROR(Expect("(", absl::StrCat("after op type '", op_token.text, "'")));
  std::vector<Value*> operands;
  std::vector<Token> operand_tokens;
  while (!tok_.Is(")")) {
    if (!operands.empty()) PDIST_RETURN_IF_ERROR(Expect(",", "or ')' after an operand"));
    operand_tokens.push_back(tok_);
    if (tok_.IsIdent("none")) {
      operands.push_back(nullptr);
      PDIST_RETURN_IF_ERROR(Advance());
    } else {
      PDIST_ASSIGN_OR_RETURN(Value* v, ParseUse());
      operands.push_back(v);
    }
  }
  PDIST_RETURN_IF_ERROR(Expect(")", "after operands"));
  AttributeMap attrs;
  if (tok_.Is("{")) {
    PDIST_ASSIGN_OR_RETURN(attrs, ParseAttrDict());
  }
  struct ResultType {
    TensorType type;
    ValueRole role;
    ValueSuffix suffix;
  };
  std::vector<ResultType> result_types;
  if (!result_names.empty()) {
    PDIST_RETURN_IF_ERROR(Expect(":", "and the result types after the op"));
    for (size_t i = 0; i < result_names.size(); ++i) {
      if (i > 0) PDIST_RETURN_IF_ERROR(Expect(",", "between result types"));
      PDIST_ASSIGN_OR_RETURN(ValueRole role, ParseResultRole());
      PDIST_ASSIGN_OR_RETURN(TensorType type, ParseType());
      PDIST_ASSIGN_OR_RETURN(ValueSuffix suffix, ParseValueSuffix(type));
      result_types.push_back({std::move(type), role, std::move(suffix)});
    }
  }

  // Semantic checks, reported at the op type so that the message points at the op.
  auto op_error = [&](const absl::Status& s) {
    return Error(op_token, absl::StrCat("op '", op_token.text, "': ", s.message()));
  };
  absl::Status count = CheckOperandCount(**def, operands.size());
  if (!count.ok()) return op_error(count);
  for (size_t i = 0; i < operands.size(); ++i) {
    const bool optional = i < (*def)->inputs.size() && (*def)->inputs[i].optional;
    if (operands[i] == nullptr && !optional) {
      return Error(operand_tokens[i], absl::StrCat("op '", op_token.text, "': operand ", i, " is not optional"));
    }
  }
  absl::StatusOr<AttributeMap> normalized = NormalizeAttributes(**def, attrs);
  if (!normalized.ok()) return op_error(normalized.status());
  absl::StatusOr<std::vector<TensorType>> inferred = InferResultTypes(**def, operands, *normalized);
  if (!inferred.ok()) return op_error(inferred.status());
  if (inferred->size() != result_types.size()) {
    return op_error(absl::InvalidArgumentError(
        absl::StrCat("the text names ", result_types.size(), " results, the op has ", inferred->size())));
  }
  const DataType x_dtype = !operands.empty() && operands[0] != nullptr ? operands[0]->type().dtype : DataType::kFloat32;
  std::vector<bool> legacy(inferred->size(), false);
  for (size_t i = 0; i < inferred->size(); ++i) {
    legacy[i] = IsLegacyResultType(op_token.text, i, result_types[i].type, (*inferred)[i], x_dtype);
    if ((*inferred)[i] != result_types[i].type && !legacy[i]) {
      return op_error(absl::InvalidArgumentError(absl::StrCat("result %", result_names[i].text, " is written as ",
                                                              result_types[i].type.ToString(), " but the op infers ",
                                                              (*inferred)[i].ToString())));
    }
  }
  auto op = std::make_unique<Operation>(op_token.text, std::move(operands), *std::move(normalized));
  if (tok_.Is("@")) PDIST_RETURN_IF_ERROR(ParseRoleAndChunk(*op));
  std::vector<Value*> results;
  for (size_t i = 0; i < result_types.size(); ++i) {
    ResultType& r = result_types[i];
    Value* v = program_.NewValue(std::move(r.type), r.role);
    r.suffix.ApplyTo(v);
    // At once, so that the ops after it (a norm's gradient) read today's type.
    if (legacy[i]) UpgradeLegacyResult(*v, (*inferred)[i]);
    op->add_result(v);
    results.push_back(v);
  }
  program_.block().Append(std::move(op));
  for (size_t i = 0; i < results.size(); ++i) PDIST_RETURN_IF_ERROR(Define(result_names[i], results[i]));
  return absl::OkStatus();
}

absl::Status Parser::ParseBinding() {
  const Token keyword = tok_;
  PDIST_RETURN_IF_ERROR(Advance());
  PDIST_ASSIGN_OR_RETURN(Value* first, ParseUse());
  if (keyword.text == "loss") {
    if (program_.loss() != nullptr) return Error(keyword, "the program's loss is given twice");
    program_.set_loss(first);
    return absl::OkStatus();
  }
  PDIST_RETURN_IF_ERROR(Expect("<-", absl::StrCat("in '", keyword.text, " %state <- %value'")));
  PDIST_ASSIGN_OR_RETURN(Value* second, ParseUse());
  if (keyword.text == "gradient") {
    program_.add_gradient(first, second);
  } else {
    program_.add_update(first, second);
  }
  return absl::OkStatus();
}

// output "logits" %9
absl::Status Parser::ParseOutput() {
  const Token keyword = tok_;
  PDIST_RETURN_IF_ERROR(Advance());
  if (tok_.kind != TokenKind::kString) return Unexpected("the output's name in quotes (output \"logits\" %9)");
  const Token name = tok_;
  PDIST_RETURN_IF_ERROR(Advance());
  PDIST_ASSIGN_OR_RETURN(Value* value, ParseUse());
  for (const ProgramOutput& o : program_.outputs()) {
    if (o.name == name.text) return Error(keyword, absl::StrCat("output \"", name.text, "\" is given twice"));
  }
  program_.add_output(name.text, value);
  return absl::OkStatus();
}

absl::StatusOr<Value*> Parser::ParseUse() {
  if (tok_.kind != TokenKind::kValueRef) return Unexpected("a value (%name)");
  auto it = defs_.find(tok_.text);
  if (it == defs_.end()) return Error(tok_, absl::StrCat("use of undefined value %", tok_.text));
  PDIST_RETURN_IF_ERROR(Advance());
  return it->second.value;
}

absl::Status Parser::Define(const Token& name, Value* value) {
  auto [it, inserted] = defs_.try_emplace(name.text, Definition{value, name.line, name.column});
  if (!inserted) {
    return Error(name, absl::StrCat("value %", name.text, " is defined twice (first at line ", it->second.line, ":",
                                    it->second.column, ")"));
  }
  return absl::OkStatus();
}

absl::StatusOr<ValueRole> Parser::ParseResultRole() {
  if (tok_.kind == TokenKind::kIdent) {
    if (const ValueRole* role = FindRole(tok_.text)) {
      PDIST_RETURN_IF_ERROR(Advance());
      return *role;
    }
  }
  return ValueRole::kActivation;
}

absl::StatusOr<TensorType> Parser::ParseType() {
  if (tok_.kind != TokenKind::kIdent) return Unexpected("a type such as f32[8,64]");
  const Token dtype_token = tok_;
  absl::StatusOr<DataType> dtype = ParseDataType(tok_.text);
  if (!dtype.ok()) return Error(tok_, dtype.status().message());
  PDIST_RETURN_IF_ERROR(Advance());
  PDIST_RETURN_IF_ERROR(Expect("[", "after the data type (a scalar is f32[])"));
  TensorType type{{}, *dtype};
  while (!tok_.Is("]")) {
    if (!type.shape.empty()) PDIST_RETURN_IF_ERROR(Expect(",", "or ']' in the shape"));
    if (tok_.kind != TokenKind::kInt) return Unexpected("a dimension (a non-negative integer)");
    PDIST_ASSIGN_OR_RETURN(int64_t dim, ParseInt(tok_));
    if (dim < 0) return Error(tok_, absl::StrCat("dimension ", dim, " is negative (shapes are static)"));
    type.shape.push_back(dim);
    PDIST_RETURN_IF_ERROR(Advance());
  }
  PDIST_RETURN_IF_ERROR(Advance());
  absl::Status valid = CheckTensorType(type);
  if (!valid.ok()) return Error(dtype_token, valid.message());
  return type;
}

// Every suffix starts with its own keyword (PrintValueType writes them), so text without one
// stays valid and a future suffix cannot be mistaken for this one.
absl::StatusOr<Parser::ValueSuffix> Parser::ParseValueSuffix(const TensorType& type) {
  ValueSuffix suffix;
  if (!tok_.IsIdent("dist")) return suffix;
  const Token at = tok_;
  PDIST_RETURN_IF_ERROR(Advance());
  if (tok_.Is("!")) {
    suffix.annotated = true;
    PDIST_RETURN_IF_ERROR(Advance());
  }
  PDIST_ASSIGN_OR_RETURN(suffix.dist, ParseDistAttr());
  // Checked here too (the verifier checks it again) so that the message points at the text.
  absl::Status valid = suffix.dist->Verify(type.shape);
  if (!valid.ok()) return Error(at, absl::StrCat("value of type ", type.ToString(), ": ", valid.message()));
  return suffix;
}

absl::Status Parser::ExpectKey(const char* key) {
  if (!tok_.IsIdent(key)) return Unexpected(absl::StrCat("'", key, "' in the dist attr"));
  PDIST_RETURN_IF_ERROR(Advance());
  return Expect(":", absl::StrCat("after '", key, "'"));
}

// {mesh: [2,2] [x,y] ids [4,5,6,7], dims_mapping: [0,-1], partial: {1: sum}}
absl::StatusOr<DistAttr> Parser::ParseDistAttr() {
  PDIST_RETURN_IF_ERROR(Expect("{", "to open the dist attr"));
  DistAttr attr;
  PDIST_RETURN_IF_ERROR(ExpectKey("mesh"));
  PDIST_ASSIGN_OR_RETURN(attr.mesh, ParseMesh());
  PDIST_RETURN_IF_ERROR(Expect(",", "after the mesh"));
  PDIST_RETURN_IF_ERROR(ExpectKey("dims_mapping"));
  PDIST_ASSIGN_OR_RETURN(attr.dims_mapping, ParseIntList("dims_mapping"));
  if (tok_.Is(",")) {
    PDIST_RETURN_IF_ERROR(Advance());
    PDIST_RETURN_IF_ERROR(ExpectKey("partial"));
    PDIST_ASSIGN_OR_RETURN(attr.partial, ParsePartialDims());
  }
  PDIST_RETURN_IF_ERROR(Expect("}", "to close the dist attr"));
  return attr;
}

// [2,2] [x,y] — then ` ids [...]` when the ids are not 0..n-1.
absl::StatusOr<ProcessMesh> Parser::ParseMesh() {
  const Token at = tok_;
  PDIST_ASSIGN_OR_RETURN(std::vector<int64_t> shape, ParseIntList("the mesh shape"));
  PDIST_RETURN_IF_ERROR(Expect("[", "to open the mesh dim names"));
  std::vector<std::string> names;
  while (!tok_.Is("]")) {
    if (!names.empty()) PDIST_RETURN_IF_ERROR(Expect(",", "or ']' in the mesh dim names"));
    if (tok_.kind != TokenKind::kIdent) return Unexpected("a mesh dim name");
    names.push_back(tok_.text);
    PDIST_RETURN_IF_ERROR(Advance());
  }
  PDIST_RETURN_IF_ERROR(Advance());
  std::vector<int64_t> ids;  // empty: 0..n-1
  if (tok_.IsIdent("ids")) {
    PDIST_RETURN_IF_ERROR(Advance());
    PDIST_ASSIGN_OR_RETURN(ids, ParseIntList("the process ids"));
  }
  absl::StatusOr<ProcessMesh> mesh = ProcessMesh::Create(std::move(shape), std::move(ids), std::move(names));
  if (!mesh.ok()) return Error(at, mesh.status().message());
  return mesh;
}

// {1: sum, 2: max}
absl::StatusOr<PartialDims> Parser::ParsePartialDims() {
  PDIST_RETURN_IF_ERROR(Expect("{", "to open the partial dims"));
  PartialDims partial;
  while (!tok_.Is("}")) {
    if (!partial.empty()) PDIST_RETURN_IF_ERROR(Expect(",", "or '}' in the partial dims"));
    if (tok_.kind != TokenKind::kInt) return Unexpected("a mesh dim (an integer)");
    const Token dim_token = tok_;
    PDIST_ASSIGN_OR_RETURN(int64_t dim, ParseInt(tok_));
    PDIST_RETURN_IF_ERROR(Advance());
    PDIST_RETURN_IF_ERROR(Expect(":", "after the partial mesh dim"));
    if (tok_.kind != TokenKind::kIdent) return Unexpected("a reduce type (sum, avg or max)");
    absl::StatusOr<ReduceType> reduce = ParseReduceType(tok_.text);
    if (!reduce.ok()) return Error(tok_, reduce.status().message());
    if (!partial.emplace(dim, *reduce).second) return Error(dim_token, absl::StrCat("partial mesh dim ", dim, " is given twice"));
    PDIST_RETURN_IF_ERROR(Advance());
  }
  PDIST_RETURN_IF_ERROR(Advance());
  return partial;
}

// [] or [1,-1,2]
absl::StatusOr<std::vector<int64_t>> Parser::ParseIntList(absl::string_view what) {
  PDIST_RETURN_IF_ERROR(Expect("[", absl::StrCat("to open ", what)));
  std::vector<int64_t> values;
  while (!tok_.Is("]")) {
    if (!values.empty()) PDIST_RETURN_IF_ERROR(Expect(",", absl::StrCat("or ']' in ", what)));
    if (tok_.kind != TokenKind::kInt) return Unexpected(absl::StrCat("an integer in ", what));
    PDIST_ASSIGN_OR_RETURN(int64_t value, ParseInt(tok_));
    values.push_back(value);
    PDIST_RETURN_IF_ERROR(Advance());
  }
  PDIST_RETURN_IF_ERROR(Advance());
  return values;
}

absl::StatusOr<AttributeMap> Parser::ParseAttrDict() {
  PDIST_RETURN_IF_ERROR(Expect("{", "to open the attributes"));
  AttributeMap attrs;
  while (!tok_.Is("}")) {
    if (!attrs.empty()) PDIST_RETURN_IF_ERROR(Expect(",", "or '}' after an attribute"));
    if (tok_.kind != TokenKind::kIdent) return Unexpected("an attribute name");
    const Token name = tok_;
    PDIST_RETURN_IF_ERROR(Advance());
    PDIST_RETURN_IF_ERROR(Expect("=", absl::StrCat("after attribute name '", name.text, "'")));
    PDIST_ASSIGN_OR_RETURN(Attribute value, ParseAttrValue());
    if (!attrs.emplace(name.text, std::move(value)).second) {
      return Error(name, absl::StrCat("attribute '", name.text, "' is given twice"));
    }
  }
  PDIST_RETURN_IF_ERROR(Advance());
  return attrs;
}

absl::StatusOr<Attribute> Parser::ParseAttrValue() {
  if (tok_.Is("[")) return ParseList();
  if (tok_.kind == TokenKind::kIdent) {
    // Typed empty lists: int[], double[], bool[], string[] (so that they keep their kind).
    static const std::pair<const char*, Attribute> kEmptyLists[] = {
        {"int", std::vector<int64_t>{}}, {"double", std::vector<double>{}},
        {"bool", std::vector<bool>{}},   {"string", std::vector<std::string>{}}};
    for (const auto& [word, empty] : kEmptyLists) {
      if (tok_.text != word) continue;
      const Token word_token = tok_;
      PDIST_RETURN_IF_ERROR(Advance());
      if (!tok_.Is("[")) {
        if (std::string_view(word) == "bool") return DataType::kBool;  // the dtype `bool`
        return Error(word_token, absl::StrCat("expected '[]' after '", word, "' (an empty ", word, " list)"));
      }
      PDIST_RETURN_IF_ERROR(Advance());
      PDIST_RETURN_IF_ERROR(Expect("]", "of an empty typed list"));
      return empty;
    }
  }
  return ParseScalar();
}

absl::StatusOr<Attribute> Parser::ParseScalar() {
  const Token t = tok_;
  PDIST_RETURN_IF_ERROR(Advance());
  switch (t.kind) {
    case TokenKind::kInt: return ParseInt(t);
    case TokenKind::kFloat: return ParseDouble(t);
    case TokenKind::kString: return t.text;
    case TokenKind::kPunct:
      if (t.text == "-" && tok_.IsIdent("inf")) {
        PDIST_RETURN_IF_ERROR(Advance());
        return -std::numeric_limits<double>::infinity();
      }
      break;
    case TokenKind::kIdent: {
      if (t.text == "true" || t.text == "false") return t.text == "true";
      if (t.text == "inf") return std::numeric_limits<double>::infinity();
      if (t.text == "nan") return std::numeric_limits<double>::quiet_NaN();
      absl::StatusOr<DataType> dtype = ParseDataType(t.text);
      if (dtype.ok()) return *dtype;
      break;
    }
    default: break;
  }
  return Error(t, absl::StrCat("expected an attribute value (number, string, true/false, dtype or list), got ",
                               t.Describe()));
}

absl::StatusOr<Attribute> Parser::ParseList() {
  const Token open = tok_;
  PDIST_RETURN_IF_ERROR(Advance());
  if (tok_.Is("]")) return Error(open, "an empty list needs its kind: int[], double[], bool[] or string[]");
  std::vector<Attribute> items;
  while (!tok_.Is("]")) {
    if (!items.empty()) PDIST_RETURN_IF_ERROR(Expect(",", "or ']' in the list"));
    PDIST_ASSIGN_OR_RETURN(Attribute item, ParseScalar());
    items.push_back(std::move(item));
  }
  PDIST_RETURN_IF_ERROR(Advance());
  // One kind per list; integers among doubles are widened ([1, 2.5]).
  AttrKind kind = KindOf(items[0]);
  for (const Attribute& item : items) {
    const AttrKind k = KindOf(item);
    if (k == kind) continue;
    if ((k == AttrKind::kDouble && kind == AttrKind::kInt) || (k == AttrKind::kInt && kind == AttrKind::kDouble)) {
      kind = AttrKind::kDouble;
      continue;
    }
    return Error(open, absl::StrCat("list mixes ", AttrKindName(kind), " and ", AttrKindName(k), " elements"));
  }
  auto collect = [&items]<typename T>(T*) {
    std::vector<T> out;
    for (const Attribute& item : items) {
      if constexpr (std::is_same_v<T, double>) {
        out.push_back(std::holds_alternative<double>(item) ? std::get<double>(item)
                                                           : static_cast<double>(std::get<int64_t>(item)));
      } else {
        out.push_back(std::get<T>(item));
      }
    }
    return Attribute(std::move(out));
  };
  switch (kind) {
    case AttrKind::kBool: return collect(static_cast<bool*>(nullptr));
    case AttrKind::kInt: return collect(static_cast<int64_t*>(nullptr));
    case AttrKind::kDouble: return collect(static_cast<double*>(nullptr));
    case AttrKind::kString: return collect(static_cast<std::string*>(nullptr));
    default: return Error(open, absl::StrCat("lists of ", AttrKindName(kind), " are not supported"));
  }
}

absl::StatusOr<int64_t> Parser::ParseInt(const Token& t) const {
  int64_t value = 0;
  const char* end = t.text.data() + t.text.size();
  auto [ptr, ec] = std::from_chars(t.text.data(), end, value);
  if (ec != std::errc() || ptr != end) return Error(t, absl::StrCat("integer ", t.text, " is out of range"));
  return value;
}

absl::StatusOr<double> Parser::ParseDouble(const Token& t) const {
  // strtod rather than from_chars: it accepts subnormals (which the printer can write) and only
  // overflow to infinity is an error.
  errno = 0;
  char* end = nullptr;
  const double value = std::strtod(t.text.c_str(), &end);
  if (end != t.text.c_str() + t.text.size() || (errno == ERANGE && std::isinf(value))) {
    return Error(t, absl::StrCat("number ", t.text, " is out of range for a double"));
  }
  return value;
}

}  // namespace

absl::StatusOr<Program> ParseProgram(std::string_view text) { return Parser(text).Parse(); }

absl::StatusOr<Attribute> ParseAttribute(std::string_view text) { return Parser(text).ParseOneAttribute(); }

absl::StatusOr<DistAttr> ParseDistAttr(std::string_view text) { return Parser(text).ParseOneDistAttr(); }

}  // namespace pdist::ir

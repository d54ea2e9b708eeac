// pdist-spmd's request parsing, rule evaluation and response writing.
#include "tools/spmd_json.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "ir/dist/dist_attr.h"
#include "ir/json_reader.h"
#include "ir/status.h"

namespace pdist::tools {
namespace {

using Json = nlohmann::json;
using ir::TensorDistSpec;

absl::Status Bad(const std::string& path, const std::string& message) {
  return absl::InvalidArgumentError(absl::StrCat(path, ": ", message));
}

absl::StatusOr<std::vector<int64_t>> Ints(const Json& j, const std::string& path) {
  if (!j.is_array()) return Bad(path, absl::StrCat("expected a list of integers, got ", j.dump()));
  std::vector<int64_t> out;
  for (const Json& item : j) {
    if (!item.is_number_integer()) return Bad(path, absl::StrCat("expected integers, got ", item.dump()));
    out.push_back(item.get<int64_t>());
  }
  return out;
}

// [0, {"dim": 1, "type": "avg"}]: an integer is a sum over that mesh dim.
absl::StatusOr<ir::PartialDims> Partial(const Json& j, const std::string& path) {
  if (!j.is_array()) return Bad(path, absl::StrCat("expected a list of mesh dims, got ", j.dump()));
  ir::PartialDims out;
  for (const Json& item : j) {
    if (item.is_number_integer()) {
      out[item.get<int64_t>()] = ir::ReduceType::kSum;
      continue;
    }
    if (!item.is_object() || !item.contains("dim") || !item["dim"].is_number_integer()) {
      return Bad(path, absl::StrCat("expected a mesh dim or {\"dim\": D, \"type\": \"sum|avg|max\"}, got ", item.dump()));
    }
    ir::ReduceType type = ir::ReduceType::kSum;
    if (item.contains("type")) {
      if (!item["type"].is_string()) return Bad(path, absl::StrCat("\"type\" must be a string, got ", item["type"].dump()));
      absl::StatusOr<ir::ReduceType> parsed = ir::ParseReduceType(item["type"].get<std::string>());
      if (!parsed.ok()) return Bad(path, std::string(parsed.status().message()));
      type = *parsed;
    }
    out[item["dim"].get<int64_t>()] = type;
  }
  return out;
}

// One tensor: null (an absent optional input) or {"shape", "dims_mapping", "partial_dims"}.
absl::StatusOr<TensorDistSpec> Spec(const Json& j, const std::string& path) {
  if (j.is_null()) return TensorDistSpec{{0}, {}, {}};
  if (!j.is_object()) return Bad(path, absl::StrCat("expected an object or null, got ", j.dump()));
  for (const auto& [key, value] : j.items()) {
    if (key != "shape" && key != "dims_mapping" && key != "partial_dims") {
      return Bad(path, absl::StrCat("unknown key '", key, "' (expected shape, dims_mapping, partial_dims)"));
    }
  }
  if (!j.contains("shape")) return Bad(path, "missing \"shape\"");
  if (!j.contains("dims_mapping")) return Bad(path, "missing \"dims_mapping\"");
  TensorDistSpec spec;
  PDIST_ASSIGN_OR_RETURN(spec.shape, Ints(j["shape"], path + ".shape"));
  for (int64_t d : spec.shape) {
    if (d < 0) return Bad(path + ".shape", absl::StrCat("dims must be >= 0, got ", j["shape"].dump()));
  }
  PDIST_ASSIGN_OR_RETURN(spec.dims_mapping, Ints(j["dims_mapping"], path + ".dims_mapping"));
  if (j.contains("partial_dims")) {
    PDIST_ASSIGN_OR_RETURN(spec.partial, Partial(j["partial_dims"], path + ".partial_dims"));
  }
  return spec;
}

// A list of entries, each a tensor or (a variadic slot) a list of tensors; flattened into
// `specs`, with the grouping kept in `groups` (-1 for a single tensor).
absl::Status Specs(const Json& j, const std::string& path, std::vector<TensorDistSpec>& specs,
                   std::vector<int>* groups) {
  if (!j.is_array()) return Bad(path, absl::StrCat("expected a list, got ", j.dump()));
  for (size_t i = 0; i < j.size(); ++i) {
    const std::string at = absl::StrCat(path, "[", i, "]");
    if (!j[i].is_array()) {
      PDIST_ASSIGN_OR_RETURN(TensorDistSpec spec, Spec(j[i], at));
      specs.push_back(std::move(spec));
      if (groups) groups->push_back(-1);
      continue;
    }
    for (size_t k = 0; k < j[i].size(); ++k) {
      PDIST_ASSIGN_OR_RETURN(TensorDistSpec spec, Spec(j[i][k], absl::StrCat(at, "[", k, "]")));
      specs.push_back(std::move(spec));
    }
    if (groups) groups->push_back(static_cast<int>(j[i].size()));
  }
  return absl::OkStatus();
}

// A JSON value as an attribute of the kind the op declares (JSON's own kind for an unknown name,
// which NormalizeAttributes then rejects by name).
absl::StatusOr<ir::Attribute> Attr(const Json& j, const ir::AttrSpec* spec, const std::string& path) {
  const bool has_kind = spec != nullptr;
  const ir::AttrKind kind = has_kind ? ir::KindOf(spec->default_value) : ir::AttrKind::kInt;
  if (j.is_boolean()) return ir::Attribute(j.get<bool>());
  if (j.is_number_integer()) return ir::Attribute(j.get<int64_t>());
  if (j.is_number()) return ir::Attribute(j.get<double>());
  if (j.is_string()) {
    if (has_kind && kind == ir::AttrKind::kDataType) {
      absl::StatusOr<ir::DataType> dtype = ir::ParseDataType(j.get<std::string>());
      if (!dtype.ok()) return Bad(path, std::string(dtype.status().message()));
      return ir::Attribute(*dtype);
    }
    return ir::Attribute(j.get<std::string>());
  }
  if (!j.is_array()) return Bad(path, absl::StrCat("unsupported attribute value ", j.dump()));
  if (j.empty()) return has_kind ? spec->default_value : ir::Attribute(std::vector<int64_t>{});
  auto all = [&j](auto pred) { return std::all_of(j.begin(), j.end(), pred); };
  if (all([](const Json& e) { return e.is_boolean(); })) return ir::Attribute(j.get<std::vector<bool>>());
  if (all([](const Json& e) { return e.is_number_integer(); })) return ir::Attribute(j.get<std::vector<int64_t>>());
  if (all([](const Json& e) { return e.is_number(); })) return ir::Attribute(j.get<std::vector<double>>());
  if (all([](const Json& e) { return e.is_string(); })) return ir::Attribute(j.get<std::vector<std::string>>());
  return Bad(path, absl::StrCat("a list must hold one kind of value, got ", j.dump()));
}

// "x", "y", "x[2]" (variadic): the op's name for operand or result i.
template <typename SlotSpec>
std::string SlotName(const std::vector<SlotSpec>& slots, size_t i) {
  if (slots.empty()) return "?";
  if (i < slots.size() && !slots[i].variadic) return slots[i].name;
  const size_t last = slots.size() - 1;
  return absl::StrCat(slots[last].name, "[", i - last, "]");
}

// Each spec fits the mesh; errors name the entry and the op's name for it.
template <typename SlotSpec>
absl::Status CheckSpecs(const std::vector<TensorDistSpec>& specs, const std::vector<SlotSpec>& slots,
                        const ir::ProcessMesh& mesh, const char* side) {
  for (size_t i = 0; i < specs.size(); ++i) {
    if (specs[i].absent()) continue;
    absl::Status valid = ir::DistAttr{mesh, specs[i].dims_mapping, specs[i].partial}.Verify(specs[i].shape);
    if (!valid.ok()) {
      return Bad(absl::StrCat(side, "[", i, "] (", SlotName(slots, i), ", shape ", ir::ShapeToString(specs[i].shape), ")"),
                 std::string(valid.message()));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckOutputCount(const ir::OpDef& def, size_t count) {
  const bool variadic = !def.outputs.empty() && def.outputs.back().variadic;
  const size_t fixed = def.outputs.size() - (variadic ? 1 : 0);
  if (variadic ? count >= fixed : count == def.outputs.size()) return absl::OkStatus();
  std::vector<std::string> names;
  for (const ir::ResultSpec& r : def.outputs) names.push_back(r.variadic ? r.name + "..." : r.name);
  return absl::InvalidArgumentError(absl::StrCat("op '", def.name, "' has outputs (", absl::StrJoin(names, ", "),
                                                 "), got ", count, " output entries"));
}

Json SpecJson(const TensorDistSpec& spec) {
  Json partial = Json::array();
  for (const auto& [dim, type] : spec.partial) {
    if (type == ir::ReduceType::kSum) {
      partial.push_back(dim);
    } else {
      partial.push_back({{"dim", dim}, {"type", ir::ReduceTypeName(type)}});
    }
  }
  return {{"dims_mapping", spec.absent() ? Json::array() : Json(spec.dims_mapping)}, {"partial_dims", partial}};
}

// Inputs in the grouping the request used.
Json InputsJson(const std::vector<TensorDistSpec>& specs, const std::vector<int>& groups) {
  Json out = Json::array();
  size_t next = 0;
  for (int group : groups) {
    if (group < 0) {
      out.push_back(SpecJson(specs.at(next++)));
      continue;
    }
    Json list = Json::array();
    for (int k = 0; k < group; ++k) list.push_back(SpecJson(specs.at(next++)));
    out.push_back(list);
  }
  return out;
}

// Outputs per result slot of the op; the variadic slot (split's out) is a list.
Json OutputsJson(const std::vector<TensorDistSpec>& specs, const ir::OpDef& def) {
  Json out = Json::array();
  for (size_t i = 0; i < specs.size(); ++i) {
    const bool variadic = i + 1 >= def.outputs.size() && !def.outputs.empty() && def.outputs.back().variadic;
    if (!variadic) {
      out.push_back(SpecJson(specs[i]));
      continue;
    }
    Json list = Json::array();
    for (; i < specs.size(); ++i) list.push_back(SpecJson(specs[i]));
    out.push_back(list);
  }
  return out;
}

// The shapes as the op takes them: its shape inference must accept the inputs and, for a
// reverse request, give the outputs' shapes (a matmul of [64,32] by [31,48], or a relu whose
// output had another shape than its input, got a sharding). A request carries no dtypes: any
// assignment of f32, i64 and bool that the op accepts will do (ids, labels, conditions).
absl::Status CheckShapes(const SpmdRequest& r) {
  static constexpr ir::DataType kDtypes[] = {ir::DataType::kFloat32, ir::DataType::kInt64, ir::DataType::kBool};
  const size_t n = r.inputs.size();
  // 3^n assignments up to 6 inputs (729); past that, one dtype for all.
  int64_t assignments = 1;
  for (size_t i = 0; i < n && n <= 6; ++i) assignments *= 3;
  if (n > 6) assignments = 3;
  absl::Status first;
  for (int64_t a = 0; a < assignments; ++a) {
    std::vector<ir::TensorType> types(n);
    ir::InputTypes in;
    int64_t code = a;
    for (size_t i = 0; i < n; ++i) {
      types[i] = {r.inputs[i].shape, kDtypes[n > 6 ? a : code % 3]};
      if (n <= 6) code /= 3;
      in.push_back(r.inputs[i].absent() ? nullptr : &types[i]);
    }
    absl::StatusOr<std::vector<ir::TensorType>> out = r.def->infer_meta(in, r.attrs);
    if (!out.ok()) {
      if (first.ok()) first = out.status();
      continue;
    }
    if (r.direction != passes::SpmdDirection::kReverse) return absl::OkStatus();
    for (size_t k = 0; k < r.outputs.size() && k < out->size(); ++k) {
      if (r.outputs[k].shape != (*out)[k].shape) {
        return Bad(absl::StrCat("outputs[", k, "]"),
                   absl::StrCat("shape ", ir::ShapeToString(r.outputs[k].shape), ", but ", r.def->name, " of these inputs makes ",
                                ir::ShapeToString((*out)[k].shape)));
      }
    }
    return absl::OkStatus();
  }
  return Bad("inputs", absl::StrCat("the shapes are not ones ", r.def->name, " takes: ", first.message()));
}

absl::StatusOr<Json> Evaluate(const Json& request) {
  PDIST_ASSIGN_OR_RETURN(SpmdRequest r, ParseSpmdRequest(request));
  PDIST_RETURN_IF_ERROR(CheckShapes(r));
  passes::SpmdCall call;
  call.def = r.def;
  call.attrs = &r.attrs;
  call.mesh_shape = r.mesh_shape;
  call.direction = r.direction;
  call.inputs = r.inputs;
  call.outputs = r.outputs;
  PDIST_ASSIGN_OR_RETURN(ir::SpmdResult result, passes::RunSpmdRule(call));
  Json response = {{"inputs", InputsJson(result.inputs, r.input_groups)}, {"outputs", OutputsJson(result.outputs, *r.def)}};
  if (r.describe && r.def->describe_spmd) {
    std::vector<ir::TensorType> types;
    for (const TensorDistSpec& s : r.inputs) types.push_back({s.shape, ir::DataType::kFloat32});
    std::vector<const ir::TensorType*> pointers;
    for (size_t i = 0; i < types.size(); ++i) pointers.push_back(r.inputs[i].absent() ? nullptr : &types[i]);
    response["rule"] = r.def->describe_spmd(pointers, r.attrs);
  }
  return response;
}

}  // namespace

absl::StatusOr<SpmdRequest> ParseSpmdRequest(const Json& j) {
  if (!j.is_object()) return Bad("request", absl::StrCat("expected an object, got ", j.dump()));
  static const char* kKeys[] = {"op", "attrs", "mesh_shape", "direction", "inputs", "outputs", "describe"};
  for (const auto& [key, value] : j.items()) {
    if (std::find(std::begin(kKeys), std::end(kKeys), key) == std::end(kKeys)) {
      return Bad("request", absl::StrCat("unknown key '", key, "' (expected ", absl::StrJoin(kKeys, ", "), ")"));
    }
  }
  SpmdRequest r;
  if (!j.contains("op") || !j["op"].is_string()) return Bad("request", "missing \"op\" (a string)");
  PDIST_ASSIGN_OR_RETURN(r.def, ir::OpRegistry::Global().Lookup(j["op"].get<std::string>()));
  const ir::OpDef& def = *r.def;

  ir::AttributeMap attrs;
  if (j.contains("attrs")) {
    if (!j["attrs"].is_object()) return Bad("attrs", absl::StrCat("expected an object, got ", j["attrs"].dump()));
    for (const auto& [name, value] : j["attrs"].items()) {
      PDIST_ASSIGN_OR_RETURN(attrs[name], Attr(value, def.FindAttr(name), "attrs." + name));
    }
  }
  PDIST_ASSIGN_OR_RETURN(r.attrs, ir::NormalizeAttributes(def, attrs));

  if (!j.contains("mesh_shape")) return Bad("request", "missing \"mesh_shape\"");
  PDIST_ASSIGN_OR_RETURN(r.mesh_shape, Ints(j["mesh_shape"], "mesh_shape"));
  PDIST_RETURN_IF_ERROR(WithContext(ir::ValidateSpecs({}, r.mesh_shape, "input"), "mesh_shape"));
  const ir::ProcessMesh mesh = ir::ProcessMesh::Range(r.mesh_shape);

  const std::string direction = j.value("direction", std::string("forward"));
  if (direction == "reverse") {
    r.direction = passes::SpmdDirection::kReverse;
  } else if (direction != "forward") {
    return Bad("direction", absl::StrCat("'", direction, "' is not forward or reverse"));
  }
  if (j.contains("describe")) {
    if (!j["describe"].is_boolean()) return Bad("describe", "expected true or false");
    r.describe = j["describe"].get<bool>();
  }

  if (!j.contains("inputs")) return Bad("request", "missing \"inputs\"");
  PDIST_RETURN_IF_ERROR(Specs(j["inputs"], "inputs", r.inputs, &r.input_groups));
  PDIST_RETURN_IF_ERROR(ir::CheckOperandCount(def, r.inputs.size()));
  PDIST_RETURN_IF_ERROR(CheckSpecs(r.inputs, def.inputs, mesh, "inputs"));
  if (r.direction == passes::SpmdDirection::kReverse) {
    if (!j.contains("outputs")) return Bad("request", "a reverse request needs \"outputs\"");
    PDIST_RETURN_IF_ERROR(Specs(j["outputs"], "outputs", r.outputs, nullptr));
    PDIST_RETURN_IF_ERROR(CheckOutputCount(def, r.outputs.size()));
    PDIST_RETURN_IF_ERROR(CheckSpecs(r.outputs, def.outputs, mesh, "outputs"));
  } else if (j.contains("outputs")) {
    return Bad("outputs", "only a reverse request takes outputs");
  }
  return r;
}

Json EvaluateSpmdRequest(const Json& request) {
  try {
    absl::StatusOr<Json> response = Evaluate(request);
    if (!response.ok()) return {{"error", std::string(response.status().message())}};
    return *response;
  } catch (const Json::exception& e) {  // a JSON type mismatch the checks above did not foresee
    return {{"error", absl::StrCat("bad request: ", e.what())}};
  }
}

absl::StatusOr<Json> EvaluateSpmdText(const std::string& text) {
  PDIST_ASSIGN_OR_RETURN(Json input, ir::ParseJson(text, "the input"));
  if (!input.is_array()) return EvaluateSpmdRequest(input);
  Json responses = Json::array();
  for (const Json& request : input) responses.push_back(EvaluateSpmdRequest(request));
  return responses;
}

}  // namespace pdist::tools

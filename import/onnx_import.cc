// The graph walk: opset check, a scan for operators pdist does not import (all reported at
// once), initializers and inputs, the nodes in order, the outputs, and the optional loss.
#include "import/onnx_import.h"

#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "import/onnx_context.h"
#include "ir/glob.h"
#include "ir/input_file.h"
#include "ir/status.h"
#include "ir/verifier.h"

namespace pdist::onnx_import {

namespace {

// The oldest default-domain opset whose operator definitions the converters implement
// (Squeeze/Unsqueeze/Split/ReduceSum take their axes as inputs from 13 on).
constexpr int64_t kMinOpset = 13;
// The newest whose definitions were checked against the converters (ONNX 1.18's opset 23): an
// operator a later opset redefines would be imported with the old meaning.
constexpr int64_t kMaxOpset = 23;

absl::StatusOr<int64_t> DefaultOpset(const onnx::ModelProto& model) {
  for (const onnx::OperatorSetIdProto& set : model.opset_import()) {
    if (set.domain().empty() || set.domain() == "ai.onnx") {
      if (set.version() < kMinOpset) {
        return absl::UnimplementedError(absl::StrCat(
            "the model uses opset ", set.version(), "; pdist imports opset ", kMinOpset,
            " and newer (re-export with torch.onnx.export(..., opset_version=17) or convert with "
            "onnx.version_converter.convert_version(model, 17))"));
      }
      if (set.version() > kMaxOpset) {
        return absl::UnimplementedError(absl::StrCat(
            "the model uses opset ", set.version(), "; pdist knows operator definitions up to opset ", kMaxOpset,
            " (re-export with torch.onnx.export(..., opset_version=17) or convert with "
            "onnx.version_converter.convert_version(model, 17))"));
      }
      return set.version();
    }
  }
  return absl::InvalidArgumentError("the model imports no default-domain opset (opset_import has no \"\" domain)");
}

// Every op type without a converter, with its count and first node: one error for the model.
absl::Status CheckEveryOpIsSupported(const onnx::GraphProto& graph) {
  struct Missing {
    int64_t count = 0;
    std::string first;
  };
  std::map<std::string, Missing> missing;
  for (const onnx::NodeProto& node : graph.node()) {
    const bool default_domain = node.domain().empty() || node.domain() == "ai.onnx";
    if (default_domain && Converters().contains(node.op_type())) continue;
    const std::string key = default_domain ? node.op_type() : absl::StrCat(node.domain(), "::", node.op_type());
    Missing& m = missing[key];
    // An unnamed node (PyTorch names its nodes; other exporters may not) by its first output.
    if (m.count++ == 0) {
      m.first = !node.name().empty() ? absl::StrCat("'", node.name(), "'")
                : node.output_size() > 0 ? absl::StrCat("unnamed, output '", node.output(0), "'")
                                         : std::string("unnamed");
    }
  }
  if (missing.empty()) return absl::OkStatus();
  std::vector<std::string> lines;
  for (const auto& [type, m] : missing) {
    lines.push_back(absl::StrCat(type, " (", m.count, m.count == 1 ? " node" : " nodes", ", first ", m.first, ")"));
  }
  std::vector<std::string> supported;
  for (const auto& [type, _] : Converters()) supported.push_back(type);
  std::sort(supported.begin(), supported.end());
  return absl::UnimplementedError(absl::StrCat("pdist does not import ", missing.size(), " operator type",
                                               missing.size() == 1 ? "" : "s", " of this model: ",
                                               absl::StrJoin(lines, ", "), ". It imports: ", absl::StrJoin(supported, " ")));
}

// Every --frozen pattern names some initializer (or an Identity copy of one): a typo must not
// leave the weights it meant trainable without a word.
absl::Status CheckFrozenPatternsMatch(const onnx::GraphProto& graph, const std::vector<std::string>& patterns) {
  std::vector<std::string> names;
  for (const onnx::TensorProto& init : graph.initializer()) names.push_back(init.name());
  for (const onnx::NodeProto& node : graph.node()) {
    if (node.op_type() == "Identity" && node.output_size() == 1) names.push_back(node.output(0));
  }
  for (const std::string& pattern : patterns) {
    if (std::none_of(names.begin(), names.end(), [&](const std::string& n) { return ir::GlobMatch(pattern, n); })) {
      names.resize(std::min<size_t>(names.size(), 8));
      return absl::InvalidArgumentError(absl::StrCat("--frozen '", pattern, "' matches no initializer (initializers: ",
                                                     absl::StrJoin(names, ", "), graph.initializer_size() > 8 ? ", ..." : "",
                                                     ")"));
    }
  }
  return absl::OkStatus();
}

// A graph input's static type: its ONNX shape, or the one the options give.
absl::StatusOr<ir::TensorType> InputType(const onnx::ValueInfoProto& input, const OnnxImportOptions& options) {
  if (!input.type().has_tensor_type()) {
    return absl::UnimplementedError(absl::StrCat("graph input '", input.name(), "' is not a tensor"));
  }
  const onnx::TypeProto::Tensor& t = input.type().tensor_type();
  PDIST_ASSIGN_OR_RETURN(ir::DataType dtype, DataTypeOfOnnx(t.elem_type()));
  if (auto given = options.input_shapes.find(input.name()); given != options.input_shapes.end()) {
    // Only the graph's symbolic dims are the user's to give: a shape of another rank, or another
    // value for a fixed dim, imported and failed later (pdist-train: "must be [batch, seq], got i64[8]").
    if (t.has_shape()) {
      std::vector<std::string> dims;
      for (const onnx::TensorShapeProto::Dimension& dim : t.shape().dim()) {
        dims.push_back(dim.has_dim_value() ? absl::StrCat(dim.dim_value()) : dim.has_dim_param() ? dim.dim_param() : "?");
      }
      const std::string graph = absl::StrCat("[", absl::StrJoin(dims, ", "), "]");
      if (static_cast<int>(given->second.size()) != t.shape().dim_size()) {
        return absl::InvalidArgumentError(absl::StrCat("--input-shape ", input.name(), ": ", given->second.size(),
                                                       " dims given, but the graph's input is ", graph, " (",
                                                       t.shape().dim_size(), " dims)"));
      }
      for (int d = 0; d < t.shape().dim_size(); ++d) {
        const onnx::TensorShapeProto::Dimension& dim = t.shape().dim(d);
        if (dim.has_dim_value() && dim.dim_value() != given->second[static_cast<size_t>(d)]) {
          return absl::InvalidArgumentError(absl::StrCat(
              "--input-shape ", input.name(), ": dim ", d, " is ", given->second[static_cast<size_t>(d)],
              ", but the graph fixes it at ", dim.dim_value(), " (", graph, "); only its symbolic dims can be given "
              "(export with dynamic axes to change it)"));
        }
      }
    }
    ir::TensorType type{ir::Shape(given->second.begin(), given->second.end()), dtype};
    if (absl::Status s = ir::CheckTensorType(type); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("the shape given for input '", input.name(), "': ", s.message()));
    }
    return type;
  }
  // No shape at all is an unknown rank (ONNX's scalar is a shape of no dims): read as a scalar,
  // it failed in the first op that needed a dim.
  if (!t.has_shape()) {
    return absl::InvalidArgumentError(absl::StrCat("graph input '", input.name(),
                                                   "' has no shape (not even its rank); pdist programs have static "
                                                   "shapes: give it (pdist-import --input-shape ",
                                                   input.name(), "=8,128)"));
  }
  ir::Shape shape;
  for (int d = 0; d < t.shape().dim_size(); ++d) {
    const onnx::TensorShapeProto::Dimension& dim = t.shape().dim(d);
    if (!dim.has_dim_value()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "graph input '", input.name(), "' has dimension ", d, " = ", dim.has_dim_param() ? absl::StrCat("'", dim.dim_param(), "'") : "unknown",
          "; pdist programs have static shapes: give it (pdist-import --input-shape ", input.name(), "=8,128)"));
    }
    shape.push_back(dim.dim_value());
  }
  ir::TensorType type{std::move(shape), dtype};
  if (absl::Status s = ir::CheckTensorType(type); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("graph input '", input.name(), "': ", s.message()));
  }
  return type;
}

absl::Status AppendLoss(ImportContext& ctx, OnnxImport& out, const OnnxImportOptions& options) {
  if (options.loss.empty() || options.loss == "none") {
    // What a loss reads, named without one: the user meant a loss (it exited 0 without one).
    if (!options.logits.empty() || options.labels != OnnxImportOptions().labels) {
      return absl::InvalidArgumentError(absl::StrCat(
          !options.logits.empty() ? absl::StrCat("logits '", options.logits, "'")
                                  : absl::StrCat("labels '", options.labels, "'"),
          " name what a loss reads, but no loss is appended: give one (--loss cross_entropy or mse)"));
    }
    return absl::OkStatus();
  }
  if (options.labels.empty()) return absl::InvalidArgumentError("the labels input of the loss needs a name (--labels)");
  ir::Value* logits = nullptr;
  std::vector<std::string> names;
  const std::vector<ir::ProgramOutput>& outputs = out.program.outputs();
  for (const auto& [name, value] : outputs) {
    names.push_back(name);
    if (name == options.logits || (options.logits.empty() && outputs.size() == 1)) logits = value;
  }
  if (logits == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        options.logits.empty() ? "the graph has several outputs; name the one the loss reads"
                               : absl::StrCat("the graph has no output '", options.logits, "'"),
        " (--logits NAME; outputs: ", absl::StrJoin(names, ", "), ")"));
  }
  ir::Builder& b = ctx.builder();
  if (b.program().FindArgument(options.labels) != nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("the labels input '", options.labels,
                                                   "' would take the name of a graph input or initializer; choose another (--labels)"));
  }
  const ir::Shape& shape = logits->type().shape;
  if (options.loss == "cross_entropy") {
    if (shape.empty()) return absl::InvalidArgumentError("cross_entropy needs logits with a class axis, got a scalar");
    ir::Shape label_shape(shape.begin(), shape.end() - 1);
    ir::Value* labels = b.Data(options.labels, {label_shape, ir::DataType::kInt64});
    label_shape.push_back(1);  // cross_entropy_with_softmax takes hard labels with a trailing 1
    PDIST_ASSIGN_OR_RETURN(ir::Value * labels1, b.Op1("reshape", {labels}, {{"shape", label_shape}}));
    PDIST_ASSIGN_OR_RETURN(std::vector<ir::Value*> ce, b.Create("cross_entropy_with_softmax", {logits, labels1}));
    PDIST_ASSIGN_OR_RETURN(ir::Value * loss, b.Op1("mean", {ce[1]}));
    b.program().set_loss(loss);
  } else if (options.loss == "mse") {
    ir::Value* labels = b.Data(options.labels, logits->type());
    PDIST_ASSIGN_OR_RETURN(ir::Value * diff, b.Op1("subtract", {logits, labels}));
    PDIST_ASSIGN_OR_RETURN(ir::Value * square, b.Op1("multiply", {diff, diff}));
    PDIST_ASSIGN_OR_RETURN(ir::Value * loss, b.Op1("mean", {square}));
    b.program().set_loss(loss);
  } else {
    return absl::InvalidArgumentError(absl::StrCat("unknown loss '", options.loss, "'; expected cross_entropy or mse"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<OnnxImport> ImportOnnxBytes(const std::string& bytes, const OnnxImportOptions& options) {
  onnx::ModelProto model;
  if (!model.ParseFromString(bytes)) {
    return absl::InvalidArgumentError(
        "not an ONNX model (the protobuf does not parse: another kind of file, a truncated one, or subgraphs nested "
        "deeper than protobuf's limit of 100)");
  }
  if (!model.has_graph()) return absl::InvalidArgumentError("the ONNX model has no graph");
  const onnx::GraphProto& graph = model.graph();
  OnnxImport out;
  PDIST_ASSIGN_OR_RETURN(out.opset, DefaultOpset(model));
  PDIST_RETURN_IF_ERROR(CheckEveryOpIsSupported(graph));
  PDIST_RETURN_IF_ERROR(CheckFrozenPatternsMatch(graph, options.frozen));

  // Read as absent: "'w' is read before any node, input or initializer defines it".
  if (graph.sparse_initializer_size() > 0) {
    const onnx::SparseTensorProto& sparse = graph.sparse_initializer(0);
    return absl::UnimplementedError(absl::StrCat("initializer '", sparse.values().name(), "' is sparse (",
                                                 graph.sparse_initializer_size(),
                                                 " sparse initializers); pdist imports dense ones: store it dense"));
  }
  ImportContext ctx(&out.program, options);
  ctx.set_opset(out.opset);
  for (const onnx::TensorProto& init : graph.initializer()) {
    // A second initializer of one name replaced the first's numbers without a word.
    if (ctx.IsDefined(init.name())) {
      return absl::InvalidArgumentError(absl::StrCat("initializer '", init.name(), "' is defined twice"));
    }
    PDIST_ASSIGN_OR_RETURN(OnnxTensor t, ReadOnnxTensor(init));
    ctx.DefineKnown(init.name(), std::move(t), /*initializer=*/true);
  }
  for (const onnx::ValueInfoProto& input : graph.input()) {
    if (ctx.IsInitializer(input.name())) continue;  // IR < 4 lists initializers as inputs too
    PDIST_ASSIGN_OR_RETURN(ir::TensorType type, InputType(input, options));
    ctx.Define(input.name(), ctx.builder().Data(input.name(), std::move(type)));
  }
  for (const auto& [name, _] : options.input_shapes) {
    bool found = false;
    for (const onnx::ValueInfoProto& input : graph.input()) found = found || input.name() == name;
    if (!found) return absl::InvalidArgumentError(absl::StrCat("--input-shape names '", name, "', which is not a graph input"));
  }
  for (const onnx::NodeProto& node : graph.node()) {
    // Every operator pdist imports has an output, and all but Constant an input; the converters
    // read input and output 0 without asking.
    if (node.output_size() == 0 || node.output(0).empty()) {
      return absl::InvalidArgumentError(absl::StrCat(Describe(node), " has no output"));
    }
    if (node.op_type() != "Constant" && (node.input_size() == 0 || node.input(0).empty())) {
      return absl::InvalidArgumentError(absl::StrCat(Describe(node), " has no input"));
    }
    for (const std::string& output : node.output()) {
      if (!output.empty() && ctx.IsDefined(output)) {
        return absl::InvalidArgumentError(absl::StrCat(Describe(node), " defines '", output,
                                                       "', which an input, initializer or earlier node already defines"));
      }
    }
    PDIST_RETURN_IF_ERROR(Converters().at(node.op_type())(ctx, node));
    ++out.nodes;
  }
  if (graph.output_size() == 0) return absl::InvalidArgumentError("the ONNX graph has no outputs: nothing to compute");
  for (const onnx::ValueInfoProto& output : graph.output()) {
    PDIST_ASSIGN_OR_RETURN(ir::Value * v, ctx.ValueOf(output.name()));
    out.program.add_output(output.name(), v);
  }
  PDIST_RETURN_IF_ERROR(AppendLoss(ctx, out, options));
  out.parameters = ctx.parameters();
  absl::Status valid = ir::VerifyProgram(out.program);
  if (!valid.ok()) return absl::InternalError(absl::StrCat("the imported program is invalid: ", valid.message()));
  return out;
}

absl::StatusOr<OnnxImport> ImportOnnxFile(const std::string& path, const OnnxImportOptions& options) {
  // Protobuf refuses messages over 2 GiB; larger models keep their weights as external data.
  PDIST_ASSIGN_OR_RETURN(std::string bytes, ir::ReadFileToString(path, (int64_t{1} << 31) - 1));
  absl::StatusOr<OnnxImport> imported = ImportOnnxBytes(bytes, options);
  if (!imported.ok()) return absl::Status(imported.status().code(), absl::StrCat(path, ": ", imported.status().message()));
  return imported;
}

}  // namespace pdist::onnx_import

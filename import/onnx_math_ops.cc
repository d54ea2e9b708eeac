// ONNX arithmetic, activations, matrix products, norms and reductions as pdist ops.
//
//   Add(x, b)             → add(x, b)             (numpy broadcasting on both sides)
//   Mul(x, Constant 0.125) → scale(x) {scale = 0.125}   (a known scalar folds into scale)
//   Gemm(a, b, c)         → matmul {trans_x, trans_y} [→ scale alpha] → add (c [scaled by beta])
//   LayerNormalization    → layer_norm {begin_norm_axis = axis, epsilon}
//   ReduceMean            → mean {axis, keep_dim}
#include <cmath>

#include "absl/strings/str_cat.h"
#include "import/onnx_context.h"
#include "ir/status.h"

namespace pdist::onnx_import {

namespace {

absl::Status Unary(ImportContext& ctx, const onnx::NodeProto& node, const char* type, const ir::AttributeMap& attrs = {}) {
  PDIST_ASSIGN_OR_RETURN(ir::Value * x, ctx.Input(node, 0));
  PDIST_ASSIGN_OR_RETURN(ir::Value * y, ctx.Op1(node, type, {x}, attrs));
  ctx.Define(node.output(0), y);
  return absl::OkStatus();
}

// A known float scalar that may fold into `scale`: not a parameter (an initializer stays one).
std::optional<double> FoldableScalar(ImportContext& ctx, const onnx::NodeProto& node, int i) {
  const OnnxTensor* t = ctx.Known(node, i);
  if (t == nullptr || ctx.IsInitializer(node.input(i)) || t->num_elements() != 1 ||
      !ir::IsFloatingPoint(t->type.dtype) || std::isnan(t->At(0))) {
    return std::nullopt;
  }
  return t->At(0);
}

// Known integer operands (shape arithmetic): folded, same shapes or one side a single number.
std::optional<OnnxTensor> FoldIntegers(ImportContext& ctx, const onnx::NodeProto& node, double (*f)(double, double)) {
  const OnnxTensor* a = ctx.Known(node, 0);
  const OnnxTensor* b = ctx.Known(node, 1);
  if (a == nullptr || b == nullptr || ir::IsFloatingPoint(a->type.dtype) || a->type.dtype != b->type.dtype) return std::nullopt;
  const OnnxTensor& big = a->num_elements() >= b->num_elements() ? *a : *b;
  if (a->num_elements() != b->num_elements() && std::min(a->num_elements(), b->num_elements()) != 1) return std::nullopt;
  std::vector<double> out;
  for (int64_t i = 0; i < big.num_elements(); ++i) {
    out.push_back(f(a->At(a->num_elements() == 1 ? 0 : i), b->At(b->num_elements() == 1 ? 0 : i)));
  }
  return MakeOnnxTensor(big.type, out);
}

struct Arithmetic {
  const char* onnx;
  const char* pdist;
  double (*fold)(double, double);
};

absl::Status Binary(ImportContext& ctx, const onnx::NodeProto& node, const Arithmetic& op) {
  if (std::optional<OnnxTensor> folded = FoldIntegers(ctx, node, op.fold)) {
    ctx.DefineKnown(node.output(0), *std::move(folded));
    return absl::OkStatus();
  }
  const std::string kind = op.onnx;
  // x (op) c and, for + and ×, c (op) x: one `scale` when x's shape is the result's.
  for (int side : {1, 0}) {
    std::optional<double> c = FoldableScalar(ctx, node, side);
    if (!c || (side == 0 && kind != "Add" && kind != "Mul" && kind != "Sub")) continue;
    PDIST_ASSIGN_OR_RETURN(ir::Value * x, ctx.Input(node, 1 - side));
    if (static_cast<int64_t>(ctx.Known(node, side)->type.shape.size()) > x->type().rank()) break;
    double scale = 1, bias = 0;
    if (kind == "Add") bias = *c;
    if (kind == "Sub") side == 1 ? (bias = -*c) : (scale = -1, bias = *c);
    if (kind == "Mul") scale = *c;
    if (kind == "Div") scale = 1.0 / *c;
    PDIST_ASSIGN_OR_RETURN(ir::Value * y, ctx.Op1(node, "scale", {x}, {{"scale", scale}, {"bias", bias}}));
    ctx.Define(node.output(0), y);
    return absl::OkStatus();
  }
  PDIST_ASSIGN_OR_RETURN(ir::Value * a, ctx.Input(node, 0));
  PDIST_ASSIGN_OR_RETURN(ir::Value * b, ctx.Input(node, 1));
  PDIST_ASSIGN_OR_RETURN(ir::Value * y, ctx.Op1(node, op.pdist, {a, b}));
  ctx.Define(node.output(0), y);
  return absl::OkStatus();
}

absl::Status Gemm(ImportContext& ctx, const onnx::NodeProto& node) {
  PDIST_ASSIGN_OR_RETURN(ir::Value * a, ctx.Input(node, 0));
  PDIST_ASSIGN_OR_RETURN(ir::Value * b, ctx.Input(node, 1));
  const double alpha = FloatAttr(node, "alpha", 1.0);
  const double beta = FloatAttr(node, "beta", 1.0);
  PDIST_ASSIGN_OR_RETURN(ir::Value * y, ctx.Op1(node, "matmul", {a, b},
                                                {{"trans_x", IntAttr(node, "transA", 0) != 0},
                                                 {"trans_y", IntAttr(node, "transB", 0) != 0}}));
  if (alpha != 1.0) {
    PDIST_ASSIGN_OR_RETURN(y, ctx.Op1(node, "scale", {y}, {{"scale", alpha}}));
  }
  if (ctx.HasInput(node, 2) && beta != 0.0) {
    PDIST_ASSIGN_OR_RETURN(ir::Value * c, ctx.Input(node, 2));
    if (beta != 1.0) {
      PDIST_ASSIGN_OR_RETURN(c, ctx.Op1(node, "scale", {c}, {{"scale", beta}}));
    }
    PDIST_ASSIGN_OR_RETURN(y, ctx.Op1(node, "add", {y, c}));
  }
  ctx.Define(node.output(0), y);
  return absl::OkStatus();
}

// Y, and Mean and InvStdDev shaped as ONNX's (x.shape[:axis] then ones): pdist's layer_norm
// keeps the mean and the variance; InvStdDev is rsqrt(variance + epsilon).
absl::Status LayerNormalization(ImportContext& ctx, const onnx::NodeProto& node) {
  PDIST_ASSIGN_OR_RETURN(ir::Value * x, ctx.Input(node, 0));
  PDIST_ASSIGN_OR_RETURN(ir::Value * scale, ctx.Input(node, 1));
  ir::Value* bias = nullptr;
  if (ctx.HasInput(node, 2)) {
    PDIST_ASSIGN_OR_RETURN(bias, ctx.Input(node, 2));
  }
  const double epsilon = FloatAttr(node, "epsilon", 1e-5);
  PDIST_ASSIGN_OR_RETURN(std::vector<ir::Value*> r,
                         ctx.Create(node, "layer_norm", {x, scale, bias},
                                    {{"begin_norm_axis", IntAttr(node, "axis", -1)}, {"epsilon", epsilon}}));
  ctx.Define(node.output(0), r[0]);
  std::vector<int64_t> stats_shape(r[1]->type().shape.begin(), r[1]->type().shape.end());
  stats_shape.resize(static_cast<size_t>(x->type().rank()), 1);
  if (node.output_size() > 1 && !node.output(1).empty()) {
    PDIST_ASSIGN_OR_RETURN(ir::Value * mean, ctx.Op1(node, "reshape", {r[1]}, {{"shape", stats_shape}}));
    ctx.Define(node.output(1), mean);
  }
  if (node.output_size() > 2 && !node.output(2).empty()) {
    PDIST_ASSIGN_OR_RETURN(ir::Value * shifted, ctx.Op1(node, "scale", {r[2]}, {{"bias", epsilon}}));
    PDIST_ASSIGN_OR_RETURN(ir::Value * inv, ctx.Op1(node, "rsqrt", {shifted}));
    PDIST_ASSIGN_OR_RETURN(ir::Value * inv_std, ctx.Op1(node, "reshape", {inv}, {{"shape", stats_shape}}));
    ctx.Define(node.output(2), inv_std);
  }
  return absl::OkStatus();
}

// ReduceSum's axes are an input from opset 13, ReduceMean's and ReduceMax's from opset 18.
absl::Status Reduce(ImportContext& ctx, const onnx::NodeProto& node, const char* type, int64_t axes_input_since) {
  std::vector<int64_t> axes;
  if (ctx.opset() >= axes_input_since) {
    if (ctx.HasInput(node, 1)) {
      PDIST_ASSIGN_OR_RETURN(axes, ctx.KnownInts(node, 1, "axes"));
    }
  } else if (std::optional<std::vector<int64_t>> attr = IntsAttr(node, "axes")) {
    axes = *attr;
  }
  PDIST_ASSIGN_OR_RETURN(ir::Value * x, ctx.Input(node, 0));
  if (axes.empty() && IntAttr(node, "noop_with_empty_axes", 0) != 0) {
    ctx.Define(node.output(0), x);
    return absl::OkStatus();
  }
  if (axes.empty()) {
    for (int64_t d = 0; d < x->type().rank(); ++d) axes.push_back(d);
  }
  PDIST_ASSIGN_OR_RETURN(ir::Value * y, ctx.Op1(node, type, {x}, {{"axis", axes}, {"keep_dim", IntAttr(node, "keepdims", 1) != 0}}));
  ctx.Define(node.output(0), y);
  return absl::OkStatus();
}

// ONNX's Dropout is the identity unless its training_mode input is true (what
// torch.onnx.export(..., training=TrainingMode.TRAINING) writes); then it is pdist's dropout,
// active in training steps and off in evaluation.
absl::Status Dropout(ImportContext& ctx, const onnx::NodeProto& node) {
  double p = 0.5;
  if (const OnnxTensor* ratio = ctx.Known(node, 1)) {
    p = ratio->At(0);
  } else if (ctx.HasInput(node, 1)) {
    return absl::UnimplementedError(absl::StrCat(Describe(node), ": its ratio is computed at run time; pdist needs it known"));
  }
  bool training = false;
  if (const OnnxTensor* mode = ctx.Known(node, 2)) {
    training = mode->At(0) != 0;
  } else if (ctx.HasInput(node, 2)) {
    return absl::UnimplementedError(absl::StrCat(Describe(node), ": its training_mode is computed at run time; pdist needs it known"));
  }
  PDIST_ASSIGN_OR_RETURN(ir::Value * x, ctx.Input(node, 0));
  const bool wants_mask = node.output_size() > 1 && !node.output(1).empty();
  if (!training || p == 0) {
    ctx.Define(node.output(0), x);
    if (wants_mask) {
      PDIST_ASSIGN_OR_RETURN(ir::Value * ones, ctx.Op1(node, "full", {}, {{"shape", x->type().shape}, {"value", 1.0},
                                                                           {"dtype", ir::DataType::kBool}}));
      ctx.Define(node.output(1), ones);
    }
    return absl::OkStatus();
  }
  // Each dropout draws its own mask: the seed is the node's place in the program.
  const auto seed = static_cast<int64_t>(ctx.builder().program().block().ops().size()) + 1;
  PDIST_ASSIGN_OR_RETURN(std::vector<ir::Value*> r, ctx.Create(node, "dropout", {x}, {{"p", p}, {"seed", seed}}));
  ctx.Define(node.output(0), r[0]);
  if (wants_mask) ctx.Define(node.output(1), r[1]);
  return absl::OkStatus();
}

// Pow with a known exponent pdist spells with other ops: 1 (x), 2 (x · x), 0.5 (sqrt) and
// −0.5 (rsqrt) — the exponents of a decomposed LayerNorm and of a variance.
absl::Status Pow(ImportContext& ctx, const onnx::NodeProto& node) {
  const OnnxTensor* e = ctx.Known(node, 1);
  PDIST_ASSIGN_OR_RETURN(ir::Value * x, ctx.Input(node, 0));
  const double p = e != nullptr && e->num_elements() == 1 ? e->At(0) : std::nan("");
  if (p == 1.0) {
    ctx.Define(node.output(0), x);
    return absl::OkStatus();
  }
  absl::StatusOr<ir::Value*> y = absl::UnimplementedError(
      absl::StrCat(Describe(node), ": pdist imports Pow with a known exponent of 1, 2, 0.5 or -0.5 only",
                   std::isnan(p) ? "" : absl::StrCat(", got ", p)));
  if (p == 2.0) y = ctx.Op1(node, "multiply", {x, x});
  if (p == 0.5) y = ctx.Op1(node, "sqrt", {x});
  if (p == -0.5) y = ctx.Op1(node, "rsqrt", {x});
  if (!y.ok()) return y.status();
  ctx.Define(node.output(0), *y);
  return absl::OkStatus();
}

double AddFn(double a, double b) { return a + b; }
double SubFn(double a, double b) { return a - b; }
double MulFn(double a, double b) { return a * b; }
// ONNX integer Div truncates toward zero (as C++ does).
double DivFn(double a, double b) { return b == 0 ? 0 : std::trunc(a / b); }

}  // namespace

void AddMathConverters(ConverterMap& map) {
  for (const Arithmetic& op : {Arithmetic{"Add", "add", AddFn}, Arithmetic{"Sub", "subtract", SubFn},
                               Arithmetic{"Mul", "multiply", MulFn}, Arithmetic{"Div", "divide", DivFn}}) {
    map[op.onnx] = [op](ImportContext& ctx, const onnx::NodeProto& node) { return Binary(ctx, node, op); };
  }
  // (ONNX op type, pdist op type) pairs; the pdist name is copied into each converter.
  using Names = std::vector<std::pair<std::string, std::string>>;
  for (const auto& names : Names{{"Relu", "relu"}, {"Tanh", "tanh"}, {"Exp", "exp"}, {"Sigmoid", "sigmoid"},
                                        {"Erf", "erf"}, {"Sqrt", "sqrt"}}) {
    const std::string type = names.second;
    map[names.first] = [type](ImportContext& ctx, const onnx::NodeProto& node) { return Unary(ctx, node, type.c_str()); };
  }
  for (const auto& names : Names{{"Softmax", "softmax"}, {"LogSoftmax", "log_softmax"}}) {
    const std::string type = names.second;
    map[names.first] = [type](ImportContext& ctx, const onnx::NodeProto& node) {
      return Unary(ctx, node, type.c_str(), {{"axis", IntAttr(node, "axis", -1)}});
    };
  }
  for (const auto& names : Names{{"Equal", "equal"}, {"Less", "less_than"}, {"Greater", "greater_than"}}) {
    const std::string type = names.second;
    map[names.first] = [type](ImportContext& ctx, const onnx::NodeProto& node) -> absl::Status {
      PDIST_ASSIGN_OR_RETURN(ir::Value * a, ctx.Input(node, 0));
      PDIST_ASSIGN_OR_RETURN(ir::Value * b, ctx.Input(node, 1));
      PDIST_ASSIGN_OR_RETURN(ir::Value * y, ctx.Op1(node, type, {a, b}));
      ctx.Define(node.output(0), y);
      return absl::OkStatus();
    };
  }
  map["Neg"] = [](ImportContext& ctx, const onnx::NodeProto& node) { return Unary(ctx, node, "scale", {{"scale", -1.0}}); };
  map["MatMul"] = [](ImportContext& ctx, const onnx::NodeProto& node) -> absl::Status {
    PDIST_ASSIGN_OR_RETURN(ir::Value * a, ctx.Input(node, 0));
    PDIST_ASSIGN_OR_RETURN(ir::Value * b, ctx.Input(node, 1));
    PDIST_ASSIGN_OR_RETURN(ir::Value * y, ctx.Op1(node, "matmul", {a, b}));
    ctx.Define(node.output(0), y);
    return absl::OkStatus();
  };
  map["Gemm"] = Gemm;
  map["LayerNormalization"] = LayerNormalization;
  map["ReduceSum"] = [](ImportContext& ctx, const onnx::NodeProto& node) { return Reduce(ctx, node, "sum", 13); };
  map["ReduceMean"] = [](ImportContext& ctx, const onnx::NodeProto& node) { return Reduce(ctx, node, "mean", 18); };
  map["ReduceMax"] = [](ImportContext& ctx, const onnx::NodeProto& node) { return Reduce(ctx, node, "max", 18); };
  map["Dropout"] = Dropout;
  map["Pow"] = Pow;
}

const ConverterMap& Converters() {
  static const ConverterMap* map = [] {
    auto* m = new ConverterMap;
    AddMathConverters(*m);
    AddShapeConverters(*m);
    return m;
  }();
  return *map;
}

}  // namespace pdist::onnx_import

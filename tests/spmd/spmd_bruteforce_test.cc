// Every op's SPMD rule checked numerically by brute force (STYLE.md practice 4).
//
// For each op of the registry (but the local c_* ops and reshard) and each representative input
// configuration of the table below, every placement of the inputs on a [2] and a [2,2] mesh
// (Replicate, Shard(d) for each dim d that divides, Partial(sum|avg|max) for float inputs, one
// reduce type per tensor; no co-shard)
// is annotated on a one-op program whose results are each resharded to Replicate and cast to
// f64; then completion, partition for every rank, one inproc rank per thread, and every result
// of every rank compared with the single-rank run of the same op on the same whole inputs:
//
//   in0 = data f64[4,8] dist! S(0)R      in1 = data f64[8,4] dist! RP     (rank r's feed: its
//   %2  = matmul(in0, in1)                                                  piece; the pieces of
//   %3  = reshard(%2) dist! RR;  %4 = cast(%3) {dtype = f64}  → fetched     a Partial input
//                                                                           reduce to the whole)
//
// A combination that completion or partition rejects with a clear error (an uneven shard, a
// layout partition cannot lower) counts as rejected; one that runs and gives other numbers, or
// fails inside the executor, or an Internal error anywhere, is a failure. All failures are named
// — op, mesh, the placement of every input, what went wrong — in one assertion message, after a
// summary of the combinations checked per op and the reasons of the rejections. When a case has
// more combinations than kMaxCombinations on a mesh, a deterministic sample is run (half of it
// with one distributed input at most), and the summary says so ("200 of 1512 run").
//
// Float inputs are multiples of 1/8 (Partial pieces too), so that a sum of pieces is exact and
// ties occur; ids stay in range (ids and other integer inputs are never Partial).
#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "engine/shard_io.h"
#include "executor/comm/comm_groups.h"
#include "executor/comm/inproc/inproc_communicator.h"
#include "executor/executor.h"
#include "gtest/gtest.h"
#include "ir/builder.h"
#include "ir/dist/dist_attr.h"
#include "ir/dist/placement.h"
#include "ir/dist/process_mesh.h"
#include "ir/dist/shard_tensor.h"
#include "ir/op_def.h"
#include "ir/status.h"
#include "passes/completion.h"
#include "passes/partition.h"
#include "passes/reshard_plan.h"
#include "tests/testing/op_testing.h"

namespace pdist::spmd_bruteforce_test {
namespace {

using exec::Tensor;
using ir::AttributeMap;
using ir::DataType;
using ir::DistAttr;
using ir::Placement;
using ir::ProcessMesh;
using ir::Shape;
using ir::TensorType;

// Per (case, mesh): above this many combinations, a deterministic sample is run.
constexpr int64_t kMaxCombinations = 160;
// The Partial placements enumerated for a float input (one reduce type per tensor).
constexpr ir::ReduceType kPartialTypes[] = {ir::ReduceType::kSum, ir::ReduceType::kAvg, ir::ReduceType::kMax};
// |got - want| <= kRelTol * (|want| + max |want| of the tensor): relative, with a floor at the
// tensor's scale so that a sum that cancels to ~0 is not judged by its own tiny size.
constexpr double kRelTol = 1e-9;

// ---------------------------------------------------------------------------------------------
// The table: one or more input configurations per op.

enum class Fill {
  kFloat,     // multiples of 1/8 in [-2, 2]: sums of pieces are exact, ties occur
  kCoarse,    // multiples of 1/2 in [-1, 1]: many ties, for comparisons and maximum
  kPositive,  // multiples of 1/8 in [0.5, 2] (divisors, second moments)
  kUnit,      // multiples of 1/16 in [0.5, 0.9375] (beta powers)
  kIds,       // integers in [0, range)
  kBool,      // false or true
  kAbsent,    // an absent optional operand
  kDerived,   // a result of another op on other inputs (see InputSpec::derived_*)
};

struct InputSpec {
  TensorType type;
  Fill fill = Fill::kFloat;
  int64_t range = 0;  // kIds
  // kDerived: result `derived_result` of `derived_op` on the inputs `derived_from` (indices into
  // the case's operands, then its aux tensors), with `derived_attrs`.
  std::string derived_op;
  std::vector<int> derived_from;
  AttributeMap derived_attrs;
  int derived_result = 0;
};

InputSpec Spec(TensorType type, Fill fill, int64_t range = 0) {
  InputSpec s;
  s.type = std::move(type);
  s.fill = fill;
  s.range = range;
  return s;
}
InputSpec F(Shape shape) { return Spec({std::move(shape), DataType::kFloat64}, Fill::kFloat); }
InputSpec Coarse(Shape shape) { return Spec({std::move(shape), DataType::kFloat64}, Fill::kCoarse); }
InputSpec Pos(Shape shape) { return Spec({std::move(shape), DataType::kFloat64}, Fill::kPositive); }
InputSpec Unit(Shape shape) { return Spec({std::move(shape), DataType::kFloat64}, Fill::kUnit); }
InputSpec Ids(Shape shape, int64_t range) { return Spec({std::move(shape), DataType::kInt64}, Fill::kIds, range); }
InputSpec Bool(Shape shape) { return Spec({std::move(shape), DataType::kBool}, Fill::kBool); }
InputSpec Absent() { return Spec({{0}, DataType::kFloat64}, Fill::kAbsent); }
InputSpec Derived(Shape shape, std::string op, std::vector<int> from, AttributeMap attrs, int result) {
  InputSpec s = Spec({std::move(shape), DataType::kFloat64}, Fill::kDerived);
  s.derived_op = std::move(op);
  s.derived_from = std::move(from);
  s.derived_attrs = std::move(attrs);
  s.derived_result = result;
  return s;
}

struct OpCase {
  std::string label;  // "matmul[batched]": the op and what distinguishes this configuration
  std::string op;
  std::vector<InputSpec> inputs;
  AttributeMap attrs;
  std::vector<InputSpec> aux = {};  // generated only to derive inputs from
};

// One configuration per line reads better than bin-packed arguments.
// clang-format off
std::vector<OpCase> Cases() {
  std::vector<OpCase> cases;
  auto add = [&](OpCase c) { cases.push_back(std::move(c)); };
  const Shape kX = {4, 8};
  const Shape kX3 = {4, 4, 8};

  // Elementwise binary ops (y broadcast along x's rows) and their gradients.
  for (const char* op : {"add", "subtract", "multiply", "divide", "maximum"}) {
    const std::string name = op;
    const InputSpec x = name == "maximum" ? Coarse(kX) : F(kX);
    const InputSpec y = name == "divide" ? Pos({8}) : name == "maximum" ? Coarse({8}) : F({8});
    add({op, op, {x, y}, {}});
    add({absl::StrCat(op, "_grad"), absl::StrCat(op, "_grad"), {x, y, F(kX)}, {}});
  }
  add({"add[same shape]", "add", {F(kX), F(kX)}, {}});
  // Size-1 dims broadcast on both sides: [4,1] op [1,8] → [4,8]; the grads sum them back.
  add({"add[both broadcast]", "add", {F({4, 1}), F({1, 8})}, {}});
  add({"multiply[column]", "multiply", {F(kX), F({4, 1})}, {}});
  add({"add_grad[both broadcast]", "add_grad", {F({4, 1}), F({1, 8}), F(kX)}, {}});
  add({"multiply_grad[column]", "multiply_grad", {F(kX), F({4, 1}), F(kX)}, {}});
  add({"divide_grad[rank-3 x]", "divide_grad", {F(kX3), Pos({4, 1, 8}), F(kX3)}, {}});
  for (const char* op : {"greater_than", "less_than", "equal"}) add({op, op, {Coarse(kX), Coarse({8})}, {}});
  add({"expand[new and size-1 axes]", "expand", {F({4, 1})}, {{"shape", std::vector<int64_t>{2, 4, 8}}}});
  add({"expand[same shape]", "expand", {F(kX)}, {{"shape", std::vector<int64_t>(kX.begin(), kX.end())}}});
  add({"gather[axis 1]", "gather", {F({4, 8, 2}), Ids({2, 3}, 8)}, {{"axis", int64_t{1}}}});
  add({"gather[axis 0]", "gather", {F({8, 4}), Ids({4}, 8)}, {}});
  add({"gather_grad[axis 1]", "gather_grad", {Ids({2, 3}, 8), F({4, 2, 3, 2})},
       {{"axis", int64_t{1}}, {"x_shape", std::vector<int64_t>{4, 8, 2}}}});
  add({"where", "where", {Bool(kX), F(kX), F(kX)}, {}});
  add({"where[broadcast]", "where", {Bool({4, 1}), F({8}), F(kX)}, {}});

  // Unary ops.
  add({"scale[bias 0]", "scale", {F(kX)}, {{"scale", 2.5}, {"bias", 0.0}}});
  add({"scale[bias 0.5]", "scale", {F(kX)}, {{"scale", 2.5}, {"bias", 0.5}}});
  add({"scale[bias before]", "scale", {F(kX)}, {{"scale", -1.5}, {"bias", 0.25}, {"bias_after_scale", false}}});
  for (const char* op : {"relu", "gelu", "silu", "tanh", "exp", "sigmoid", "erf"}) {
    add({op, op, {F(kX)}, {}});
    add({absl::StrCat(op, "_grad"), absl::StrCat(op, "_grad"), {F(kX), F(kX)}, {}});
  }
  for (const char* op : {"sqrt", "rsqrt"}) {  // defined on positive numbers; their grads read out > 0
    add({op, op, {Pos(kX)}, {}});
    add({absl::StrCat(op, "_grad"), absl::StrCat(op, "_grad"), {Pos(kX), F(kX)}, {}});
  }
  add({"gelu[approximate]", "gelu", {F(kX)}, {{"approximate", true}}});
  add({"cast[f64->f32]", "cast", {F(kX)}, {{"dtype", DataType::kFloat32}}});
  add({"cast[f64->i64]", "cast", {F(kX)}, {{"dtype", DataType::kInt64}}});
  add({"cast[i64->f64]", "cast", {Ids(kX, 8)}, {{"dtype", DataType::kFloat64}}});
  add({"dropout[p 0.5]", "dropout", {F(kX)}, {{"p", 0.5}, {"seed", int64_t{7}}}});
  add({"dropout[p 0]", "dropout", {F(kX)}, {{"p", 0.0}}});
  add({"dropout[seed tensor]", "dropout", {F(kX), Ids({}, 100)}, {{"p", 0.5}}});
  add({"dropout_grad", "dropout_grad", {Bool(kX), F(kX)}, {{"p", 0.5}}});
  add({"dropout_grad[p 0]", "dropout_grad", {Bool(kX), F(kX)}, {{"p", 0.0}}});
  add({"dropout[downgrade_in_infer]", "dropout", {F(kX)}, {{"p", 0.25}, {"mode", std::string("downgrade_in_infer")}}});
  add({"dropout[is_test]", "dropout", {F(kX)}, {{"p", 0.5}, {"is_test", true}}});

  // matmul.
  add({"matmul", "matmul", {F({4, 8}), F({8, 4})}, {}});
  add({"matmul[batched, trans_y]", "matmul", {F(kX3), F({4, 8})}, {{"trans_y", true}}});
  add({"matmul_grad", "matmul_grad", {F({4, 8}), F({8, 4}), F({4, 4})}, {}});
  add({"matmul_grad[batched]", "matmul_grad", {F(kX3), F({8, 4}), F({4, 4, 4})}, {}});
  add({"matmul[trans_x]", "matmul", {F({8, 4}), F({8, 4})}, {{"trans_x", true}}});
  add({"matmul[1-D x]", "matmul", {F({8}), F({8, 4})}, {}});
  add({"matmul[1-D y]", "matmul", {F({4, 8}), F({8})}, {}});
  add({"matmul[batch broadcast]", "matmul", {F(kX3), F({1, 8, 4})}, {}});
  add({"matmul_grad[trans_x, trans_y]", "matmul_grad", {F({8, 4}), F({4, 8}), F({4, 4})},
       {{"trans_x", true}, {"trans_y", true}}});
  add({"matmul_grad[1-D y]", "matmul_grad", {F({4, 8}), F({8}), F({4})}, {}});
  add({"matmul_grad[batch broadcast]", "matmul_grad", {F(kX3), F({1, 8, 4}), F({4, 4, 4})}, {}});

  // Reductions and full.
  const AttributeMap axis1 = {{"axis", std::vector<int64_t>{1}}};
  for (const char* op : {"sum", "mean", "max", "min"}) {
    add({absl::StrCat(op, "[axis 1]"), op, {F(kX3)}, axis1});
    const bool needs_out = std::string(op) == "max" || std::string(op) == "min";
    std::vector<InputSpec> grad_in = {F(kX3)};
    if (needs_out) grad_in.push_back(Derived({4, 8}, op, {0}, axis1, 0));
    grad_in.push_back(F({4, 8}));
    add({absl::StrCat(op, "_grad[axis 1]"), absl::StrCat(op, "_grad"), grad_in, axis1});
  }
  add({"sum[all]", "sum", {F(kX3)}, {}});
  add({"mean[all]", "mean", {F(kX3)}, {}});
  add({"max[axis -1, keep_dim]", "max", {F(kX3)}, {{"axis", std::vector<int64_t>{-1}}, {"keep_dim", true}}});
  add({"mean_grad[axis 0,2]", "mean_grad", {F(kX3), F({4})}, {{"axis", std::vector<int64_t>{0, 2}}}});
  const AttributeMap keep1 = {{"axis", std::vector<int64_t>{1}}, {"keep_dim", true}};
  add({"sum_grad[axis 1, keep_dim]", "sum_grad", {F(kX3), F({4, 1, 8})}, keep1});
  add({"max_grad[axis 1, keep_dim]", "max_grad", {Coarse(kX3), Derived({4, 1, 8}, "max", {0}, keep1, 0), F({4, 1, 8})},
       keep1});
  add({"min[all]", "min", {F(kX3)}, {}});
  add({"min_grad[all]", "min_grad", {Coarse(kX3), Derived({}, "min", {0}, {}, 0), F({})}, {}});
  add({"full", "full", {}, {{"shape", std::vector<int64_t>{4, 8}}, {"value", 1.5}, {"dtype", DataType::kFloat64}}});

  // Shape ops.
  add({"reshape[merge]", "reshape", {F(kX3)}, {{"shape", std::vector<int64_t>{0, -1}}}});
  add({"reshape[split]", "reshape", {F({8, 8})}, {{"shape", std::vector<int64_t>{2, 4, 8}}}});
  add({"reshape[flatten]", "reshape", {F(kX)}, {{"shape", std::vector<int64_t>{-1}}}});
  add({"reshape[unflatten]", "reshape", {F({32})}, {{"shape", std::vector<int64_t>{4, 8}}}});
  add({"reshape[regroup]", "reshape", {F(kX)}, {{"shape", std::vector<int64_t>{8, 4}}}});
  add({"reshape[size-1 dims]", "reshape", {F({4, 1, 8})}, {{"shape", std::vector<int64_t>{1, 4, 8, 1}}}});
  add({"unsqueeze[negative, two]", "unsqueeze", {F(kX)}, {{"axis", std::vector<int64_t>{0, -1}}}});
  add({"squeeze[all]", "squeeze", {F({1, 4, 1, 8})}, {}});
  add({"transpose[negative perm]", "transpose", {F(kX3)}, {{"perm", std::vector<int64_t>{-1, 1, 0}}}});
  add({"split[axis 0]", "split", {F({8, 4})}, {{"sections", std::vector<int64_t>{4, -1}}, {"axis", int64_t{0}}}});
  add({"split_with_num[4, axis -1]", "split_with_num", {F({4, 8})}, {{"num", int64_t{4}}, {"axis", int64_t{-1}}}});
  add({"unsqueeze", "unsqueeze", {F(kX)}, {{"axis", std::vector<int64_t>{1}}}});
  add({"squeeze", "squeeze", {F({4, 1, 8})}, {{"axis", std::vector<int64_t>{1}}}});
  add({"transpose", "transpose", {F(kX3)}, {{"perm", std::vector<int64_t>{2, 0, 1}}}});
  add({"split", "split", {F(kX)}, {{"sections", std::vector<int64_t>{2, 6}}, {"axis", int64_t{1}}}});
  add({"split_with_num", "split_with_num", {F(kX)}, {{"num", int64_t{2}}, {"axis", int64_t{1}}}});
  add({"concat[axis 1]", "concat", {F(kX), F({4, 4})}, {{"axis", int64_t{1}}}});
  add({"concat[axis 0, 3 inputs]", "concat", {F({4, 4}), F({4, 4}), F({8, 4})}, {{"axis", int64_t{0}}}});
  const AttributeMap window = {{"axes", std::vector<int64_t>{1}},
                               {"starts", std::vector<int64_t>{2}},
                               {"ends", std::vector<int64_t>{6}}};
  const AttributeMap row = {{"axes", std::vector<int64_t>{0}},
                            {"starts", std::vector<int64_t>{1}},
                            {"ends", std::vector<int64_t>{2}},
                            {"decrease_axis", std::vector<int64_t>{0}}};
  add({"slice", "slice", {F(kX)}, window});
  add({"slice[decrease_axis]", "slice", {F(kX)}, row});
  add({"slice_grad", "slice_grad", {F(kX), F({4, 4})}, window});
  add({"slice_grad[decrease_axis]", "slice_grad", {F(kX), F({8})}, row});
  const AttributeMap box = {{"axes", std::vector<int64_t>{0, -1}},
                            {"starts", std::vector<int64_t>{-3, 0}},
                            {"ends", std::vector<int64_t>{100, 4}}};
  add({"slice[two axes, clamped]", "slice", {F(kX)}, box});
  add({"slice_grad[two axes, clamped]", "slice_grad", {F(kX), F({3, 4})}, box});

  // Softmax and the norms.
  for (const char* op : {"softmax", "log_softmax"}) {
    add({op, op, {F(kX)}, {}});
    add({absl::StrCat(op, "[axis 0]"), op, {F(kX)}, {{"axis", int64_t{0}}}});
    add({absl::StrCat(op, "_grad"), absl::StrCat(op, "_grad"), {F(kX), F(kX)}, {}});
  }
  const AttributeMap ln = {{"begin_norm_axis", int64_t{2}}};
  add({"layer_norm", "layer_norm", {F(kX3), F({8}), F({8})}, ln});
  add({"layer_norm[no affine]", "layer_norm", {F(kX3), Absent(), Absent()}, ln});
  add({"layer_norm_grad", "layer_norm_grad",
       {F(kX3), F({8}), F({8}), Derived({4, 4}, "layer_norm", {0, 1, 2}, ln, 1),
        Derived({4, 4}, "layer_norm", {0, 1, 2}, ln, 2), F(kX3)},
       ln});
  add({"rms_norm", "rms_norm", {F(kX3), F({8})}, {}});
  const AttributeMap ln1 = {{"begin_norm_axis", int64_t{1}}};
  add({"layer_norm[begin 1]", "layer_norm", {F(kX3), F({32}), F({32})}, ln1});
  add({"layer_norm_grad[begin 1, no bias]", "layer_norm_grad",
       {F(kX3), F({32}), Absent(), Derived({4}, "layer_norm", {0, 1, 2}, ln1, 1),
        Derived({4}, "layer_norm", {0, 1, 2}, ln1, 2), F(kX3)},
       ln1});
  add({"rms_norm[begin 1]", "rms_norm", {F(kX3), F({4, 8})}, ln1});
  add({"rms_norm_grad[begin 1]", "rms_norm_grad",
       {F(kX3), F({4, 8}), Derived({4}, "rms_norm", {0, 1}, ln1, 1), F(kX3)}, ln1});
  add({"softmax[3-D, axis 1]", "softmax", {F(kX3)}, {{"axis", int64_t{1}}}});
  add({"log_softmax_grad[axis 0]", "log_softmax_grad", {F(kX), F(kX)}, {{"axis", int64_t{0}}}});
  add({"rms_norm_grad", "rms_norm_grad", {F(kX3), F({8}), Derived({4, 4}, "rms_norm", {0, 1}, {}, 1), F(kX3)}, {}});

  // NN ops.
  add({"embedding", "embedding", {Ids({4, 4}, 8), F({8, 4})}, {}});
  add({"embedding[padding_idx]", "embedding", {Ids({4, 4}, 8), F({8, 4})}, {{"padding_idx", int64_t{1}}}});
  add({"embedding_grad", "embedding_grad", {Ids({4, 4}, 8), F({8, 4}), F({4, 4, 4})}, {}});
  add({"embedding[1-D ids]", "embedding", {Ids({8}, 8), F({8, 4})}, {}});
  add({"embedding_grad[padding_idx]", "embedding_grad", {Ids({4, 4}, 8), F({8, 4}), F({4, 4, 4})},
       {{"padding_idx", int64_t{2}}}});
  add({"cross_entropy_with_softmax[no softmax]", "cross_entropy_with_softmax", {Pos(kX), Ids({4, 1}, 8)},
       {{"use_softmax", false}}});
  add({"cross_entropy_with_softmax[ignore_index]", "cross_entropy_with_softmax", {F(kX), Ids({4, 1}, 4)},
       {{"ignore_index", int64_t{3}}}});
  add({"cross_entropy_with_softmax[axis 0]", "cross_entropy_with_softmax", {F(kX), Ids({1, 8}, 4)},
       {{"axis", int64_t{0}}}});
  add({"cross_entropy_with_softmax_grad[ignore_index]", "cross_entropy_with_softmax_grad",
       {Ids({4, 1}, 4), Derived(kX, "softmax", {3}, {}, 0), F({4, 1})}, {{"ignore_index", int64_t{3}}}, {F(kX)}});
  add({"cross_entropy_with_softmax_grad[axis 0]", "cross_entropy_with_softmax_grad",
       {Ids({1, 8}, 4), Derived(kX, "softmax", {3}, {{"axis", int64_t{0}}}, 0), F({1, 8})}, {{"axis", int64_t{0}}},
       {F(kX)}});
  add({"cross_entropy_with_softmax_grad[soft label]", "cross_entropy_with_softmax_grad",
       {Pos(kX), Derived(kX, "softmax", {3}, {}, 0), F({4, 1})}, {{"soft_label", true}}, {F(kX)}});
  add({"cross_entropy_with_softmax", "cross_entropy_with_softmax", {F(kX), Ids({4, 1}, 8)}, {}});
  add({"cross_entropy_with_softmax[3-D]", "cross_entropy_with_softmax", {F(kX3), Ids({4, 4, 1}, 8)}, {}});
  add({"cross_entropy_with_softmax[3-D, no softmax result]", "cross_entropy_with_softmax",
       {F(kX3), Ids({4, 4, 1}, 8)}, {{"return_softmax", false}}});
  add({"cross_entropy_with_softmax[axis 0, no softmax result]", "cross_entropy_with_softmax", {F(kX), Ids({1, 8}, 4)},
       {{"axis", int64_t{0}}, {"return_softmax", false}}});
  add({"cross_entropy_with_softmax[soft label]", "cross_entropy_with_softmax", {F(kX), Pos(kX)},
       {{"soft_label", true}}});
  add({"cross_entropy_with_softmax_grad", "cross_entropy_with_softmax_grad",
       {Ids({4, 1}, 8), Derived(kX, "softmax", {3}, {}, 0), F({4, 1})}, {}, {F(kX)}});
  // The gradient from the logits (bf16/f16 models): with the classes sharded its local form
  // all-reduces the row max and sum again (c_softmax_with_cross_entropy_grad_from_logits).
  add({"cross_entropy_with_softmax_grad_from_logits", "cross_entropy_with_softmax_grad_from_logits",
       {Ids({4, 1}, 8), F(kX), F({4, 1})}, {}});
  add({"cross_entropy_with_softmax_grad_from_logits[3-D, ignore_index]", "cross_entropy_with_softmax_grad_from_logits",
       {Ids({4, 4, 1}, 4), F(kX3), F({4, 4, 1})}, {{"ignore_index", int64_t{3}}}});
  add({"cross_entropy_with_softmax_grad_from_logits[axis 0]", "cross_entropy_with_softmax_grad_from_logits",
       {Ids({1, 8}, 4), F(kX), F({1, 8})}, {{"axis", int64_t{0}}}});
  add({"cross_entropy_with_softmax_grad_from_logits[soft label]", "cross_entropy_with_softmax_grad_from_logits",
       {Pos(kX), F(kX), F({4, 1})}, {{"soft_label", true}}});
  add({"cross_entropy_with_softmax_grad_from_logits[no softmax]", "cross_entropy_with_softmax_grad_from_logits",
       {Ids({4, 1}, 8), Pos(kX), F({4, 1})}, {{"use_softmax", false}}});
  const Shape kQ = {4, 4, 4, 4};  // [batch, seq, heads, head_dim]
  add({"fused_rope[q, k]", "fused_rope", {F(kQ), F(kQ)}, {}});
  add({"fused_rope[q, k, v, sin, cos, halves]", "fused_rope", {F(kQ), F(kQ), F(kQ), F({4, 4}), F({4, 4})},
       {{"use_neox_rotary_style", false}}});
  add({"fused_rope_grad", "fused_rope_grad", {Absent(), Absent(), Absent(), F(kQ), F(kQ)}, {}});
  add({"fused_rope[gqa k, time_major]", "fused_rope", {F(kQ), F({4, 4, 2, 4})}, {{"time_major", true}}});
  add({"fused_rope[position_ids]", "fused_rope", {F(kQ), Absent(), Absent(), F({8, 4}), F({8, 4}), Ids({4, 4}, 8)},
       {}});
  add({"fused_rope_grad[sin, cos, v]", "fused_rope_grad",
       {F({1, 4, 1, 4}), F({1, 4, 1, 4}), Absent(), F(kQ), Absent(), F(kQ)}, {}});
  const AttributeMap causal = {{"causal", true}};
  add({"flash_attn[causal]", "flash_attn", {F(kQ), F(kQ), F(kQ)}, causal});
  add({"flash_attention", "flash_attention", {F(kQ), F(kQ), F(kQ)}, {}});
  add({"flash_attn[gqa, mask]", "flash_attn", {F(kQ), F({4, 4, 2, 4}), F({4, 4, 2, 4}), Absent(), F({4, 1, 4, 4})},
       {}});
  add({"flash_attn[longer k, return_softmax]", "flash_attn", {F(kQ), F({4, 8, 4, 4}), F({4, 8, 4, 8})},
       {{"return_softmax", true}, {"causal", true}}});
  const Shape kKv = {4, 4, 2, 4};
  add({"flash_attn_grad[gqa, mask]", "flash_attn_grad",
       {F(kQ), F(kKv), F(kKv), Derived(kQ, "flash_attn", {0, 1, 2, 5, 6}, {}, 0),
        Derived({4, 4, 4}, "flash_attn", {0, 1, 2, 5, 6}, {}, 2), Absent(), F({4, 4, 4, 4}), F(kQ)},
       {}});
  add({"flash_attn_grad[causal]", "flash_attn_grad",
       {F(kQ), F(kQ), F(kQ), Derived(kQ, "flash_attn", {0, 1, 2}, causal, 0),
        Derived({4, 4, 4}, "flash_attn", {0, 1, 2}, causal, 2), Absent(), Absent(), F(kQ)},
       causal});

  // Optimizers (parameters and states fed as data: the rules do not look at roles).
  add({"sgd", "sgd", {F(kX), Pos({}), F(kX)}, {}});
  add({"momentum", "momentum", {F(kX), F(kX), F(kX), Pos({1})},
       {{"use_nesterov", true}, {"regularization_coeff", 0.01}}});
  add({"adamw", "adamw", {F(kX), F(kX), Pos({}), F(kX), Pos(kX), Unit({1}), Unit({1})}, {}});
  add({"adamw[no decay, lr_ratio]", "adamw", {F(kX), F(kX), Pos({1}), F(kX), Pos(kX), Unit({}), Unit({})},
       {{"with_decay", false}, {"lr_ratio", 0.5}}});
  add({"momentum[plain]", "momentum", {F(kX), F(kX), F(kX), Pos({})}, {}});
  add({"sgd[skip_update]", "sgd", {F(kX), Pos({}), F(kX), Pos({1})}, {}});
  add({"adamw[skip_update]", "adamw", {F(kX), F(kX), Pos({}), F(kX), Pos(kX), Unit({1}), Unit({1}), Pos({})}, {}});

  // Dynamic loss scaling.
  add({"count_nonfinite", "count_nonfinite", {F(kX3)}, {}});
  add({"update_loss_scaling[overflow]", "update_loss_scaling", {Pos({}), Pos({1}), Unit({1}), Unit({1}), Unit({1})},
       {{"decr_every_n_nan_or_inf", int64_t{1}}}});
  return cases;
}
// clang-format on

// Ops the table does not need: the local forms that partition produces, and reshard itself.
// Ops of partitioned programs (collectives, local forms, merged_adamw) and reshard, which
// completion makes from the rules themselves.
bool IsLocalOnly(const std::string& op) {
  const ir::OpDef* def = ir::OpRegistry::Global().Find(op);
  return absl::StartsWith(op, "c_") || op == "reshard" || (def != nullptr && def->local_only);
}

// ---------------------------------------------------------------------------------------------
// Known wrong rules / kernels / partition behaviour, found by this test and not yet fixed.
// Each entry excuses the failures of one case (label) on one mesh ("" = both) whose input
// placements contain `placements` ("" = any) and whose message contains `message`. Remove an
// entry when its bug is fixed; entries that excuse nothing are printed as stale.

struct KnownFailure {
  const char* label;
  const char* mesh;        // "[2]", "[2,2]" or ""
  const char* placements;  // substring of "x=S(0)R, y=RP" or ""
  const char* message;     // substring of the failure's message or ""
  const char* why;         // the bug, for the reader
};

const std::vector<KnownFailure>& KnownFailures() {
  // Empty: every combination that runs gives the single-rank numbers. (Partition used to lower
  // cross entropy with a non-last softmax axis to the vocab-parallel op; fixed, and kept covered
  // by the cross_entropy_with_softmax[axis 0] cases.)
  static const std::vector<KnownFailure> kKnown = {
  };
  return kKnown;
}

// ---------------------------------------------------------------------------------------------
// Deterministic values.

uint64_t SplitMix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

uint64_t HashString(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

// An integer in [lo, hi] from (key, i).
int64_t IntAt(uint64_t key, uint64_t i, int64_t lo, int64_t hi) {
  return lo + static_cast<int64_t>(SplitMix(key ^ SplitMix(i)) % static_cast<uint64_t>(hi - lo + 1));
}

// The values of a kind of input: the integers in [lo, hi] divided by `denominator`.
struct Grid {
  int64_t lo, hi, denominator;
};

Grid GridOf(const InputSpec& spec) {
  switch (spec.fill) {
    case Fill::kCoarse:
      return {-2, 2, 2};
    case Fill::kPositive:
      return {4, 16, 8};
    case Fill::kUnit:
      return {8, 15, 16};
    case Fill::kIds:
      return {0, spec.range - 1, 1};
    case Fill::kBool:
      return {0, 1, 1};
    default:
      return {-16, 16, 8};
  }
}

Tensor Generate(const InputSpec& spec, uint64_t key) {
  const Grid grid = GridOf(spec);
  std::vector<double> v(static_cast<size_t>(spec.type.num_elements()));
  for (size_t i = 0; i < v.size(); ++i) {
    v[i] = static_cast<double>(IntAt(key, i, grid.lo, grid.hi)) / static_cast<double>(grid.denominator);
  }
  return exec::TensorFromDoubles(spec.type, v);
}

// The whole operands of `c` (an undefined Tensor for an absent one).
absl::StatusOr<std::vector<Tensor>> WholeInputs(const OpCase& c) {
  std::vector<InputSpec> all = c.inputs;
  all.insert(all.end(), c.aux.begin(), c.aux.end());
  std::vector<Tensor> t(all.size());
  const uint64_t key = HashString(c.label);
  for (size_t i = 0; i < all.size(); ++i) {
    if (all[i].fill != Fill::kAbsent && all[i].fill != Fill::kDerived) t[i] = Generate(all[i], key + i);
  }
  for (size_t i = 0; i < all.size(); ++i) {
    if (all[i].fill != Fill::kDerived) continue;
    std::vector<Tensor> from;
    for (int j : all[i].derived_from) from.push_back(t[static_cast<size_t>(j)]);
    PDIST_ASSIGN_OR_RETURN(std::vector<Tensor> r, testing::RunOp(all[i].derived_op, from, all[i].derived_attrs));
    t[i] = r.at(static_cast<size_t>(all[i].derived_result));
    if (t[i].type() != all[i].type) {
      return absl::InternalError(absl::StrCat("derived input ", i, " is ", t[i].type().ToString(), ", the table says ",
                                              all[i].type.ToString()));
    }
  }
  t.resize(c.inputs.size());
  return t;
}

// ---------------------------------------------------------------------------------------------
// Placements.

// Every placement list of a tensor of `type` on `mesh`: per mesh dim Replicate, Shard(d) for
// each dim d that divides, Partial(sum) for a float tensor; no tensor dim sharded twice.
std::vector<std::vector<Placement>> PlacementChoices(const TensorType& type, const ProcessMesh& mesh) {
  std::vector<std::vector<Placement>> out = {{}};
  for (int64_t m = 0; m < mesh.ndim(); ++m) {
    std::vector<Placement> one = {Placement::Replicate()};
    for (int64_t d = 0; d < type.rank(); ++d) {
      const int64_t size = type.shape[static_cast<size_t>(d)];
      if (size >= mesh.dim_size(m) && size % mesh.dim_size(m) == 0) one.push_back(Placement::Shard(d));
    }
    if (ir::IsFloatingPoint(type.dtype)) {
      for (ir::ReduceType reduce : kPartialTypes) one.push_back(Placement::Partial(reduce));
    }
    std::vector<std::vector<Placement>> next;
    for (const std::vector<Placement>& prefix : out) {
      for (const Placement& p : one) {
        if (p.is_shard() && std::find(prefix.begin(), prefix.end(), p) != prefix.end()) continue;
        // One reduce type per tensor: {0: sum, 1: max} would depend on the order of reduction.
        if (p.is_partial() && std::any_of(prefix.begin(), prefix.end(),
                                          [&](const Placement& q) { return q.is_partial() && q.reduce != p.reduce; })) {
          continue;
        }
        std::vector<Placement> longer = prefix;
        longer.push_back(p);
        next.push_back(std::move(longer));
      }
    }
    out = std::move(next);
  }
  return out;
}

std::string Compact(const std::vector<Placement>& ps) {
  std::string s;
  for (const Placement& p : ps) {
    if (p.is_replicate()) {
      s += "R";
    } else if (p.is_shard()) {
      absl::StrAppend(&s, "S(", p.dim, ")");
    } else {
      s += p.reduce == ir::ReduceType::kSum ? "P" : absl::StrCat("P(", ir::ReduceTypeName(p.reduce), ")");
    }
  }
  return s;
}

// The combinations to run: indices into the mixed-radix space of `counts` (one digit per
// annotated tensor). All of them up to kMaxCombinations; beyond, those with at most one
// non-replicated tensor (digit 0 is Replicate) and a deterministic sample of the rest.
std::vector<std::vector<size_t>> Combinations(const std::vector<size_t>& counts, uint64_t key, int64_t* total) {
  int64_t n = 1;
  for (size_t c : counts) n *= static_cast<int64_t>(c);
  *total = n;
  auto decode = [&](int64_t index) {
    std::vector<size_t> digits(counts.size());
    for (size_t i = counts.size(); i-- > 0;) {
      digits[i] = static_cast<size_t>(index % static_cast<int64_t>(counts[i]));
      index /= static_cast<int64_t>(counts[i]);
    }
    return digits;
  };
  std::vector<std::vector<size_t>> out;
  if (n <= kMaxCombinations) {
    for (int64_t i = 0; i < n; ++i) out.push_back(decode(i));
    return out;
  }
  std::set<std::vector<size_t>> seen;
  auto take = [&](std::vector<size_t> d) {
    if (seen.insert(d).second) out.push_back(std::move(d));
  };
  take(std::vector<size_t>(counts.size(), 0));
  // Up to half of the budget: one tensor distributed, the others replicated (in a fixed
  // pseudo-random order when there are more); the rest: anything.
  std::vector<std::pair<uint64_t, std::vector<size_t>>> singles;
  for (size_t i = 0; i < counts.size(); ++i) {
    for (size_t v = 1; v < counts[i]; ++v) {
      std::vector<size_t> d(counts.size(), 0);
      d[i] = v;
      singles.emplace_back(SplitMix(key ^ (i * 1000 + v)), std::move(d));
    }
  }
  std::sort(singles.begin(), singles.end());
  for (auto& [order, d] : singles) {
    if (static_cast<int64_t>(out.size()) >= kMaxCombinations / 2) break;
    take(std::move(d));
  }
  for (uint64_t i = 0; static_cast<int64_t>(out.size()) < kMaxCombinations; ++i) {
    take(decode(static_cast<int64_t>(SplitMix(key + i) % static_cast<uint64_t>(n))));
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// One combination.

enum class Verdict { kOk, kRejected, kFailed };

struct Outcome {
  Verdict verdict = Verdict::kOk;
  std::string stage;    // completion | partition | run | compare
  std::string message;  // the error, or what differs
};

Outcome Failed(std::string stage, std::string message) {
  return {Verdict::kFailed, std::move(stage), std::move(message)};
}

struct Built {
  ir::Program program;
  std::vector<int64_t> fetch_ids;        // the f64 cast of each result, in result order
  std::vector<std::string> input_names;  // "in0", ... ("" for an absent operand)
};

// The one-op program: data inputs (annotated when `placements` is given), the op, and per
// result `cast(reshard(result) dist! Replicate) {dtype = f64}` (no reshard when unannotated).
// An op without inputs gets its results annotated instead.
absl::StatusOr<Built> Build(const OpCase& c, const ProcessMesh* mesh,
                            const std::vector<std::vector<Placement>>& placements) {
  Built built;
  ir::Builder b(&built.program);
  std::vector<ir::Value*> operands;
  size_t next = 0;
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    if (c.inputs[i].fill == Fill::kAbsent) {
      operands.push_back(nullptr);
      built.input_names.push_back("");
      continue;
    }
    const std::string name = absl::StrCat("in", i);
    ir::Value* v = b.Data(name, c.inputs[i].type);
    if (mesh != nullptr) PDIST_RETURN_IF_ERROR(ir::ShardTensor(v, *mesh, placements.at(next++)));
    operands.push_back(v);
    built.input_names.push_back(name);
  }
  PDIST_ASSIGN_OR_RETURN(std::vector<ir::Value*> results, b.Create(c.op, operands, c.attrs));
  for (ir::Value* r : results) {
    ir::Value* whole = r;
    if (mesh != nullptr) {
      if (c.inputs.empty()) PDIST_RETURN_IF_ERROR(ir::ShardTensor(r, *mesh, placements.at(next++)));
      PDIST_ASSIGN_OR_RETURN(whole, b.Op1("reshard", {r}));
      PDIST_RETURN_IF_ERROR(
          ir::ShardTensor(whole, *mesh, std::vector<Placement>(mesh->ndim(), Placement::Replicate())));
    }
    PDIST_ASSIGN_OR_RETURN(ir::Value * cast, b.Op1("cast", {whole}, {{"dtype", DataType::kFloat64}}));
    built.fetch_ids.push_back(cast->id());
  }
  return built;
}

// The single-rank results (f64) of the case on its whole inputs.
absl::StatusOr<std::vector<Tensor>> RunReference(const OpCase& c, const std::vector<Tensor>& whole) {
  PDIST_ASSIGN_OR_RETURN(Built built, Build(c, nullptr, {}));
  exec::ExecutorOptions options;
  options.fetch_ids = built.fetch_ids;
  PDIST_ASSIGN_OR_RETURN(exec::Executor executor, exec::Executor::Create(built.program, options));
  exec::Feeds feeds;
  for (size_t i = 0; i < whole.size(); ++i) {
    if (!built.input_names[i].empty()) feeds[built.input_names[i]] = whole[i];
  }
  exec::Workspace ws;
  PDIST_ASSIGN_OR_RETURN(exec::RunResult run, executor.Run(feeds, ws));
  std::vector<Tensor> out;
  for (int64_t id : built.fetch_ids) out.push_back(run.fetched.at(id));
  return out;
}

// Rank `rank`'s feed of `whole` under `attr`. Along Partial mesh dims, the ranks of a group get
// random pieces (multiples of 1/8, so that sums are exact) that reduce to the whole: the rank at
// coordinate 0 of every Partial dim gets whole − Σ the others (sum), G·whole − Σ the others
// (avg over a group of G), or the whole itself while the others get less (max).
absl::StatusOr<Tensor> FeedFor(const Tensor& whole, const DistAttr& attr, int64_t rank, uint64_t key) {
  DistAttr sharding = attr;
  sharding.partial.clear();
  if (attr.partial.empty()) return engine::SliceForRank(whole, sharding, rank);
  const ir::ReduceType reduce = attr.partial.begin()->second;  // one type per tensor (PlacementChoices)
  const std::vector<int64_t> coord = attr.mesh.CoordinateOf(rank);
  // The index of this rank in its Partial group, and the group's size.
  int64_t groups = 1, mine = 0;
  for (const auto& [m, type] : attr.partial) {
    mine = mine * attr.mesh.dim_size(m) + coord[static_cast<size_t>(m)];
    groups *= attr.mesh.dim_size(m);
  }
  const InputSpec noise_spec = Spec(whole.type(), reduce == ir::ReduceType::kMax ? Fill::kPositive : Fill::kFloat);
  auto noise = [&](int64_t g) { return exec::TensorToDoubles(Generate(noise_spec, key + static_cast<uint64_t>(g))); };
  std::vector<double> v = exec::TensorToDoubles(whole);
  if (reduce == ir::ReduceType::kMax) {
    if (mine != 0) {
      const std::vector<double> n = noise(mine);
      for (size_t i = 0; i < v.size(); ++i) v[i] -= n[i];
    }
  } else if (mine != 0) {
    v = noise(mine);
  } else {
    if (reduce == ir::ReduceType::kAvg) {
      for (double& x : v) x *= static_cast<double>(groups);
    }
    for (int64_t g = 1; g < groups; ++g) {
      const std::vector<double> n = noise(g);
      for (size_t i = 0; i < v.size(); ++i) v[i] -= n[i];
    }
  }
  return engine::SliceForRank(exec::TensorFromDoubles(whole.type(), v), sharding, rank);
}

// "" when `got` matches `want`, else where and by how much it differs.
std::string Compare(const Tensor& got, const Tensor& want) {
  if (got.type() != want.type()) return absl::StrCat("got ", got.type().ToString(), ", want ", want.type().ToString());
  const std::vector<double> g = exec::TensorToDoubles(got);
  const std::vector<double> w = exec::TensorToDoubles(want);
  double scale = 0;
  for (double x : w) {
    if (std::isfinite(x)) scale = std::max(scale, std::abs(x));
  }
  int64_t bad = 0, first = -1;
  for (size_t i = 0; i < w.size(); ++i) {
    const bool same = (std::isnan(g[i]) && std::isnan(w[i])) || g[i] == w[i] ||
                      std::abs(g[i] - w[i]) <= kRelTol * (std::abs(w[i]) + scale);
    if (same) continue;
    if (first < 0) first = static_cast<int64_t>(i);
    ++bad;
  }
  if (bad == 0) return "";
  const auto i = static_cast<size_t>(first);
  return absl::StrCat(bad, " of ", w.size(), " elements differ, first at flat index ", first, ": got ", g[i], ", want ",
                      w[i]);
}

// The rank threads of one mesh, each with its communicators, kept for every combination:
// creating threads and sub-communicators anew would cost more than most combinations do. The
// first rank to fail aborts every communicator, so no rank waits on a collective its peers will
// never join; the communicators are then made afresh.
class RankPool {
 public:
  using Task = std::function<absl::Status(int64_t rank, const std::shared_ptr<exec::comm::CommGroups>& groups)>;

  explicit RankPool(ProcessMesh mesh) : mesh_(std::move(mesh)), n_(mesh_.size()) {
    for (int64_t r = 0; r < n_; ++r) threads_.emplace_back([this, r] { Worker(r); });
  }
  ~RankPool() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    start_.notify_all();
    for (std::thread& t : threads_) t.join();
  }

  // Runs `task` on every rank's thread at once; one status per rank.
  std::vector<absl::Status> Run(const Task& task) {
    if (!connected_) {
      const absl::Status s = Connect();
      if (!s.ok()) return std::vector<absl::Status>(static_cast<size_t>(n_), s);
    }
    std::vector<absl::Status> statuses = Dispatch([&](int64_t r) { return task(r, groups_[static_cast<size_t>(r)]); });
    for (const absl::Status& s : statuses) {
      if (!s.ok()) connected_ = false;  // out of step, or aborted: make new communicators
    }
    return statuses;
  }

 private:
  absl::Status Connect() {
    auto world = std::make_shared<exec::comm::InprocWorld>(static_cast<int>(n_));
    exec::comm::CommConfig config;
    config.timeout = absl::Seconds(30);
    comms_.clear();
    groups_.assign(static_cast<size_t>(n_), nullptr);
    for (int64_t r = 0; r < n_; ++r) {
      PDIST_ASSIGN_OR_RETURN(std::shared_ptr<exec::comm::Communicator> comm,
                             exec::comm::CreateInprocCommunicator(world, static_cast<int>(r), config));
      comms_.push_back(std::move(comm));
    }
    const std::vector<absl::Status> statuses = Dispatch([&](int64_t r) -> absl::Status {
      PDIST_ASSIGN_OR_RETURN(groups_[static_cast<size_t>(r)],
                             exec::comm::CommGroups::Create(comms_[static_cast<size_t>(r)], {mesh_}));
      return absl::OkStatus();
    });
    for (const absl::Status& s : statuses) PDIST_RETURN_IF_ERROR(s);
    connected_ = true;
    return absl::OkStatus();
  }

  std::vector<absl::Status> Dispatch(std::function<absl::Status(int64_t)> fn) {
    std::unique_lock<std::mutex> lock(mu_);
    fn_ = std::move(fn);
    statuses_.assign(static_cast<size_t>(n_), absl::OkStatus());
    pending_ = n_;
    ++generation_;
    start_.notify_all();
    done_.wait(lock, [&] { return pending_ == 0; });
    return statuses_;
  }

  void Worker(int64_t r) {
    exec::SetKernelThreadsOfThisThread(1);
    int64_t seen = 0;
    while (true) {
      std::function<absl::Status(int64_t)>* fn;
      {
        std::unique_lock<std::mutex> lock(mu_);
        start_.wait(lock, [&] { return stop_ || generation_ != seen; });
        if (stop_) return;
        seen = generation_;
        fn = &fn_;
      }
      absl::Status s = (*fn)(r);
      if (!s.ok()) {
        for (auto& comm : comms_) comm->Abort();
      }
      std::lock_guard<std::mutex> lock(mu_);
      statuses_[static_cast<size_t>(r)] = std::move(s);
      if (--pending_ == 0) done_.notify_all();
    }
  }

  const ProcessMesh mesh_;
  const int64_t n_;
  bool connected_ = false;
  std::vector<std::shared_ptr<exec::comm::Communicator>> comms_;
  std::vector<std::shared_ptr<exec::comm::CommGroups>> groups_;
  std::mutex mu_;
  std::condition_variable start_, done_;
  std::function<absl::Status(int64_t)> fn_;
  std::vector<absl::Status> statuses_;
  int64_t pending_ = 0, generation_ = 0;
  bool stop_ = false;
  std::vector<std::thread> threads_;
};

Outcome RunCombination(const OpCase& c, const ProcessMesh& mesh, const std::vector<std::vector<Placement>>& placements,
                       const std::vector<Tensor>& whole, const std::vector<Tensor>& reference, uint64_t key,
                       passes::ReshardPlanCache& plans, RankPool& pool) {
  absl::StatusOr<Built> built = Build(c, &mesh, placements);
  if (!built.ok()) return Failed("build", std::string(built.status().message()));
  ir::Program& global = built->program;

  absl::StatusOr<passes::CompletionReport> completed = passes::CompleteDistAttrs(global);
  if (!completed.ok()) {
    const bool internal = absl::IsInternal(completed.status());
    return {internal ? Verdict::kFailed : Verdict::kRejected, "completion", completed.status().ToString()};
  }

  const int64_t n = mesh.size();
  std::vector<ir::Program> locals;
  for (int64_t r = 0; r < n; ++r) {
    absl::StatusOr<ir::Program> local = passes::PartitionProgram(global, r, plans);
    if (!local.ok()) {
      // A local shape that the op cannot compute from its local operands means the rule promised
      // a layout the kernel does not produce: a wrong rule, caught before it ran.
      const bool wrong = absl::IsInternal(local.status()) ||
                         absl::StrContains(local.status().message(), "the SPMD rule and the kernel disagree");
      return {wrong ? Verdict::kFailed : Verdict::kRejected, "partition", local.status().ToString()};
    }
    locals.push_back(*std::move(local));
  }

  std::vector<exec::Feeds> feeds(static_cast<size_t>(n));
  for (size_t i = 0; i < whole.size(); ++i) {
    if (built->input_names[i].empty()) continue;
    const ir::Value* arg = global.FindArgument(built->input_names[i]);
    for (int64_t r = 0; r < n; ++r) {
      absl::StatusOr<Tensor> piece = FeedFor(whole[i], *arg->dist_attr(), r, key * 131 + i * 17);
      if (!piece.ok()) return Failed("feed", piece.status().ToString());
      feeds[static_cast<size_t>(r)][built->input_names[i]] = *std::move(piece);
    }
  }

  std::vector<std::vector<Tensor>> results(static_cast<size_t>(n));
  const std::vector<absl::Status> errors =
      pool.Run([&](int64_t r, const std::shared_ptr<exec::comm::CommGroups>& groups) -> absl::Status {
        exec::ExecutorOptions options;
        options.fetch_ids = built->fetch_ids;
        options.comm_groups = groups;
        PDIST_ASSIGN_OR_RETURN(exec::Executor executor,
                               exec::Executor::Create(locals[static_cast<size_t>(r)], options));
        exec::Workspace ws;
        PDIST_ASSIGN_OR_RETURN(exec::RunResult run, executor.Run(feeds[static_cast<size_t>(r)], ws));
        for (int64_t id : built->fetch_ids) {
          auto it = run.fetched.find(id);
          if (it == run.fetched.end()) return absl::InternalError(absl::StrCat("value %", id, " was not fetched"));
          results[static_cast<size_t>(r)].push_back(it->second);
        }
        return absl::OkStatus();
      });
  // The first rank's own error, not a peer's abort.
  for (bool own : {true, false}) {
    for (int64_t r = 0; r < n; ++r) {
      const absl::Status& s = errors[static_cast<size_t>(r)];
      if (!s.ok() && (!own || !absl::IsAborted(s))) return Failed("run", absl::StrCat("rank ", r, ": ", s.ToString()));
    }
  }

  const ir::OpDef* def = ir::OpRegistry::Global().Find(c.op);
  for (int64_t r = 0; r < n; ++r) {
    for (size_t k = 0; k < reference.size(); ++k) {
      const std::string diff = Compare(results[static_cast<size_t>(r)][k], reference[k]);
      if (diff.empty()) continue;
      const std::string name =
          def->outputs.size() > k ? def->outputs[k].name : absl::StrCat(def->outputs.back().name, k);
      const ir::Value* produced = global.FindValue(built->fetch_ids[k]);
      const ir::Operation* reshard = produced->producer()->operand(0)->producer();
      const ir::Value* result = reshard != nullptr && reshard->type() == "reshard" ? reshard->operand(0) : nullptr;
      return Failed("compare", absl::StrCat("wrong numbers: result ", k, " (", name, ") on rank ", r,
                                            result && result->dist_attr()
                                                ? absl::StrCat(" [computed as ",
                                                               passes::CompactPlacements(*result->dist_attr()), "]")
                                                : "",
                                            ": ", diff));
    }
  }
  return {};
}

// ---------------------------------------------------------------------------------------------

// A rejection's message without what differs between combinations (value ids, ranks).
std::string Reason(const Outcome& o) {
  std::string text = absl::StrCat(o.stage, ": ", o.message);
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if ((text[i] == '%' || text[i] == '#') && i + 1 < text.size() &&
        std::isdigit(static_cast<unsigned char>(text[i + 1]))) {
      out += text[i];
      out += 'N';
      while (i + 1 < text.size() && std::isdigit(static_cast<unsigned char>(text[i + 1]))) ++i;
      continue;
    }
    out += text[i];
  }
  for (const char* rank : {"rank 0", "rank 1", "rank 2", "rank 3"}) {
    for (size_t at = out.find(rank); at != std::string::npos; at = out.find(rank)) out.replace(at, 6, "rank R");
  }
  return out.size() > 160 ? out.substr(0, 160) + "…" : out;
}

std::string InputName(const ir::OpDef& def, size_t i) {
  if (i < def.inputs.size() && !def.inputs[i].variadic) return def.inputs[i].name;
  return absl::StrCat(def.inputs.back().name, i - (def.inputs.size() - 1));
}

// Cases whose every distributed layout is rightly rejected, with the reason; everything else must
// accept at least one (BruteForce::CheckOnMesh).
bool AcceptsOnlyReplicated(const std::string& label) {
  static const std::map<std::string, std::string> kOnlyReplicated = {};
  return kOnlyReplicated.count(label) > 0;
}

TEST(SpmdBruteForce, TableCoversEveryOp) {
  std::set<std::string> covered;
  for (const OpCase& c : Cases()) covered.insert(c.op);
  std::vector<std::string> missing;
  for (const std::string& name : ir::OpRegistry::Global().Names()) {
    if (!IsLocalOnly(name) && !covered.count(name)) missing.push_back(name);
  }
  EXPECT_TRUE(missing.empty()) << "ops without a brute-force case in tests/spmd/spmd_bruteforce_test.cc: "
                               << absl::StrJoin(missing, ", ");
}

// Runs the cases and keeps the tally: the summary line of each case, the failures, the
// rejections by reason, and which known failures were seen.
class BruteForce {
 public:
  BruteForce() : known_hits_(KnownFailures().size(), 0) {
    meshes_ = {ProcessMesh::Range({2}, {"x"}), ProcessMesh::Range({2, 2}, {"x", "y"})};
    for (const ProcessMesh& mesh : meshes_) pools_.push_back(std::make_unique<RankPool>(mesh));
  }

  void Check(const OpCase& c) {
    const ir::OpDef* def = ir::OpRegistry::Global().Find(c.op);
    if (def == nullptr) {
      failures_.push_back(absl::StrCat(c.label, ": op '", c.op, "' is not registered"));
      return;
    }
    absl::StatusOr<std::vector<Tensor>> whole = WholeInputs(c);
    if (!whole.ok()) {
      failures_.push_back(absl::StrCat(c.label, ": cannot make its inputs: ", whole.status().ToString()));
      return;
    }
    absl::StatusOr<std::vector<Tensor>> reference = RunReference(c, *whole);
    if (!reference.ok()) {
      failures_.push_back(absl::StrCat(c.label, ": the single-rank run fails: ", reference.status().ToString()));
      return;
    }
    // The tensors whose placements are enumerated: the present operands, or the results of an op
    // without operands (full).
    std::vector<TensorType> annotated;
    std::vector<std::string> names;
    if (c.inputs.empty()) {
      for (size_t k = 0; k < reference->size(); ++k) {
        annotated.push_back({(*reference)[k].shape(), DataType::kFloat64});
        names.push_back(def->outputs.size() > k ? def->outputs[k].name : absl::StrCat("out", k));
      }
    }
    for (size_t i = 0; i < c.inputs.size(); ++i) {
      if (c.inputs[i].fill == Fill::kAbsent) continue;
      annotated.push_back(c.inputs[i].type);
      names.push_back(InputName(*def, i));
    }
    std::string line = c.label;
    for (size_t mi = 0; mi < meshes_.size(); ++mi) {
      absl::StrAppend(&line, "  ", CheckOnMesh(c, mi, annotated, names, *whole, *reference));
    }
    summary_.push_back(line);
  }

  const std::vector<std::string>& failures() const { return failures_; }

  std::string Report(double seconds) const {
    std::vector<std::string> stale;
    for (size_t k = 0; k < KnownFailures().size(); ++k) {
      const KnownFailure& known = KnownFailures()[k];
      if (known_hits_[k] == 0)
        stale.push_back(absl::StrCat(known.label, " ", known.mesh, " ", known.placements, " (", known.why, ")"));
    }
    return absl::StrCat(
        "brute-force SPMD check: ", summary_.size(), " cases, ", checked_, " combinations in ", seconds, " s (at most ",
        kMaxCombinations, " per case and mesh; ", sampled_, " case/mesh pairs sampled)\n  ",
        absl::StrJoin(summary_, "\n  "), "\nrejected combinations, by reason:\n  ", absl::StrJoin(rejections_, "\n  "),
        stale.empty() ? ""
                      : absl::StrCat("\nstale known-failure entries (their bug seems fixed; remove them):\n  ",
                                     absl::StrJoin(stale, "\n  ")));
  }

 private:
  // Every combination of the case on mesh `mi`; returns the summary of that mesh.
  std::string CheckOnMesh(const OpCase& c, size_t mi, const std::vector<TensorType>& annotated,
                          const std::vector<std::string>& names, const std::vector<Tensor>& whole,
                          const std::vector<Tensor>& reference) {
    const ProcessMesh& mesh = meshes_[mi];
    const std::string mesh_name = ir::ShapeToString(mesh.shape());
    std::vector<std::vector<std::vector<Placement>>> choices;
    std::vector<size_t> counts;
    for (const TensorType& t : annotated) {
      choices.push_back(PlacementChoices(t, mesh));
      counts.push_back(choices.back().size());
    }
    int64_t total = 0, ok = 0, rejected = 0, known = 0, failed = 0;
    bool replicated_ok = false, distributed_ok = false;
    std::string replicated_verdict = "not run";
    std::map<std::string, int64_t> reasons;
    const uint64_t key = HashString(c.label + mesh_name);
    const std::vector<std::vector<size_t>> combos = Combinations(counts, key, &total);
    for (size_t ci = 0; ci < combos.size(); ++ci) {
      std::vector<std::vector<Placement>> placements;
      std::vector<std::string> parts;
      for (size_t t = 0; t < annotated.size(); ++t) {
        placements.push_back(choices[t][combos[ci][t]]);
        parts.push_back(absl::StrCat(names[t], "=", Compact(placements.back())));
      }
      const std::string where = absl::StrJoin(parts, ", ");
      const Outcome o = RunCombination(c, mesh, placements, whole, reference, key + ci, plans_, *pools_[mi]);
      const bool all_replicated =
          std::all_of(combos[ci].begin(), combos[ci].end(), [](size_t choice) { return choice == 0; });
      if (all_replicated) replicated_verdict = absl::StrCat(o.stage, ": ", o.message);
      if (o.verdict == Verdict::kOk) {
        ++ok;
        (all_replicated ? replicated_ok : distributed_ok) = true;
      } else if (o.verdict == Verdict::kRejected) {
        ++rejected;
        ++reasons[Reason(o)];
      } else if (IsKnown(c.label, mesh_name, where, o.message)) {
        ++known;
      } else {
        ++failed;
        failures_.push_back(
            absl::StrCat(c.label, " on mesh ", mesh_name, " with ", where, ": ", o.stage, ": ", o.message));
      }
    }
    // A rule that refuses everything must not pass: every op runs on replicated inputs, and
    // accepts at least one distributed layout unless the table says why it cannot.
    if (!replicated_ok) {
      failures_.push_back(absl::StrCat(c.label, " on mesh ", mesh_name, ": every input Replicate is not accepted (",
                                       replicated_verdict, ")"));
    }
    if (!distributed_ok && !AcceptsOnlyReplicated(c.label)) {
      failures_.push_back(absl::StrCat(c.label, " on mesh ", mesh_name, ": none of the ", combos.size(),
                                       " layouts with a distributed input is accepted"));
    }
    const auto run = static_cast<int64_t>(combos.size());
    checked_ += run;
    if (run < total) ++sampled_;
    for (const auto& [reason, count] : reasons) {
      rejections_.push_back(absl::StrCat(c.label, " ", mesh_name, ": ", count, "× ", reason));
    }
    return absl::StrCat(mesh_name, ": ", run, run < total ? absl::StrCat(" of ", total) : "", " run, ", ok, " ok, ",
                        rejected, " rejected", known ? absl::StrCat(", ", known, " known") : "",
                        failed ? absl::StrCat(", ", failed, " FAILED") : "");
  }

  bool IsKnown(const std::string& label, const std::string& mesh, const std::string& where,
               const std::string& message) {
    for (size_t k = 0; k < KnownFailures().size(); ++k) {
      const KnownFailure& known = KnownFailures()[k];
      if (label == known.label && (std::string(known.mesh).empty() || mesh == known.mesh) &&
          absl::StrContains(where, known.placements) && absl::StrContains(message, known.message)) {
        ++known_hits_[k];
        return true;
      }
    }
    return false;
  }

  std::vector<ProcessMesh> meshes_;
  std::vector<std::unique_ptr<RankPool>> pools_;
  passes::ReshardPlanCache plans_;
  std::vector<std::string> summary_, failures_, rejections_;
  std::vector<int64_t> known_hits_;
  int64_t checked_ = 0, sampled_ = 0;
};

TEST(SpmdBruteForce, EveryOpEveryPlacement) {
  const auto start = std::chrono::steady_clock::now();
  BruteForce check;
  for (const OpCase& c : Cases()) check.Check(c);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cout << check.Report(seconds) << std::endl;
  EXPECT_TRUE(check.failures().empty()) << check.failures().size()
                                        << " failing combinations (op, mesh, placements):\n  "
                                        << absl::StrJoin(check.failures(), "\n  ");
}

}  // namespace
}  // namespace pdist::spmd_bruteforce_test

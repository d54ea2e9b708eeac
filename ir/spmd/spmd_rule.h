// The SPMD rule interface: how an op's operands and results may be distributed.
//
// A rule sees each tensor as its global shape plus its distribution on a mesh of a given shape
// (process ids do not matter to a rule). Forward: from the inputs' distributions, the
// distributions the op needs for its inputs and the ones its outputs get. Reverse: from the
// outputs' (and inputs') distributions, the same pair. Rules are pure functions — no search,
// no global state — as Paddle's infer_spmd functions are.
//
//   matmul forward, mesh [2,2]:  x [64,32] [1,0], y [32,48] [-1,-1]
//     → inputs  x [1,0], y [0,-1]
//     → outputs out [1,-1] partial {0: sum}          ("mk,kn->mn  k→Partial")
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "ir/attribute.h"
#include "ir/dist/dist_attr.h"
#include "ir/types.h"

namespace pdist::ir {

struct TensorType;

// One tensor as a rule sees it. An absent optional operand has shape [0] and an empty mapping.
struct TensorDistSpec {
  Shape shape;
  DimsMapping dims_mapping;
  PartialDims partial;

  bool absent() const { return shape.size() == 1 && shape[0] == 0 && dims_mapping.empty(); }
  friend bool operator==(const TensorDistSpec&, const TensorDistSpec&) = default;
};

struct SpmdContext {
  std::vector<int64_t> mesh_shape;
  const AttributeMap& attrs;
};

// Entries in operand / result order (a variadic list flattened in place).
struct SpmdResult {
  std::vector<TensorDistSpec> inputs;
  std::vector<TensorDistSpec> outputs;
};

using InferSpmdFn = std::function<absl::StatusOr<SpmdResult>(const std::vector<TensorDistSpec>& inputs,
                                                              const SpmdContext& ctx)>;
using InferSpmdReverseFn = std::function<absl::StatusOr<SpmdResult>(
    const std::vector<TensorDistSpec>& inputs, const std::vector<TensorDistSpec>& outputs, const SpmdContext& ctx)>;
// The rule in einsum style for these operand types, e.g. "mk,kn->mn  k→Partial".
using DescribeSpmdFn = std::function<std::string(const std::vector<const TensorType*>& inputs, const AttributeMap& attrs)>;

// Checks every spec against the mesh (mapping length = rank, mesh dims in range, no mesh dim
// used twice); errors name the operand index.
absl::Status ValidateSpecs(const std::vector<TensorDistSpec>& specs, const std::vector<int64_t>& mesh_shape,
                           const char* what);

}  // namespace pdist::ir

// pdist-spmd's JSON: a request names an op, its attributes, a mesh shape, a direction and the
// distribution of each input (and, in reverse, each output); the response is the op's SPMD rule
// applied to them. Names and operand orders follow Paddle's SPMD rules, so a Paddle case pastes
// over.
//
//   {"op": "matmul", "attrs": {"trans_y": false}, "mesh_shape": [2, 2], "direction": "forward",
//    "inputs": [{"shape": [64, 32], "dims_mapping": [1, 0], "partial_dims": []},
//               {"shape": [32, 48], "dims_mapping": [-1, -1]}]}
//   → {"inputs":  [{"dims_mapping": [1, 0], "partial_dims": []}, {"dims_mapping": [0, -1], "partial_dims": []}],
//      "outputs": [{"dims_mapping": [1, -1], "partial_dims": [0]}]}
//
// An input or output entry: "shape" (required), "dims_mapping" (required, one entry per dim,
// -1 = replicated), "partial_dims" (optional: mesh dims, each an integer for a sum or
// {"dim": 1, "type": "avg"|"max"|"sum"}). An absent optional input is null or shape [0] with an
// empty mapping. A variadic slot (concat's x, split's out) may be given as a list of entries and
// is answered in the same form; a variadic output is always answered as a list. "describe": true
// adds the rule's einsum-style text ("rule": "mk,kn->mn  k→Partial").
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "ir/attribute.h"
#include "ir/op_def.h"
#include "ir/spmd/spmd_rule.h"
#include "passes/spmd_call.h"

namespace pdist::tools {

struct SpmdRequest {
  const ir::OpDef* def = nullptr;
  ir::AttributeMap attrs;  // normalised: defaults filled in
  std::vector<int64_t> mesh_shape;
  passes::SpmdDirection direction = passes::SpmdDirection::kForward;
  std::vector<ir::TensorDistSpec> inputs;  // flattened, in operand order
  std::vector<ir::TensorDistSpec> outputs;
  std::vector<int> input_groups;  // per request entry: -1 a single spec, else how many it listed
  bool describe = false;
};

// InvalidArgument naming the field ("inputs[1].dims_mapping: ..."), NotFound for an unknown op
// (with close names), and the checks of the mesh: a dims_mapping of the wrong length, a mesh dim
// used twice or out of range, each naming the input or output and the op's name for it.
absl::StatusOr<SpmdRequest> ParseSpmdRequest(const nlohmann::json& request);

// One request → its response: {"inputs": [...], "outputs": [...]} or {"error": "..."}.
nlohmann::json EvaluateSpmdRequest(const nlohmann::json& request);

// A whole stdin: one request (→ one response object) or an array of them (→ an array of
// responses, in order). Text that is not JSON is an error for the caller to report.
absl::StatusOr<nlohmann::json> EvaluateSpmdText(const std::string& text);

}  // namespace pdist::tools

// RunSpmdRule: one op's SPMD rule, called with the checks that the completion pass and
// pdist-spmd both need — the rule exists, the specs going in fit the mesh, and the rule answers
// with one spec per operand and per result, each fitting its tensor.
//
//   SpmdCall call;
//   call.def = ir::OpRegistry::Global().Find("matmul");
//   call.attrs = &attrs;                                   // trans_x = trans_y = false
//   call.mesh_shape = {2, 2};
//   call.inputs = {{{64, 32}, {1, 0}, {}}, {{32, 48}, {-1, -1}, {}}};
//   call.result_shapes = {{64, 48}};
//   PDIST_ASSIGN_OR_RETURN(ir::SpmdResult r, RunSpmdRule(call));
//   // r.inputs: x [1,0], y [0,-1];  r.outputs: out [1,-1] partial {0: sum}
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "ir/op_def.h"
#include "ir/spmd/spmd_rule.h"

namespace pdist::passes {

enum class SpmdDirection : int8_t { kForward, kReverse };
const char* SpmdDirectionName(SpmdDirection direction);  // forward | reverse

struct SpmdCall {
  const ir::OpDef* def = nullptr;
  const ir::AttributeMap* attrs = nullptr;  // normalised (every attribute present)
  std::vector<int64_t> mesh_shape;
  // A mesh of that shape, when the caller has one (completion); otherwise one is built.
  const ir::ProcessMesh* mesh = nullptr;
  // The caller made the specs from verified DistAttrs (completion): skip checking them again.
  bool specs_verified = false;
  SpmdDirection direction = SpmdDirection::kForward;
  std::vector<ir::TensorDistSpec> inputs;   // one per operand; absent: shape [0], empty mapping
  std::vector<ir::TensorDistSpec> outputs;  // reverse only: one per result
  // Forward: the results' shapes, when the caller knows them (a program does); without them the
  // rule's answer is checked against the shapes it gives itself. Reverse: taken from outputs.
  std::optional<std::vector<ir::Shape>> result_shapes;
};

// Errors: Unimplemented "op 'foo' has no forward SPMD rule" when the slot is empty;
// InvalidArgument naming the input or output whose spec does not fit the mesh; the rule's own
// error with the op's name in front; Internal when the rule answers with the wrong number of
// specs or a mapping of the wrong length (a bug in the rule, named).
// The returned specs carry the tensors' shapes (rules may leave out the ones the caller knows).
absl::StatusOr<ir::SpmdResult> RunSpmdRule(const SpmdCall& call);

}  // namespace pdist::passes

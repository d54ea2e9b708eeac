// RunSpmdRule: checks around one call of an op's SPMD rule.
#include "passes/spmd_call.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "ir/status.h"

namespace pdist::passes {

const char* SpmdDirectionName(SpmdDirection direction) {
  return direction == SpmdDirection::kForward ? "forward" : "reverse";
}

namespace {

// Checks specs against one mesh with DistAttr::Verify (the one place that knows what a valid
// mapping is), reusing one DistAttr so that no mesh is built or copied per spec: completion
// calls rules tens of thousands of times.
class SpecChecker {
 public:
  explicit SpecChecker(const ir::ProcessMesh& mesh) : probe_{mesh, {}, {}} {}

  absl::Status Check(const ir::TensorDistSpec& spec) {
    if (spec.absent()) return absl::OkStatus();
    probe_.dims_mapping = spec.dims_mapping;
    probe_.partial = spec.partial;
    return probe_.Verify(spec.shape);
  }

 private:
  ir::DistAttr probe_;
};

std::string RuleName(const SpmdCall& call) {
  return absl::StrCat("the ", SpmdDirectionName(call.direction), " SPMD rule of '", call.def->name, "'");
}

absl::Status CheckRequest(const std::vector<ir::TensorDistSpec>& specs, const char* side, SpecChecker& checker) {
  for (size_t i = 0; i < specs.size(); ++i) {
    absl::Status valid = checker.Check(specs[i]);
    if (!valid.ok()) return absl::InvalidArgumentError(absl::StrCat(side, " ", i, ": ", valid.message()));
  }
  return absl::OkStatus();
}

// The rule's answer for one side (inputs or outputs): one spec per tensor, each fitting its
// tensor's shape on the mesh. Rules need not fill in shapes; the answer gets them here.
template <typename ShapeAt>
absl::Status CheckAnswer(const SpmdCall& call, size_t count, ShapeAt shape_at, const char* side,
                         std::vector<ir::TensorDistSpec>& answer, SpecChecker& checker) {
  if (answer.size() != count) {
    return absl::InternalError(
        absl::StrCat(RuleName(call), " returned ", answer.size(), " ", side, " specs for ", count, " ", side, "s"));
  }
  for (size_t i = 0; i < answer.size(); ++i) {
    const ir::Shape& shape = shape_at(i);
    if (answer[i].shape != shape) answer[i].shape = shape;
    absl::Status valid = checker.Check(answer[i]);
    if (!valid.ok()) {
      return absl::InternalError(absl::StrCat(RuleName(call), " returned a bad spec for ", side, " ", i, ": ", valid.message()));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ir::SpmdResult> RunSpmdRule(const SpmdCall& call) {
  const ir::OpDef& def = *call.def;
  const bool forward = call.direction == SpmdDirection::kForward;
  if (forward ? !def.infer_spmd : !def.infer_spmd_reverse) {
    return absl::UnimplementedError(absl::StrCat("op '", def.name, "' has no ", SpmdDirectionName(call.direction),
                                                 " SPMD rule"));
  }
  std::optional<ir::ProcessMesh> built;
  if (call.mesh == nullptr) {
    PDIST_RETURN_IF_ERROR(ir::ValidateSpecs({}, call.mesh_shape, "input"));  // the mesh shape itself
    built = ir::ProcessMesh::Range(call.mesh_shape);
  }
  SpecChecker checker(call.mesh != nullptr ? *call.mesh : *built);
  if (!call.specs_verified) {
    PDIST_RETURN_IF_ERROR(CheckRequest(call.inputs, "input", checker));
    if (!forward) PDIST_RETURN_IF_ERROR(CheckRequest(call.outputs, "output", checker));
  }

  static const ir::AttributeMap kNoAttrs;
  const ir::SpmdContext ctx{call.mesh_shape, call.attrs ? *call.attrs : kNoAttrs};
  absl::StatusOr<ir::SpmdResult> result =
      forward ? def.infer_spmd(call.inputs, ctx) : def.infer_spmd_reverse(call.inputs, call.outputs, ctx);
  if (!result.ok()) return WithContext(result.status(), RuleName(call));
  auto input_shape = [&call](size_t i) -> const ir::Shape& { return call.inputs[i].shape; };
  PDIST_RETURN_IF_ERROR(CheckAnswer(call, call.inputs.size(), input_shape, "input", result->inputs, checker));
  // Output shapes: the caller's, else (forward without them) the rule's own.
  const bool given = !forward || call.result_shapes;
  const size_t outputs = !forward ? call.outputs.size() : given ? call.result_shapes->size() : result->outputs.size();
  auto output_shape = [&](size_t i) -> const ir::Shape& {
    return !forward ? call.outputs[i].shape : given ? (*call.result_shapes)[i] : result->outputs[i].shape;
  };
  PDIST_RETURN_IF_ERROR(CheckAnswer(call, outputs, output_shape, "output", result->outputs, checker));
  return result;
}

}  // namespace pdist::passes

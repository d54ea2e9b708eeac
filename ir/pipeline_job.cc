// Names of op roles and pipeline jobs.
#include "ir/pipeline_job.h"

#include "absl/strings/str_cat.h"

namespace pdist::ir {

const char* OpRoleName(OpRole role) {
  switch (role) {
    case OpRole::kForward: return "forward";
    case OpRole::kBackward: return "backward";
    case OpRole::kBackwardWeight: return "backward_weight";
    case OpRole::kOptimizer: return "optimizer";
    case OpRole::kPrologue: return "prologue";
  }
  return "?";
}

std::optional<OpRole> ParseOpRole(std::string_view name) {
  for (OpRole role : {OpRole::kForward, OpRole::kBackward, OpRole::kBackwardWeight, OpRole::kOptimizer,
                      OpRole::kPrologue}) {
    if (name == OpRoleName(role)) return role;
  }
  return std::nullopt;
}

const char* JobKindName(JobKind kind) {
  switch (kind) {
    case JobKind::kForward: return "forward";
    case JobKind::kBackward: return "backward";
    case JobKind::kBackwardInput: return "backward_input";
    case JobKind::kBackwardWeight: return "backward_weight";
    case JobKind::kOptimizer: return "optimizer";
  }
  return "?";
}

std::string PipelineJob::ToString() const {
  if (kind == JobKind::kOptimizer) return "O";
  const char* letter = kind == JobKind::kForward ? "F" : kind == JobKind::kBackwardWeight ? "W" : "B";
  std::string text = absl::StrCat(letter, micro_batch);
  if (chunk != 0) absl::StrAppend(&text, ".", chunk);
  return text;
}

}  // namespace pdist::ir

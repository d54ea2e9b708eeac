// Pipeline text: the `--passes=` form of a list of passes with their options.
//
//   autodiff,optimizer{type=adamw,beta1=0.8}
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "passes/pass.h"

namespace pdist::passes {

struct PassSpec {
  std::string name;
  PassOptions options;
  friend bool operator==(const PassSpec&, const PassSpec&) = default;
};

// Grammar: pipeline := [pass {',' pass}]; pass := NAME ['{' [KEY '=' VALUE {',' KEY '=' VALUE}] '}'].
// Names and keys are [A-Za-z0-9_.-]+; a value is any text without ',', '{', '}' or blanks at
// its ends. Blanks between items are ignored. Errors give the column:
//   ParsePipeline("autodiff,optimizer{type")  → "pipeline column 24: expected '=' after option 'type'"
absl::StatusOr<std::vector<PassSpec>> ParsePipeline(std::string_view text);

// The inverse of ParsePipeline; options in key order: "autodiff,optimizer{type=adamw}".
std::string PrintPipeline(const std::vector<PassSpec>& specs);

}  // namespace pdist::passes

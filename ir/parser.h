// Textual IR parser: reads what PrintProgram writes (print → parse → print is identical).
#pragma once

#include <string_view>

#include "absl/status/statusor.h"
#include "ir/attribute.h"
#include "ir/program.h"

namespace pdist::ir {

// Parses one `program { ... }`. Value names in the text may be any `%name` (`%0`, `%x`);
// the program numbers values in definition order. Op types must be registered, attributes are
// normalised (defaults filled in) and the result types written in the text must equal the
// op's inferred ones. `//` comments and blank lines are allowed anywhere between tokens.
//
//   absl::StatusOr<Program> p = ParseProgram(R"(
//     program {
//       %x = data "x" : f32[8,64]
//       %y = relu(%x) : f32[8,64]
//     })");
//
// Errors are InvalidArgument (NotFound for an unknown op type) and start with the position:
// "line 4:17: expected ')' after operands, got '{'". The program is not verified as a whole
// (loss type, updates): call VerifyProgram for that.
absl::StatusOr<Program> ParseProgram(std::string_view text);

// One attribute value in the form AttributeToString writes, read back to the same kind:
//   ParseAttribute("[1, 2]") → std::vector<int64_t>{1, 2};  ParseAttribute("double[]") → {} (double list)
//   ParseAttribute("-inf"), ParseAttribute("\"a\\\"b\""), ParseAttribute("bf16")
absl::StatusOr<Attribute> ParseAttribute(std::string_view text);

// One DistAttr in the form DistAttr::ToString writes (the text after ` dist ` in a program):
//   ParseDistAttr("{mesh: [2,2] [x,y], dims_mapping: [0,-1], partial: {1: sum}}")
// The mesh is validated (ProcessMesh::Create); the mapping is not checked against a shape
// (DistAttr::Verify does that).
absl::StatusOr<DistAttr> ParseDistAttr(std::string_view text);

}  // namespace pdist::ir

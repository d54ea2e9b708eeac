// A parameter's or state's `init` string, parsed: the grammar the verifier checks and the
// executor draws from, so a program that verifies never fails to initialise on its syntax.
//
//   zeros | ones | const(X) | normal(STD) | uniform(LIMIT)   (uniform in [-LIMIT, LIMIT))
//   | stored          the numbers the program carries (Value::stored(): imported weights)
//   | cast_of(NAME)   parameter NAME's values, as its dtype holds them, in this value's dtype
//
//   ParseInitSpec("normal(0.02)")  →  {kNormal, 0.02}
//   ParseInitSpec("normal(-1)")    →  InvalidArgument "... the spread must be >= 0 and finite"
#pragma once

#include <string>

#include "absl/status/statusor.h"

namespace pdist::ir {

struct InitSpec {
  enum class Kind { kConst, kNormal, kUniform, kStored, kCastOf };
  Kind kind = Kind::kConst;
  double arg = 0;  // the constant, the normal's standard deviation, the uniform's limit
  std::string of;  // kCastOf: the value whose numbers are drawn
};

// Errors name the string and what is wrong: the grammar above, a value that is not finite, a
// negative spread (a draw no step can mend).
absl::StatusOr<InitSpec> ParseInitSpec(const std::string& init);

}  // namespace pdist::ir

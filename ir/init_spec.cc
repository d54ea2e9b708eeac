// ParseInitSpec: one grammar for every reader of an init string.
#include "ir/init_spec.h"

#include <cmath>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "ir/program.h"

namespace pdist::ir {

absl::StatusOr<InitSpec> ParseInitSpec(const std::string& init) {
  using Kind = InitSpec::Kind;
  if (init == "zeros") return InitSpec{Kind::kConst, 0.0, ""};
  if (init == "ones") return InitSpec{Kind::kConst, 1.0, ""};
  if (init == kStoredInit) return InitSpec{Kind::kStored, 0.0, ""};
  const size_t open = init.find('(');
  if (open != std::string::npos && init.back() == ')') {
    const std::string name = init.substr(0, open), arg = init.substr(open + 1, init.size() - open - 2);
    if (name == "cast_of" && !arg.empty()) return InitSpec{Kind::kCastOf, 0.0, arg};
    const Kind kind = name == "const" ? Kind::kConst : name == "normal" ? Kind::kNormal : Kind::kUniform;
    double x = 0;
    if ((name == "const" || name == "normal" || name == "uniform") && absl::SimpleAtod(arg, &x)) {
      // A nan or inf value, or a negative spread, would start the run from numbers no step can
      // mend (each surfaced as "loss is nan at step 0").
      if (!std::isfinite(x) || (kind != Kind::kConst && x < 0)) {
        return absl::InvalidArgumentError(absl::StrCat("initialiser '", init, "': ",
                                                       kind == Kind::kConst ? "the value must be finite"
                                                                            : "the spread must be >= 0 and finite"));
      }
      return InitSpec{kind, x, ""};
    }
  }
  return absl::InvalidArgumentError(absl::StrCat("initialiser '", init,
                                                 "': expected zeros, ones, const(X), normal(STD), uniform(LIMIT), "
                                                 "stored or cast_of(NAME)"));
}

}  // namespace pdist::ir

// InitializeWorkspace: parameters and optimizer states from their `init` strings.
//
// Grammar: zeros | ones | const(X) | normal(STD) | uniform(LIMIT)   (uniform in [-LIMIT, LIMIT))
// Element i of value "name" depends only on (seed, name, i), so a shard of a parameter can be
// initialised by evaluating the same indices on any rank.
#include <charconv>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "executor/dtype_dispatch.h"
#include "executor/executor.h"
#include "executor/random.h"

namespace pdist::exec {

namespace {

struct InitSpec {
  std::string kind;  // zeros, ones, const, normal, uniform
  double arg = 0;
};

absl::StatusOr<InitSpec> ParseInit(const std::string& init, const std::string& name) {
  if (init == "zeros") return InitSpec{"const", 0.0};
  if (init == "ones") return InitSpec{"const", 1.0};
  const size_t open = init.find('(');
  if (open != std::string::npos && init.back() == ')') {
    InitSpec spec{init.substr(0, open), 0.0};
    const std::string arg = init.substr(open + 1, init.size() - open - 2);
    if ((spec.kind == "const" || spec.kind == "normal" || spec.kind == "uniform") && absl::SimpleAtod(arg, &spec.arg)) {
      return spec;
    }
  }
  return absl::InvalidArgumentError(absl::StrCat("value '", name, "' has initialiser '", init,
                                                 "'; expected zeros, ones, const(X), normal(STD) or uniform(LIMIT)"));
}

}  // namespace

absl::Status InitializeWorkspace(const ir::Program& program, uint64_t seed, Workspace& workspace) {
  for (const ir::Value* v : program.block().arguments()) {
    if (!v->is_persistent() || workspace.count(v->name())) continue;
    absl::StatusOr<InitSpec> spec = ParseInit(v->init(), v->name());
    if (!spec.ok()) return spec.status();
    Tensor t = Tensor::Empty(v->type());
    const uint64_t key = StreamKey(seed, HashName(v->name()));
    const int64_t n = t.num_elements();
    PDIST_DISPATCH_ALL(t.dtype(), T, {
      T* out = t.data<T>();
      for (int64_t i = 0; i < n; ++i) {
        double x = spec->arg;
        if (spec->kind == "normal") x = spec->arg * NormalAt(key, static_cast<uint64_t>(i));
        if (spec->kind == "uniform") x = spec->arg * (2.0 * UniformAt(key, static_cast<uint64_t>(i)) - 1.0);
        out[i] = static_cast<T>(x);
      }
    });
    workspace.emplace(v->name(), std::move(t));
  }
  return absl::OkStatus();
}

}  // namespace pdist::exec

// PassRegistry: registration, creation by name, help text.
#include "passes/pass_registry.h"

#include <cstdio>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace pdist::passes {

const PassRegistry& PassRegistry::Global() {
  static const PassRegistry* registry = [] {
    auto* r = new PassRegistry();
    absl::Status status = RegisterBuiltinPasses(*r);
    if (!status.ok()) {
      // A programmer error in passes/: fail loudly at start-up, as OpRegistry does.
      std::fprintf(stderr, "pdist: pass registration failed: %s\n", std::string(status.message()).c_str());
      std::abort();
    }
    return r;
  }();
  return *registry;
}

absl::Status PassRegistry::Register(std::string name, std::string summary, PassFactory factory) {
  if (name.empty() || !factory) return absl::InvalidArgumentError("pass registered without a name or factory");
  if (entries_.count(name)) return absl::AlreadyExistsError(absl::StrCat("pass '", name, "' registered twice"));
  entries_.emplace(std::move(name), Entry{std::move(summary), std::move(factory)});
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Pass>> PassRegistry::Create(const PassSpec& spec) const {
  auto it = entries_.find(spec.name);
  if (it == entries_.end()) {
    return absl::NotFoundError(
        absl::StrCat("unknown pass '", spec.name, "' (known: ", absl::StrJoin(Names(), ", "), ")"));
  }
  return it->second.factory(spec.options);
}

std::vector<std::string> PassRegistry::Names() const {
  std::vector<std::string> names;
  for (const auto& [name, entry] : entries_) names.push_back(name);
  return names;
}

std::string PassRegistry::Help() const {
  std::string help;
  for (const auto& [name, entry] : entries_) absl::StrAppend(&help, absl::StrFormat("  %-12s %s\n", name, entry.summary));
  return help;
}

}  // namespace pdist::passes

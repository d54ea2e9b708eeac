// ApplyAnnotations: glob matching over block-argument names, then ShardTensor on each match.
#include "passes/annotate.h"

#include <optional>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "ir/dist/shard_tensor.h"
#include "ir/status.h"

namespace pdist::passes {

namespace {

// A few argument names, for the hint of an annotation that matched nothing.
std::string SomeArgumentNames(const ir::Program& program) {
  constexpr size_t kShown = 8;
  std::vector<std::string> names;
  for (const ir::Value* v : program.block().arguments()) {
    if (names.size() == kShown) {
      names.push_back("...");
      break;
    }
    names.push_back(v->name());
  }
  return absl::StrJoin(names, ", ");
}

// What a value held before; restored when a later annotation fails.
struct Saved {
  ir::Value* value;
  std::optional<ir::DistAttr> dist;
  bool annotated;
};

}  // namespace

absl::Status ApplyAnnotations(const strategy::Strategy& strategy, ir::Program& program) {
  // Which annotation claims each argument: two that disagree on one tensor are an error rather
  // than an order-dependent override.
  absl::flat_hash_map<const ir::Value*, size_t> claimed;
  std::vector<std::pair<ir::Value*, size_t>> targets;
  for (size_t i = 0; i < strategy.annotations.size(); ++i) {
    const strategy::TensorAnnotation& a = strategy.annotations[i];
    bool matched = false;
    for (ir::Value* v : program.block().arguments()) {
      if (!GlobMatch(a.tensor, v->name())) continue;
      matched = true;
      auto [it, inserted] = claimed.try_emplace(v, i);
      if (!inserted) {
        const strategy::TensorAnnotation& first = strategy.annotations[it->second];
        if (first.mesh == a.mesh && first.placements == a.placements) continue;
        return absl::InvalidArgumentError(absl::StrCat(
            "annotations[", it->second, "] (\"", first.tensor, "\") and annotations[", i, "] (\"", a.tensor,
            "\") give tensor '", v->name(), "' different placements: ", ir::PlacementsToString(first.placements),
            " vs ", ir::PlacementsToString(a.placements)));
      }
      targets.emplace_back(v, i);
    }
    if (!matched) {
      return absl::InvalidArgumentError(absl::StrCat("annotations[", i, "]: tensor \"", a.tensor,
                                                     "\" matches no block argument (arguments: ",
                                                     SomeArgumentNames(program), ")"));
    }
  }
  std::vector<Saved> saved;
  for (const auto& [v, i] : targets) {
    saved.push_back({v, v->dist_attr(), v->dist_annotated()});
    const strategy::TensorAnnotation& a = strategy.annotations[i];
    absl::Status status = ir::ShardTensor(v, a.mesh, a.placements);
    if (!status.ok()) {
      for (const Saved& s : saved) {
        s.value->set_dist_attr(s.dist);
        s.value->set_dist_annotated(s.annotated);
      }
      return WithContext(status, absl::StrCat("annotations[", i, "] (\"", a.tensor, "\")"));
    }
  }
  return absl::OkStatus();
}

}  // namespace pdist::passes

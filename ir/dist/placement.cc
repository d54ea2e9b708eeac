// Placement and ReduceType: names, printing and parsing (long and short forms).
#include "ir/dist/placement.h"

#include <cctype>
#include <charconv>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace pdist::ir {

namespace {

constexpr std::pair<ReduceType, const char*> kReduceNames[] = {
    {ReduceType::kSum, "sum"}, {ReduceType::kAvg, "avg"}, {ReduceType::kMax, "max"}};

std::string Trim(const std::string& text) {
  size_t begin = 0, end = text.size();
  while (begin < end && std::isspace(static_cast<unsigned char>(text[begin]))) ++begin;
  while (end > begin && std::isspace(static_cast<unsigned char>(text[end - 1]))) --end;
  return text.substr(begin, end - begin);
}

absl::Status BadPlacement(const std::string& text) {
  return absl::InvalidArgumentError(absl::StrCat("unknown placement '", text,
                                                 "' (expected Shard(dim), Replicate() or Partial(sum|avg|max); "
                                                 "short forms S(dim), R, P)"));
}

}  // namespace

const char* ReduceTypeName(ReduceType type) {
  for (const auto& [t, name] : kReduceNames) {
    if (t == type) return name;
  }
  return "?";
}

absl::StatusOr<ReduceType> ParseReduceType(const std::string& name) {
  for (const auto& [t, n] : kReduceNames) {
    if (name == n) return t;
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown reduce type '", name, "' (expected sum, avg or max)"));
}

std::string Placement::ToString() const {
  switch (kind) {
    case Kind::kShard: return absl::StrCat("Shard(", dim, ")");
    case Kind::kPartial: return absl::StrCat("Partial(", ReduceTypeName(reduce), ")");
    case Kind::kReplicate: break;
  }
  return "Replicate()";
}

absl::StatusOr<Placement> Placement::Parse(const std::string& raw) {
  const std::string text = Trim(raw);
  // Split "Name(arg)" into name and arg; a bare name has no argument.
  std::string name = text, arg;
  bool has_parens = false;
  if (const size_t open = text.find('('); open != std::string::npos) {
    if (text.back() != ')') return BadPlacement(raw);
    name = Trim(text.substr(0, open));
    arg = Trim(text.substr(open + 1, text.size() - open - 2));
    has_parens = true;
  }
  if (name == "Replicate" || name == "R") {
    if (!arg.empty()) return BadPlacement(raw);
    return Replicate();
  }
  if (name == "Partial" || name == "P") {
    if (arg.empty()) return Partial();
    absl::StatusOr<ReduceType> reduce = ParseReduceType(arg);
    if (!reduce.ok()) return absl::InvalidArgumentError(absl::StrCat("placement '", raw, "': ", reduce.status().message()));
    return Partial(*reduce);
  }
  if ((name == "Shard" || name == "S") && has_parens) {
    int64_t dim = 0;
    const char* end = arg.data() + arg.size();
    auto [ptr, ec] = std::from_chars(arg.data(), end, dim);
    if (arg.empty() || ec != std::errc() || ptr != end) {
      return absl::InvalidArgumentError(absl::StrCat("placement '", raw, "': the tensor dim must be an integer"));
    }
    return Shard(dim);
  }
  return BadPlacement(raw);
}

std::string PlacementsToString(const std::vector<Placement>& placements) {
  std::vector<std::string> items;
  for (const Placement& p : placements) items.push_back(p.ToString());
  return absl::StrCat("[", absl::StrJoin(items, ", "), "]");
}

absl::StatusOr<std::vector<Placement>> ParsePlacements(const std::string& text) {
  std::vector<Placement> placements;
  if (Trim(text).empty()) return placements;
  // Commas never occur inside one placement, so a plain split is exact.
  size_t start = 0;
  while (true) {
    const size_t comma = text.find(',', start);
    const std::string item = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    absl::StatusOr<Placement> p = Placement::Parse(item);
    if (!p.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("placements \"", text, "\": item ", placements.size(), ": ",
                                                     p.status().message()));
    }
    placements.push_back(*p);
    if (comma == std::string::npos) return placements;
    start = comma + 1;
  }
}

}  // namespace pdist::ir

// Products of sizes that a user chose (dims, degrees, device counts), checked: a product that
// would wrap an int64 or pass a limit is an error naming the factors, not a small or negative
// number that something then allocates or loops over.
//
//   PDIST_ASSIGN_OR_RETURN(int64_t world, CheckedProduct({dp, mp, pp}, kMaxProcesses, "dp × mp × pp"));
//   // "dp × mp × pp = 65536 × 65536 × 1 is more than 1048576"
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string_view>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace pdist::ir {

// a·b, or nullopt when it does not fit an int64.
inline std::optional<int64_t> CheckedMul(int64_t a, int64_t b) {
  int64_t out = 0;
  if (__builtin_mul_overflow(a, b, &out)) return std::nullopt;
  return out;
}

// The product of `factors` (each >= 0); InvalidArgument naming `what` and the factors when it is
// above `limit` (or would overflow on the way there).
inline absl::StatusOr<int64_t> CheckedProduct(std::initializer_list<int64_t> factors, int64_t limit,
                                              std::string_view what) {
  int64_t product = 1;
  bool over = false;
  for (int64_t f : factors) {
    const std::optional<int64_t> next = CheckedMul(product, f);
    if (!next || *next > limit) {
      over = true;
      break;
    }
    product = *next;
  }
  if (over) {
    return absl::InvalidArgumentError(
        absl::StrCat(std::string(what), " = ", absl::StrJoin(factors, " × "), " is more than ", limit));
  }
  return product;
}

}  // namespace pdist::ir

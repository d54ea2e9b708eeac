// CheckIds and GroupIds.
#include "executor/embedding_rows.h"

#include "absl/strings/str_cat.h"

namespace pdist::exec {
namespace {

// Calls fn(ids as a typed pointer) for an i32 or i64 tensor.
template <typename Fn>
void WithIds(const Tensor& ids, Fn fn) {
  if (ids.dtype() == ir::DataType::kInt64) {
    fn(ids.data<int64_t>());
  } else {
    fn(ids.data<int32_t>());
  }
}

}  // namespace

absl::Status CheckIds(const Tensor& ids, int64_t vocab, const char* what) {
  if (ids.dtype() != ir::DataType::kInt64 && ids.dtype() != ir::DataType::kInt32) {
    return absl::InvalidArgumentError(absl::StrCat(what, "s must be i32 or i64, got ", ir::DataTypeName(ids.dtype())));
  }
  absl::Status status;
  WithIds(ids, [&](const auto* id) {
    for (int64_t i = 0; i < ids.num_elements() && status.ok(); ++i) {
      if (id[i] < 0 || id[i] >= vocab) {
        status = absl::InvalidArgumentError(absl::StrCat(what, " ", static_cast<int64_t>(id[i]), " at flat index ", i,
                                                         " is out of range for vocab size ", vocab));
      }
    }
  });
  return status;
}

IdGroups GroupIds(const Tensor& ids, int64_t vocab) {
  const int64_t n = ids.num_elements();
  IdGroups g;
  g.start.assign(static_cast<size_t>(vocab) + 1, 0);
  g.order.resize(static_cast<size_t>(n));
  WithIds(ids, [&](const auto* id) {
    for (int64_t i = 0; i < n; ++i) ++g.start[static_cast<size_t>(id[i]) + 1];
    for (int64_t v = 0; v < vocab; ++v) g.start[v + 1] += g.start[v];
    std::vector<int64_t> cursor(g.start.begin(), g.start.end() - 1);
    for (int64_t i = 0; i < n; ++i) g.order[cursor[id[i]]++] = i;
  });
  return g;
}

}  // namespace pdist::exec

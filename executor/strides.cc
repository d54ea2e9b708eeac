// Row-major and broadcast strides.
#include "executor/strides.h"

#include "absl/strings/str_cat.h"

namespace pdist::exec {

std::vector<int64_t> Strides(const ir::Shape& shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (int64_t i = static_cast<int64_t>(shape.size()) - 2; i >= 0; --i) {
    strides[static_cast<size_t>(i)] = strides[static_cast<size_t>(i) + 1] * shape[static_cast<size_t>(i) + 1];
  }
  return strides;
}

std::vector<int64_t> BroadcastStrides(const ir::Shape& shape, const ir::Shape& out_shape) {
  std::vector<int64_t> out(out_shape.size(), 0);
  const std::vector<int64_t> own = Strides(shape);
  const size_t offset = out_shape.size() - shape.size();
  for (size_t i = 0; i < shape.size(); ++i) out[offset + i] = shape[i] == 1 ? 0 : own[i];
  return out;
}

absl::Status CheckBroadcastsTo(const char* op, const ir::Shape& out, std::initializer_list<const ir::Shape*> inputs) {
  for (const ir::Shape* s : inputs) {
    bool ok = s->size() <= out.size();
    for (size_t d = 0; ok && d < s->size(); ++d) {
      const int64_t o = out[out.size() - s->size() + d];
      ok = (*s)[d] == 1 || (*s)[d] == o;
    }
    if (!ok) {
      return absl::InternalError(absl::StrCat(op, ": an input of shape ", ir::ShapeToString(*s),
                                              " does not broadcast to the result's ", ir::ShapeToString(out)));
    }
  }
  return absl::OkStatus();
}

}  // namespace pdist::exec

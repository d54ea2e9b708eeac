// FeedChecks: NaNs and index ranges of a batch, before the step.
#include "engine/feed_checks.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "ir/attribute.h"
#include "ir/op_def.h"

namespace pdist::engine {
namespace {

// The flat index of the first element `bad` holds for, or -1 (host tensors of `T`).
template <typename T, typename Bad>
int64_t FirstWhere(const exec::Tensor& t, Bad bad) {
  const T* v = t.data<T>();
  for (int64_t i = 0; i < t.num_elements(); ++i) {
    if (bad(v[i])) return i;
  }
  return -1;
}

// "batch input 'x' holds nan at flat index 3 of f32[8,16]<why>: not trained on ...".
absl::Status Refused(const std::string& input, const exec::Tensor& t, int64_t at, const std::string& value,
                     const std::string& why = "") {
  return absl::InvalidArgumentError(absl::StrCat("batch input '", input, "' holds ", value, " at flat index ", at,
                                                 " of ", t.type().ToString(), why,
                                                 ": not trained on (the parameters are as they were)"));
}

}  // namespace

FeedChecks FeedChecks::Of(const ir::Program& forward) {
  FeedChecks checks;
  for (const auto& op : forward.block().ops()) {
    const ir::OpDef* def = ir::OpRegistry::Global().Find(op->type());
    if (def == nullptr) continue;
    for (const ir::OpDef::IndexOperand& index : def->index_operands) {
      if (index.operand >= op->operands().size() || index.into >= op->operands().size()) continue;
      const ir::Value* read = op->operand(index.operand);
      const ir::Value* into = op->operand(index.into);
      // Through views (the labels reshaped to the logits' rows): the same numbers.
      while (read != nullptr && read->producer() != nullptr) {
        const ir::OpDef* producer = ir::OpRegistry::Global().Find(read->producer()->type());
        if (producer == nullptr || !producer->view || read->producer()->operands().empty()) break;
        read = read->producer()->operand(0);
      }
      if (read == nullptr || into == nullptr || read->role() != ir::ValueRole::kDataInput) continue;
      int64_t dim = index.dim;
      if (!index.dim_attr.empty()) {
        absl::StatusOr<int64_t> attr = ir::GetInt(op->attrs(), index.dim_attr);
        if (!attr.ok()) continue;  // the verifier names a missing attribute
        dim = *attr;
      }
      const int64_t rank = static_cast<int64_t>(into->type().shape.size());
      if (dim < 0) dim += rank;
      if (dim < 0 || dim >= rank) continue;  // shape inference refuses it
      IndexRange range{.input = read->name(),
                       .size = into->type().shape[static_cast<size_t>(dim)],
                       .reader = absl::StrCat(op->type(), " reads it as an index into dim ", dim, " of ",
                                              into->type().ToString())};
      if (!index.also_allowed_attr.empty()) {
        if (absl::StatusOr<int64_t> allowed = ir::GetInt(op->attrs(), index.also_allowed_attr); allowed.ok()) {
          range.also_allowed = *allowed;
        }
      }
      checks.ranges_.push_back(std::move(range));
    }
  }
  return checks;
}

absl::Status FeedChecks::Check(const exec::Feeds& feeds) const {
  for (const auto& [name, t] : feeds) {
    if (!t.device().is_cpu() || !ir::IsFloatingPoint(t.dtype())) continue;
    int64_t at = -1;
    if (t.dtype() == ir::DataType::kFloat32) {
      at = FirstWhere<float>(t, [](float v) { return std::isnan(v); });
    } else {
      for (int64_t i = 0; i < t.num_elements() && at < 0; ++i) at = std::isnan(t.At(i)) ? i : -1;
    }
    if (at >= 0) return Refused(name, t, at, "nan");
  }
  for (const IndexRange& range : ranges_) {
    auto it = feeds.find(range.input);
    if (it == feeds.end() || !it->second.device().is_cpu()) continue;
    const exec::Tensor& t = it->second;
    auto bad = [&](auto v) {
      const int64_t id = static_cast<int64_t>(v);
      return (id < 0 || id >= range.size) && id != range.also_allowed;
    };
    int64_t at = -1;
    if (t.dtype() == ir::DataType::kInt64) {
      at = FirstWhere<int64_t>(t, bad);
    } else if (t.dtype() == ir::DataType::kInt32) {
      at = FirstWhere<int32_t>(t, bad);
    } else {
      continue;  // soft labels (probabilities) index nothing
    }
    if (at >= 0) {
      const int64_t id = t.dtype() == ir::DataType::kInt64 ? t.data<int64_t>()[at] : t.data<int32_t>()[at];
      return Refused(range.input, t, at, absl::StrCat(id),
                     absl::StrCat(", out of range: ", range.reader, " (0 to ", range.size - 1,
                                  range.also_allowed ? absl::StrCat(", or ", *range.also_allowed) : "", ")"));
    }
  }
  return absl::OkStatus();
}

}  // namespace pdist::engine

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
                     FeedUse use, const std::string& why = "") {
  const char* consequence = use == FeedUse::kTraining     ? "not trained on (the parameters are as they were)"
                            : use == FeedUse::kEvaluation ? "not evaluated"
                                                          : "nothing predicted";
  return absl::InvalidArgumentError(absl::StrCat("batch input '", input, "' holds ", value, " at flat index ", at,
                                                 " of ", t.type().ToString(), why, ": ", consequence));
}

}  // namespace

FeedChecks FeedChecks::Of(const ir::Program& program) {
  FeedChecks checks;
  for (const ir::Value* arg : program.block().arguments()) {
    if (arg->role() == ir::ValueRole::kDataInput) checks.types_.emplace(arg->name(), arg->type());
  }
  for (const auto& op : program.block().ops()) {
    for (const ir::Value* v : op->operands()) {
      if (v != nullptr && v->role() == ir::ValueRole::kDataInput) checks.read_.insert(v->name());
    }
  }
  for (const auto& op : program.block().ops()) {
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
                       .from_end = index.from_end,
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

absl::Status FeedChecks::Check(const exec::Feeds& feeds, FeedUse use) const {
  // The whole batch's type first: a rank's piece of a mis-shaped feed was refused by the slicer
  // in the words of placements ("dims_mapping [0] does not fit shape [4,16]").
  for (const auto& [name, t] : feeds) {
    auto it = types_.find(name);
    if (it != types_.end() && t.type() != it->second) {
      return absl::InvalidArgumentError(absl::StrCat("feed '", name, "' has type ", t.type().ToString(),
                                                     ", the program expects ", it->second.ToString()));
    }
  }
  for (const auto& [name, t] : feeds) {
    if (!read_.contains(name) || !t.device().is_cpu() || !ir::IsFloatingPoint(t.dtype())) continue;
    int64_t at = -1;
    if (t.dtype() == ir::DataType::kFloat32) {
      at = FirstWhere<float>(t, [](float v) { return std::isnan(v); });
    } else {
      for (int64_t i = 0; i < t.num_elements() && at < 0; ++i) at = std::isnan(t.At(i)) ? i : -1;
    }
    if (at >= 0) return Refused(name, t, at, "nan", use);
  }
  for (const IndexRange& range : ranges_) {
    auto it = feeds.find(range.input);
    if (it == feeds.end() || !it->second.device().is_cpu()) continue;
    const exec::Tensor& t = it->second;
    auto bad = [&](auto v) {
      const int64_t id = static_cast<int64_t>(v);
      return (id < (range.from_end ? -range.size : 0) || id >= range.size) && id != range.also_allowed;
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
      return Refused(range.input, t, at, absl::StrCat(id), use,
                     absl::StrCat(", out of range: ", range.reader, " (", range.from_end ? -range.size : 0, " to ",
                                  range.size - 1,
                                  range.also_allowed ? absl::StrCat(", or ", *range.also_allowed) : "", ")"));
    }
  }
  return absl::OkStatus();
}

}  // namespace pdist::engine

// Program, Block, Operation, Value: ownership, lookup and deep copy.
#include "ir/program.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace pdist::ir {

const char* ValueRoleName(ValueRole role) {
  static constexpr const char* kNames[] = {"data", "param", "state", "act", "grad"};
  return kNames[static_cast<int>(role)];
}

std::string Operation::Describe() const {
  std::vector<std::string> ids;
  for (const Value* v : operands_) ids.push_back(v ? absl::StrCat("%", v->id()) : "none");
  return absl::StrCat(type_, "(", absl::StrJoin(ids, ", "), ")");
}

Value* Program::NewValue(TensorType type, ValueRole role) {
  const int64_t id = static_cast<int64_t>(values_.size());
  values_.push_back(std::make_unique<Value>(id, std::move(type), role));
  return values_.back().get();
}

Value* Program::FindValue(int64_t id) const {
  if (id < 0 || id >= static_cast<int64_t>(values_.size())) return nullptr;
  return values_[static_cast<size_t>(id)].get();
}

Value* Program::FindArgument(const std::string& name) const {
  for (Value* v : block_.arguments()) {
    if (v->name() == name) return v;
  }
  return nullptr;
}

std::vector<Value*> Program::Parameters() const {
  std::vector<Value*> params;
  for (Value* v : block_.arguments()) {
    if (v->role() == ValueRole::kParameter) params.push_back(v);
  }
  return params;
}

Program Program::Clone() const {
  Program copy;
  for (const auto& v : values_) {
    Value* c = copy.NewValue(v->type(), v->role());
    c->set_name(v->name());
    c->set_init(v->init());
    c->set_stored(v->stored());
    c->set_trainable(v->trainable());
    c->set_dist_attr(v->dist_attr());
    c->set_dist_annotated(v->dist_annotated());
  }
  auto map = [&copy](const Value* v) -> Value* { return v ? copy.FindValue(v->id()) : nullptr; };
  for (const Value* arg : block_.arguments()) copy.block_.add_argument(map(arg));
  for (const auto& op : block_.ops()) {
    std::vector<Value*> operands;
    for (const Value* v : op->operands()) operands.push_back(map(v));
    auto c = std::make_unique<Operation>(op->type(), std::move(operands), op->attrs());
    c->CopyRoleAndChunk(*op);
    for (const Value* r : op->results()) c->add_result(map(r));
    copy.block_.Append(std::move(c));
  }
  copy.loss_ = map(loss_);
  for (const StateUpdate& u : updates_) copy.updates_.push_back({map(u.state), map(u.new_value)});
  for (const StateUpdate& g : gradients_) copy.gradients_.push_back({map(g.state), map(g.new_value)});
  copy.local_rank_ = local_rank_;
  return copy;
}

}  // namespace pdist::ir

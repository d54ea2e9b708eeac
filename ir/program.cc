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
  return CloneIf([](const Operation&) { return true; }, [](const Value&) { return true; });
}

Program Program::CloneIf(const std::function<bool(const Operation&)>& keep_op,
                         const std::function<bool(const Value&)>& keep_argument) const {
  // Values no argument or op defines (none in a valid program) are copied, so that Clone keeps ids.
  std::vector<bool> kept(values_.size(), true);
  for (const Value* arg : block_.arguments()) kept[static_cast<size_t>(arg->id())] = keep_argument(*arg);
  std::vector<bool> op_kept;
  for (const auto& op : block_.ops()) {
    op_kept.push_back(keep_op(*op));
    for (const Value* r : op->results()) kept[static_cast<size_t>(r->id())] = op_kept.back();
  }
  Program copy;
  std::vector<Value*> copies(values_.size(), nullptr);
  for (const auto& v : values_) {
    if (!kept[static_cast<size_t>(v->id())]) continue;
    Value* c = copy.NewValue(v->type(), v->role());
    c->set_name(v->name());
    c->set_init(v->init());
    c->set_stored(v->stored());
    c->set_trainable(v->trainable());
    c->set_dist_attr(v->dist_attr());
    c->set_dist_annotated(v->dist_annotated());
    copies[static_cast<size_t>(v->id())] = c;
  }
  auto map = [&copies](const Value* v) -> Value* { return v ? copies[static_cast<size_t>(v->id())] : nullptr; };
  for (const Value* arg : block_.arguments()) {
    if (Value* c = map(arg)) copy.block_.add_argument(c);
  }
  for (size_t i = 0; i < block_.ops().size(); ++i) {
    if (!op_kept[i]) continue;
    const Operation& op = *block_.ops()[i];
    std::vector<Value*> operands;
    for (const Value* v : op.operands()) operands.push_back(map(v));
    auto c = std::make_unique<Operation>(op.type(), std::move(operands), op.attrs());
    c->CopyRoleAndChunk(op);
    for (const Value* r : op.results()) c->add_result(map(r));
    copy.block_.Append(std::move(c));
  }
  copy.loss_ = map(loss_);
  for (const ProgramOutput& o : outputs_) {
    if (Value* v = map(o.value)) copy.outputs_.push_back({o.name, v});
  }
  for (const StateUpdate& u : updates_) {
    if (map(u.state) && map(u.new_value)) copy.updates_.push_back({map(u.state), map(u.new_value)});
  }
  for (const StateUpdate& g : gradients_) {
    if (map(g.state) && map(g.new_value)) copy.gradients_.push_back({map(g.state), map(g.new_value)});
  }
  copy.local_rank_ = local_rank_;
  return copy;
}

}  // namespace pdist::ir

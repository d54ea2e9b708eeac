#include "passes/fuse_optimizer.h"

#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "ir/attribute.h"
#include "ir/ops/merged_updates.h"
#include "passes/uses.h"

namespace pdist::passes {
namespace {

const ir::Value* OperandOrNull(const ir::Operation& op, size_t i) { return i < op.num_operands() ? op.operand(i) : nullptr; }

// The cast that rounds an update's new master weight to its bf16/f16 parameter under mixed
// precision (`cast(adamw(%w.master, %g_bf16, ...)) {dtype = bf16}`, passes/optimizer.h) when the
// new master has no other reader and the cast runs in the update's job: a merged op takes it in
// (multi_precision, ir/ops/merged_updates.h). Null otherwise.
const ir::Operation* RoundingOf(const ir::Operation& update, const ir::MergedUpdate& m, const Uses& uses) {
  const ir::Value* grad = OperandOrNull(update, m.grad);
  if (update.num_operands() == 0 || update.operand(0)->type().dtype != ir::DataType::kFloat32 || grad == nullptr ||
      !ir::IsLowPrecisionFloat(grad->type().dtype)) {
    return nullptr;
  }
  auto it = uses.find(update.result(0));
  if (it == uses.end() || it->second.size() != 1) return nullptr;
  const ir::Operation* cast = it->second.front().op;
  const bool rounds = cast->type() == "cast" && cast->num_operands() == 1 && cast->num_results() == 1 &&
                      cast->result(0)->type() == ir::TensorType{update.result(0)->type().shape, grad->type().dtype};
  return rounds && cast->role() == update.role() && cast->chunk() == update.chunk() ? cast : nullptr;
}

// Updates that may share one op: one base op, the same attributes, learning rate and
// skip_update values, dtypes of each per-parameter operand, role and chunk (one pipeline job),
// and whether their new master weights are rounded by a cast the merged op takes in.
std::string GroupKey(const ir::Operation& op, const ir::MergedUpdate& m, bool rounded) {
  std::string key = absl::StrCat(op.type(), "/", reinterpret_cast<uintptr_t>(OperandOrNull(op, m.learning_rate)), "/",
                                 reinterpret_cast<uintptr_t>(OperandOrNull(op, m.skip_update)), "/",
                                 static_cast<int>(op.role()), "/", op.chunk(), rounded ? "/rounded" : "");
  for (size_t i : m.per_parameter) absl::StrAppend(&key, "/", ir::DataTypeName(op.operand(i)->type().dtype));
  for (const auto& [name, value] : op.attrs()) absl::StrAppend(&key, "/", name, "=", ir::AttributeToString(value));
  return key;
}

// New bytes an update makes (its results and its rounded copy), all alive at once when it is a
// merged op's member: the executor installs a merged op's new values, and frees the old ones,
// only once it has run.
int64_t NewBytes(const ir::Operation& op, const ir::Operation* rounding) {
  int64_t bytes = rounding != nullptr ? rounding->result(0)->type().num_bytes() : 0;
  for (const ir::Value* r : op.results()) bytes += r->type().num_bytes();
  return bytes;
}

// A group to merge: its updates' indices in program order, and each one's rounding cast (or null).
struct Group {
  std::vector<size_t> members;
  std::vector<const ir::Operation*> roundings;
};

// The first mergeable group; no members when none is left. Updates of one GroupKey are cut, in
// program order, into groups of at most kMergedUpdates members whose new bytes stay within
// kMergedUpdateBytes (a member above it alone stays an update of its own); the first group of two
// or more is the one whose first member comes first.
Group FirstGroup(const ir::Program& program) {
  const auto& ops = program.block().ops();
  const Uses uses = UsesOf(program);
  std::map<std::string, Group> by_key;
  for (size_t i = 0; i < ops.size(); ++i) {
    const ir::MergedUpdate* m = ir::MergedUpdateOfBase(ops[i]->type());
    if (m == nullptr) continue;
    const ir::Operation* rounding = RoundingOf(*ops[i], *m, uses);
    Group& g = by_key[GroupKey(*ops[i], *m, rounding != nullptr)];
    g.members.push_back(i);
    g.roundings.push_back(rounding);
  }
  Group first, group;
  int64_t bytes = 0;  // the new bytes of `group`
  auto offer = [&] {
    if (group.members.size() >= 2 && (first.members.empty() || group.members.front() < first.members.front())) {
      first = group;
    }
    group = {};
    bytes = 0;
  };
  for (const auto& [key, updates] : by_key) {
    for (size_t k = 0; k < updates.members.size(); ++k) {
      const int64_t more = NewBytes(*ops[updates.members[k]], updates.roundings[k]);
      if (!group.members.empty() && (group.members.size() == kMergedUpdates || bytes + more > kMergedUpdateBytes)) {
        offer();
      }
      group.members.push_back(updates.members[k]);
      group.roundings.push_back(updates.roundings[k]);
      bytes += more;
    }
    offer();
  }
  return first;
}

// Replaces `group` by one merged op at the last member's place; the members' rounding casts go,
// their results now the merged op's. The ops between the first and the last member that read a
// member's result (or a rounded copy), directly or through each other, move right after the
// merged op in their order; every other op stays where it is.
void MergeGroup(ir::Program& program, const Group& group) {
  const std::vector<size_t>& members = group.members;
  std::vector<std::unique_ptr<ir::Operation>> old = std::move(program.block().mutable_ops());
  program.block().mutable_ops().clear();
  std::unordered_map<size_t, size_t> position;  // a member's op index → its place in the group
  for (size_t k = 0; k < members.size(); ++k) position[members[k]] = k;
  const bool rounded = group.roundings.front() != nullptr;  // all members alike (GroupKey)
  const std::unordered_set<const ir::Operation*> is_rounding(group.roundings.begin(), group.roundings.end());
  std::unordered_set<const ir::Value*> waits;  // results of members, roundings and moved ops
  std::vector<std::unique_ptr<ir::Operation>> moved;
  std::vector<std::unique_ptr<ir::Operation>> dropped;  // the roundings, kept until their results move
  for (size_t i = 0; i < old.size(); ++i) {
    if (rounded && is_rounding.count(old[i].get())) {
      dropped.push_back(std::move(old[i]));
      continue;
    }
    if (i < members.front() || i > members.back()) {
      program.block().Append(std::move(old[i]));
      continue;
    }
    if (auto member = position.find(i); member != position.end()) {
      for (const ir::Value* r : old[i]->results()) waits.insert(r);
      if (rounded) waits.insert(group.roundings[member->second]->result(0));
      if (i != members.back()) continue;
      const ir::Operation& last = *old[i];
      const ir::MergedUpdate& m = *ir::MergedUpdateOfBase(last.type());
      std::vector<ir::Value*> operands = {last.operand(m.learning_rate),
                                          m.skip_update < last.num_operands() ? last.operand(m.skip_update) : nullptr};
      for (size_t member : members) {
        for (size_t k : m.per_parameter) operands.push_back(old[member]->operand(k));
      }
      ir::AttributeMap attrs = last.attrs();
      attrs[ir::kMultiPrecision] = rounded;
      auto merged = std::make_unique<ir::Operation>(m.merged, std::move(operands), std::move(attrs));
      merged->CopyRoleAndChunk(last);
      for (size_t k = 0; k < members.size(); ++k) {
        for (ir::Value* r : old[members[k]]->results()) merged->add_result(r);
        if (rounded) merged->add_result(group.roundings[k]->result(0));
      }
      program.block().Append(std::move(merged));
      for (auto& op : moved) program.block().Append(std::move(op));
      continue;
    }
    const bool reads_member = std::any_of(old[i]->operands().begin(), old[i]->operands().end(),
                                          [&](const ir::Value* v) { return v != nullptr && waits.count(v); });
    if (!reads_member) {
      program.block().Append(std::move(old[i]));
      continue;
    }
    for (const ir::Value* r : old[i]->results()) waits.insert(r);
    moved.push_back(std::move(old[i]));
  }
}

}  // namespace

FuseOptimizerReport FuseOptimizerUpdates(ir::Program& program) {
  FuseOptimizerReport report;
  for (Group group = FirstGroup(program); !group.members.empty(); group = FirstGroup(program)) {
    MergeGroup(program, group);
    report.merged_ops += 1;
    report.updates += static_cast<int64_t>(group.members.size());
    if (group.roundings.front() != nullptr) report.roundings += static_cast<int64_t>(group.roundings.size());
  }
  return report;
}

}  // namespace pdist::passes

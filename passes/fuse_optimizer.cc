#include "passes/fuse_optimizer.h"

#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "ir/attribute.h"
#include "ir/ops/merged_updates.h"

namespace pdist::passes {
namespace {

const ir::Value* OperandOrNull(const ir::Operation& op, size_t i) { return i < op.num_operands() ? op.operand(i) : nullptr; }

// Updates that may share one op: one base op, the same attributes, learning rate and
// skip_update values, dtypes of each per-parameter operand, role and chunk (one pipeline job).
std::string GroupKey(const ir::Operation& op, const ir::MergedUpdate& m) {
  std::string key = absl::StrCat(op.type(), "/", reinterpret_cast<uintptr_t>(OperandOrNull(op, m.learning_rate)), "/",
                                 reinterpret_cast<uintptr_t>(OperandOrNull(op, m.skip_update)), "/",
                                 static_cast<int>(op.role()), "/", op.chunk());
  for (size_t i : m.per_parameter) absl::StrAppend(&key, "/", ir::DataTypeName(op.operand(i)->type().dtype));
  for (const auto& [name, value] : op.attrs()) absl::StrAppend(&key, "/", name, "=", ir::AttributeToString(value));
  return key;
}

// New bytes an update makes (its results), all alive at once when it is a merged op's member:
// the executor installs a merged op's new values, and frees the old ones, only once it has run.
int64_t NewBytes(const ir::Operation& op) {
  int64_t bytes = 0;
  for (const ir::Value* r : op.results()) bytes += r->type().num_bytes();
  return bytes;
}

// The members of the first mergeable group, in program order; empty when none is left. Updates
// of one GroupKey are cut, in program order, into groups of at most kMergedUpdates members whose
// new bytes stay within kMergedUpdateBytes (a member above it alone stays an update of its own);
// the first group of two or more is the one whose first member comes first.
std::vector<size_t> FirstGroup(const ir::Program& program) {
  const auto& ops = program.block().ops();
  std::map<std::string, std::vector<size_t>> by_key;
  for (size_t i = 0; i < ops.size(); ++i) {
    if (const ir::MergedUpdate* m = ir::MergedUpdateOfBase(ops[i]->type())) by_key[GroupKey(*ops[i], *m)].push_back(i);
  }
  std::vector<size_t> first, group;
  int64_t bytes = 0;  // the new bytes of `group`
  auto offer = [&] {
    if (group.size() >= 2 && (first.empty() || group.front() < first.front())) first = group;
    group.clear();
    bytes = 0;
  };
  for (const auto& [key, members] : by_key) {
    for (size_t i : members) {
      const int64_t more = NewBytes(*ops[i]);
      if (!group.empty() && (group.size() == kMergedUpdates || bytes + more > kMergedUpdateBytes)) offer();
      group.push_back(i);
      bytes += more;
    }
    offer();
  }
  return first;
}

// Replaces `members` by one merged op at the last member's place. The ops between the first
// and the last member that read a member's result, directly or through each other, move right
// after the merged op in their order; every other op stays where it is.
void MergeGroup(ir::Program& program, const std::vector<size_t>& members) {
  std::vector<std::unique_ptr<ir::Operation>> old = std::move(program.block().mutable_ops());
  program.block().mutable_ops().clear();
  const std::unordered_set<size_t> is_member(members.begin(), members.end());
  std::unordered_set<const ir::Value*> waits;  // results of members and of moved ops
  std::vector<std::unique_ptr<ir::Operation>> moved;
  for (size_t i = 0; i < old.size(); ++i) {
    if (i < members.front() || i > members.back()) {
      program.block().Append(std::move(old[i]));
      continue;
    }
    if (is_member.count(i)) {
      for (const ir::Value* r : old[i]->results()) waits.insert(r);
      if (i != members.back()) continue;
      const ir::Operation& last = *old[i];
      const ir::MergedUpdate& m = *ir::MergedUpdateOfBase(last.type());
      std::vector<ir::Value*> operands = {last.operand(m.learning_rate),
                                          m.skip_update < last.num_operands() ? last.operand(m.skip_update) : nullptr};
      for (size_t member : members) {
        for (size_t k : m.per_parameter) operands.push_back(old[member]->operand(k));
      }
      auto merged = std::make_unique<ir::Operation>(m.merged, std::move(operands), last.attrs());
      merged->CopyRoleAndChunk(last);
      for (size_t member : members) {
        for (ir::Value* r : old[member]->results()) merged->add_result(r);
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
  for (std::vector<size_t> group = FirstGroup(program); !group.empty(); group = FirstGroup(program)) {
    MergeGroup(program, group);
    report.merged_ops += 1;
    report.updates += static_cast<int64_t>(group.size());
  }
  return report;
}

}  // namespace pdist::passes

// ScheduleGradientAllReduces: in each of two rounds, the round's reductions hoisted to their
// producers, then buckets planned over op indices and the op list rebuilt.
#include "passes/fuse_allreduce.h"

#include <functional>
#include <limits>
#include <map>
#include <unordered_map>

#include "absl/strings/str_cat.h"
#include "ir/status.h"

namespace pdist::passes {
namespace {

struct Bucket {
  std::vector<size_t> members;  // op indices, in program order
  int64_t bytes = 0;
  size_t first_use = std::numeric_limits<size_t>::max();  // earliest use of any member's result
};

// A reduce-scatter of a gradient (ZeRO 2 and 3), alone or as a bucket.
bool ScattersAGradient(const ir::Operation& op) {
  return (op.type() == "c_reduce_scatter" || op.type() == "c_reduce_scatter_coalesced") &&
         op.operand(0)->role() == ir::ValueRole::kGradient;
}

// The reductions this pass moves: every c_allreduce and every lone gradient reduce-scatter.
bool Scheduled(const ir::Operation& op) {
  return op.type() == "c_allreduce" || (op.type() == "c_reduce_scatter" && ScattersAGradient(op));
}

// Whether a scheduled reduction reduces what a gradient reduce-scatter made: hybrid ZeRO's
// all-reduce of a shard over its replicas, scheduled in the second round, after the
// reduce-scatters have been bucketed.
bool Chained(const ir::Operation& op) {
  const ir::Operation* producer = op.operand(0)->producer();
  return producer != nullptr && ScattersAGradient(*producer);
}

// The bucket op a member joins: c_allreduce_coalesced for all-reduces, c_reduce_scatter_coalesced
// for the dim-0 reduce-scatters of gradients (ZeRO 2 and 3); empty for ops no bucket takes.
std::string BucketOpOf(const ir::Operation& op) {
  if (op.type() == "c_allreduce") return "c_allreduce_coalesced";
  if (op.type() == "c_reduce_scatter" && ScattersAGradient(op)) {
    auto axis = op.attrs().find("axis");
    if (axis != op.attrs().end() && ir::AttributeToString(axis->second) == "0") return "c_reduce_scatter_coalesced";
  }
  return "";
}

// Kind, group, reduction, dtype and pipeline job (role, chunk): what members of one bucket share.
std::string BucketKey(const ir::Operation& op) {
  return absl::StrCat(BucketOpOf(op), "|", ir::AttributeToString(op.attrs().at("ranks")), "|",
                      ir::AttributeToString(op.attrs().at("reduce")),
                      "|", ir::DataTypeName(op.operand(0)->type().dtype), "|", ir::OpRoleName(op.role()), "|",
                      op.chunk());
}

// Moves every scheduled reduction of the round (Chained(op) == `chained`) right after the op
// that produces its operand (completion puts it just before its consumer, the optimizer, i.e.
// after the whole backward pass). The second round's stay put in the first, so that their
// reduce-scatters can fill a bucket before them.
void HoistGradientReductions(ir::Program& local, bool chained) {
  std::vector<std::unique_ptr<ir::Operation>> old = std::move(local.block().mutable_ops());
  local.block().mutable_ops().clear();
  std::unordered_map<const ir::Operation*, std::vector<size_t>> after;  // producer → all-reduces
  std::vector<bool> hoisted(old.size(), false);
  for (size_t i = 0; i < old.size(); ++i) {
    if (!Scheduled(*old[i]) || Chained(*old[i]) != chained) continue;
    const ir::Operation* producer = old[i]->operand(0)->producer();
    if (producer == nullptr) continue;
    after[producer].push_back(i);
    hoisted[i] = true;
  }
  // Appends op i, then (depth first) the all-reduces of its results.
  std::function<void(size_t)> append = [&](size_t i) {
    const ir::Operation* op = old[i].get();
    local.block().Append(std::move(old[i]));
    auto it = after.find(op);
    if (it == after.end()) return;
    for (size_t j : it->second) append(j);
  };
  for (size_t i = 0; i < old.size(); ++i) {
    if (!hoisted[i]) append(i);
  }
}

// Fuses the round's reductions of one kind, group, reduction, dtype and job into buckets of up to
// `bucket_bytes`, each at its last member's place; returns how many.
int64_t FillBuckets(ir::Program& local, int64_t bucket_bytes, bool chained) {
  const auto& ops = local.block().ops();
  // First use of every value, by op index.
  std::unordered_map<const ir::Value*, size_t> first_use;
  for (size_t i = 0; i < ops.size(); ++i) {
    for (const ir::Value* v : ops[i]->operands()) {
      if (v != nullptr && !first_use.count(v)) first_use[v] = i;
    }
  }
  const size_t never = std::numeric_limits<size_t>::max();

  std::vector<Bucket> done;
  std::map<std::string, Bucket> open;
  auto close = [&](const std::string& key) {
    auto it = open.find(key);
    if (it == open.end()) return;
    if (it->second.members.size() >= 2) done.push_back(std::move(it->second));
    open.erase(it);
  };
  for (size_t i = 0; i < ops.size(); ++i) {
    const ir::Operation& op = *ops[i];
    if (BucketOpOf(op).empty() || Chained(op) != chained) continue;
    const std::string key = BucketKey(op);
    // The bucket would run at op i: members whose results are needed before then cannot wait.
    if (open.count(key) && open[key].first_use <= i) close(key);
    Bucket& bucket = open[key];
    bucket.members.push_back(i);
    bucket.bytes += op.operand(0)->type().num_bytes();
    auto use = first_use.find(op.result(0));
    bucket.first_use = std::min(bucket.first_use, use == first_use.end() ? never : use->second);
    if (bucket.bytes >= bucket_bytes) close(key);
  }
  while (!open.empty()) close(open.begin()->first);
  if (done.empty()) return 0;

  // Rebuild: each bucket's op takes the place of its last member and its members' results.
  std::unordered_map<size_t, const Bucket*> emit_at;
  std::vector<bool> fused(ops.size(), false);
  for (const Bucket& b : done) {
    emit_at[b.members.back()] = &b;
    for (size_t i : b.members) fused[i] = true;
  }
  std::vector<std::unique_ptr<ir::Operation>> old = std::move(local.block().mutable_ops());
  local.block().mutable_ops().clear();
  for (size_t i = 0; i < old.size(); ++i) {
    if (!fused[i]) {
      local.block().Append(std::move(old[i]));
      continue;
    }
    auto it = emit_at.find(i);
    if (it == emit_at.end()) continue;  // an earlier member: joins the bucket at its end
    std::vector<ir::Value*> operands;
    for (size_t m : it->second->members) operands.push_back(old[m]->operand(0));
    ir::AttributeMap attrs = old[i]->attrs();
    attrs.erase("axis");  // a reduce-scatter bucket cuts every member along dim 0
    auto bucket = std::make_unique<ir::Operation>(BucketOpOf(*old[i]), operands, std::move(attrs));
    bucket->CopyRoleAndChunk(*old[i]);
    for (size_t m : it->second->members) bucket->add_result(old[m]->result(0));
    local.block().Append(std::move(bucket));
  }
  return static_cast<int64_t>(done.size());
}

}  // namespace

// Two rounds: the reductions of the backward's gradients, then (hybrid ZeRO) the all-reduces of
// the shards those reduce-scattered, placed after their buckets and bucketed in turn.
absl::StatusOr<int64_t> ScheduleGradientAllReduces(ir::Program& local, int64_t bucket_bytes) {
  int64_t buckets = 0;
  for (bool chained : {false, true}) {
    HoistGradientReductions(local, chained);
    if (bucket_bytes > 0) buckets += FillBuckets(local, bucket_bytes, chained);
  }
  return buckets;
}

}  // namespace pdist::passes

// Reshard planner: two phases over the mesh dims, each step a primitive of passes/reshard/.
//
// Phase 1 takes every mesh dim whose placement must change away from its source placement:
// Partial → reduce-scatter straight into the target Shard when that tensor dim is free, else
// all-reduce; Shard(d) → all-to-all into the target Shard(d') when d' is free, else
// all-gather. Phase 2 then turns the Replicate dims that remain into their targets: a local
// slice for Shard, make_partial for Partial. Which primitive applies, and in which order they
// are tried, is each primitive's own definition (passes/reshard/registry.cc). Each step changes
// one mesh dim, so the distributions in between are valid DistAttrs and the plan prints as a
// chain of them.
#include "passes/reshard_plan.h"

#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "ir/dist/remesh.h"
#include "ir/status.h"
#include "passes/reshard/reshard_primitive.h"

namespace pdist::passes {
namespace {

using ir::Placement;

// Whether `tensor_dim` is sharded by some mesh dim other than `except`.
bool ShardedElsewhere(const std::vector<Placement>& p, int64_t tensor_dim, size_t except) {
  for (size_t m = 0; m < p.size(); ++m) {
    if (m != except && p[m].is_shard() && p[m].dim == tensor_dim) return true;
  }
  return false;
}

std::string CompactPlacement(const Placement& p) {
  if (p.is_shard()) return absl::StrCat("S(", p.dim, ")");
  if (p.is_partial()) return p.reduce == ir::ReduceType::kSum ? "P" : absl::StrCat("P(", ir::ReduceTypeName(p.reduce), ")");
  return "R";
}

}  // namespace

const char* ReshardStepName(ReshardStep::Kind kind) { return ReshardPrimitiveOf(kind).name; }

std::string ReshardStep::ToString() const {
  if (kind == Kind::kSendRecv) return absl::StrCat("send_recv(to ", after.mesh.ToString(), ")");
  if (kind == Kind::kRemesh) return absl::StrCat("remesh(to ", after.mesh.ToString(), ")");
  std::string s = absl::StrCat(ReshardStepName(kind), "(mesh dim ", mesh_dim);
  if (kind == Kind::kAllToAll) absl::StrAppend(&s, ", axis ", from_tensor_dim, " → ", tensor_dim);
  else if (tensor_dim >= 0) absl::StrAppend(&s, ", axis ", tensor_dim);
  if (kind == Kind::kAllReduce || kind == Kind::kReduceScatter || kind == Kind::kMakePartial) {
    absl::StrAppend(&s, ", ", ir::ReduceTypeName(reduce));
  }
  return s + ")";
}

std::string CompactPlacements(const ir::DistAttr& attr) {
  std::string s;
  for (const Placement& p : attr.ToPlacements()) s += CompactPlacement(p);
  return s;
}

std::string ReshardPlan::ToString() const {
  std::vector<std::string> chain = {CompactPlacements(source)};
  for (const ReshardStep& step : steps) {
    chain.push_back(CompactPlacements(step.after));
    const ir::ProcessMesh& mesh = step.after.mesh;
    if (mesh == source.mesh) continue;
    // Another mesh over the same processes by its shape, another stage's by its ids.
    if (mesh.process_ids() == source.mesh.process_ids()) absl::StrAppend(&chain.back(), "@", absl::StrJoin(mesh.shape(), "x"));
    else absl::StrAppend(&chain.back(), "@[", absl::StrJoin(mesh.process_ids(), ","), "]");
  }
  return absl::StrJoin(chain, " → ");
}

namespace {

// Between two meshes: on the source, to the target's placements (same mesh shape) or to
// Replicate; the move; on the target, from Replicate to the target's placements if needed.
absl::StatusOr<ReshardPlan> PlanAcrossMeshes(const ir::DistAttr& source, const ir::DistAttr& target,
                                             const ir::Shape& shape) {
  const auto rank = static_cast<int64_t>(shape.size());
  const bool same_shape = source.mesh.shape() == target.mesh.shape();
  ir::DistAttr goal = ir::DistAttr::Replicated(source.mesh, rank);
  if (same_shape) {
    PDIST_ASSIGN_OR_RETURN(goal, ir::DistAttr::FromPlacements(source.mesh, rank, target.ToPlacements()));
  }
  PDIST_ASSIGN_OR_RETURN(ReshardPlan plan, PlanReshard(source, goal, shape));
  plan.target = target;
  ReshardStep move;
  move.kind = ReshardStep::Kind::kSendRecv;
  move.mesh_dim = -1;
  move.after = same_shape ? target : ir::DistAttr::Replicated(target.mesh, rank);
  plan.steps.push_back(move);
  if (!same_shape) {
    PDIST_ASSIGN_OR_RETURN(ReshardPlan rest, PlanReshard(move.after, target, shape));
    for (ReshardStep& step : rest.steps) plan.steps.push_back(std::move(step));
  }
  return plan;
}

// Between a mesh and one that splits a dim of it, over the same processes: the steps on the
// mesh both ends can be said on, the free remesh before them (to the target's mesh) or after
// them (from the source's). Nullopt when neither end carries over (a shard over half of a split
// dim, to a mesh that has it whole).
std::optional<absl::StatusOr<ReshardPlan>> PlanWithRemesh(const ir::DistAttr& source, const ir::DistAttr& target,
                                                          const ir::Shape& shape) {
  ReshardStep remesh;
  remesh.kind = ReshardStep::Kind::kRemesh;
  remesh.mesh_dim = -1;
  if (std::optional<ir::DistAttr> start = ir::Remesh(source, target.mesh)) {
    absl::StatusOr<ReshardPlan> rest = PlanReshard(*start, target, shape);
    if (!rest.ok()) return rest;
    remesh.after = *start;
    ReshardPlan plan{source, target, shape, {remesh}};
    for (ReshardStep& step : rest->steps) plan.steps.push_back(std::move(step));
    return plan;
  }
  if (std::optional<ir::DistAttr> end = ir::Remesh(target, source.mesh)) {
    absl::StatusOr<ReshardPlan> plan = PlanReshard(source, *end, shape);
    if (!plan.ok()) return plan;
    plan->target = target;
    remesh.after = target;
    plan->steps.push_back(std::move(remesh));
    return plan;
  }
  return std::nullopt;
}

}  // namespace

absl::Status CheckEvenShards(const ir::DistAttr& attr, const ir::Shape& shape, const std::string& what) {
  for (size_t d = 0; d < attr.dims_mapping.size() && d < shape.size(); ++d) {
    const int64_t m = attr.dims_mapping[d];
    if (m < 0) continue;
    const int64_t ways = attr.mesh.dim_size(m);
    if (shape[d] % ways != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          what, ": tensor dim ", d, " of size ", shape[d], " does not split evenly over mesh dim ",
          attr.mesh.dim_names()[static_cast<size_t>(m)], " (", ways, " ranks); uneven shards are not supported"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<ReshardPlan> PlanReshard(const ir::DistAttr& source, const ir::DistAttr& target, const ir::Shape& shape) {
  PDIST_RETURN_IF_ERROR(source.Verify(shape));
  PDIST_RETURN_IF_ERROR(target.Verify(shape));
  PDIST_RETURN_IF_ERROR(CheckEvenShards(source, shape, "reshard source"));
  PDIST_RETURN_IF_ERROR(CheckEvenShards(target, shape, "reshard target"));
  if (!(source.mesh == target.mesh)) {
    if (auto plan = PlanWithRemesh(source, target, shape)) return *std::move(plan);
    return PlanAcrossMeshes(source, target, shape);
  }

  ReshardPlan plan{source, target, shape, {}};
  const auto rank = static_cast<int64_t>(shape.size());
  std::vector<Placement> now = source.ToPlacements();
  const std::vector<Placement> want = target.ToPlacements();
  auto emit = [&](ReshardStep step, size_t m, Placement next) -> absl::Status {
    now[m] = next;
    PDIST_ASSIGN_OR_RETURN(step.after, ir::DistAttr::FromPlacements(source.mesh, rank, now));
    step.mesh_dim = static_cast<int64_t>(m);
    plan.steps.push_back(std::move(step));
    return absl::OkStatus();
  };

  // Phase 1 leaves every source placement that differs from its target; phase 2 reaches the
  // targets still missing from Replicate. Each takes the first primitive that applies. Phase 1
  // sweeps twice: first the Partials that reduce-scatter straight into their target shard, so
  // that the reductions after them (an all-reduce along another mesh dim) move 1/n of the bytes:
  // hybrid ZeRO's gradient is reduce-scattered over the shards, then all-reduced over the replicas.
  for (int sweep : {0, 1, 2}) {
    const int phase = sweep == 2 ? 2 : 1;
    for (size_t m = 0; m < now.size(); ++m) {
      const Placement p = now[m], t = want[m];
      if (p == t || (phase == 1 && p.is_replicate())) continue;
      const bool to_dim_free = t.is_shard() && !ShardedElsewhere(now, t.dim, m);
      if (sweep == 0 && !(p.is_partial() && to_dim_free)) continue;
      const ReshardPrimitive* chosen = nullptr;
      for (const ReshardPrimitive& primitive : ReshardPrimitives()) {
        if (primitive.phase == phase && primitive.applies(p, t, to_dim_free)) {
          chosen = &primitive;
          break;
        }
      }
      if (chosen == nullptr) {
        return absl::InternalError(absl::StrCat("no reshard primitive takes mesh dim ", m, " from ", p.ToString(),
                                                " to ", t.ToString(), " (phase ", phase, ")"));
      }
      auto [step, next] = chosen->make(p, t);
      PDIST_RETURN_IF_ERROR(emit(std::move(step), m, next));
    }
  }
  if (now != want) {
    return absl::InternalError(absl::StrCat("reshard plan ", plan.ToString(), " does not reach ", CompactPlacements(target)));
  }
  return plan;
}

absl::StatusOr<ReshardPlan> ReshardPlanCache::Get(const ir::DistAttr& source, const ir::DistAttr& target,
                                                 const ir::Shape& shape) {
  auto key = std::make_tuple(source.ToString(), target.ToString(), shape);
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = plans_.find(key);
    if (it != plans_.end()) return it->second;
  }
  PDIST_ASSIGN_OR_RETURN(ReshardPlan plan, PlanReshard(source, target, shape));
  std::lock_guard<std::mutex> lock(mu_);
  plans_.emplace(std::move(key), plan);
  return plan;
}

size_t ReshardPlanCache::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return plans_.size();
}

}  // namespace pdist::passes

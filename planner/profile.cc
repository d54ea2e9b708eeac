#include "planner/profile.h"

#include "absl/strings/str_cat.h"
#include "passes/distributed_programs.h"
#include "ir/status.h"

namespace pdist::planner {
namespace {

absl::StatusOr<passes::DistributedPrograms> BuildStages(const ProfileProgram& program, const ProfileKey& key,
                                                        const std::string& schedule) {
  strategy::Strategy s;
  s.mp_degree = key.mp;
  s.pp_degree = static_cast<int64_t>(program.split_before.size()) + 1;
  s.sp = key.sp;
  s.pipeline.enable = true;
  s.pipeline.schedule_mode = schedule;
  s.pipeline.accumulate_steps = program.accumulate_steps;
  s.pipeline.micro_batch_size = key.micro_batch;
  s.pipeline.split_before = program.split_before;
  if (key.recompute != Recompute::kNone) {
    s.recompute.enable = true;
    s.recompute.granularity = RecomputeName(key.recompute);
    // A profile stage is one segment (a layer): full recompute replays it whole, as it replays
    // each layer of the whole model.
    s.recompute.segments = "stages";
  }
  return passes::BuildDistributedPrograms(program.forward, s, passes::OptimizerConfig{});
}

std::string Where(const ProfileKey& key) {
  return absl::StrCat("profiling mp=", key.mp, key.sp ? " sp" : "", " micro-batch ", key.micro_batch,
                      key.recompute != Recompute::kNone ? " recompute " : "",
                      key.recompute != Recompute::kNone ? RecomputeName(key.recompute) : "");
}

}  // namespace

absl::StatusOr<const ModelProfile*> Profiler::Get(const ProfileKey& key) {
  auto it = cache_.find(key);
  if (it == cache_.end()) it = cache_.emplace(key, Measure(key)).first;
  if (!it->second.ok()) return it->second.status();
  return &*it->second;
}

Profiler Profiler::OnCluster(strategy::Cluster cluster) const {
  Profiler other(model_, std::move(cluster));
  other.programs_ = programs_;
  return other;
}

absl::StatusOr<Profiler::KindPrograms> Profiler::Build(const ProfileKey& key) const {
  const std::string where = Where(key);
  absl::StatusOr<ProfileProgram> program = model_.profile_program(key.micro_batch);
  if (!program.ok()) return WithContext(program.status(), where);
  // ZBH1 tells the weight gradients apart; a model whose backward cannot be split runs 1F1B,
  // and its whole backward counts as input gradients.
  absl::StatusOr<passes::DistributedPrograms> built = BuildStages(*program, key, "ZBH1");
  if (!built.ok()) built = BuildStages(*program, key, "1F1B");
  if (!built.ok()) return WithContext(built.status(), where);
  passes::ReshardPlanCache plans;
  KindPrograms programs;
  std::vector<bool> built_kind(static_cast<size_t>(model_.kinds), false);
  for (size_t s = 0; s < program->stage_kind.size(); ++s) {
    const int64_t kind = program->stage_kind[s];
    if (kind < 0) continue;
    const int64_t rank = static_cast<int64_t>(s) * key.mp;
    absl::StatusOr<ir::Program> local = passes::LocalProgram(built->train, passes::RankPipeline(rank, {}), plans);
    if (!local.ok()) return WithContext(local.status(), where);
    programs.emplace_back(kind, std::move(*local));
    built_kind[static_cast<size_t>(kind)] = true;
  }
  for (size_t kind = 0; kind < built_kind.size(); ++kind) {
    if (!built_kind[kind]) return absl::InternalError(absl::StrCat(where, ": no profile stage measures segment kind ", kind));
  }
  return programs;
}

absl::StatusOr<ModelProfile> Profiler::Measure(const ProfileKey& key) {
  auto it = programs_->find(key);
  if (it == programs_->end()) it = programs_->emplace(key, Build(key)).first;
  const absl::StatusOr<KindPrograms>& programs = it->second;
  if (!programs.ok()) return programs.status();
  ModelProfile profile;
  profile.kinds.resize(static_cast<size_t>(model_.kinds));
  for (const auto& [kind, local] : *programs) {
    absl::StatusOr<SegmentCost> cost = PriceLocalProgram(local, cluster_);
    if (!cost.ok()) return WithContext(cost.status(), Where(key));
    profile.kinds[static_cast<size_t>(kind)] = *cost;
  }
  return profile;
}

}  // namespace pdist::planner

#include "planner/profile.h"

#include "absl/strings/str_cat.h"
#include "passes/distributed_programs.h"
#include "ir/status.h"

namespace pdist::planner {
namespace {

constexpr int64_t kProfileStages = 3;

absl::StatusOr<passes::DistributedPrograms> BuildStages(const ProfileProgram& program, const ProfileKey& key,
                                                        const std::string& schedule) {
  strategy::Strategy s;
  s.mp_degree = key.mp;
  s.pp_degree = kProfileStages;
  s.sp = key.sp;
  s.pipeline.enable = true;
  s.pipeline.schedule_mode = schedule;
  s.pipeline.accumulate_steps = program.accumulate_steps;
  s.pipeline.micro_batch_size = key.micro_batch;
  s.pipeline.split_before = program.split_before;
  return passes::BuildDistributedPrograms(program.forward, s, passes::OptimizerConfig{});
}

}  // namespace

absl::StatusOr<const ModelProfile*> Profiler::Get(const ProfileKey& key) {
  auto it = cache_.find(key);
  if (it == cache_.end()) it = cache_.emplace(key, Measure(key)).first;
  if (!it->second.ok()) return it->second.status();
  return &*it->second;
}

absl::StatusOr<ModelProfile> Profiler::Measure(const ProfileKey& key) const {
  const std::string where = absl::StrCat("profiling mp=", key.mp, key.sp ? " sp" : "", " micro-batch ", key.micro_batch);
  absl::StatusOr<ProfileProgram> program = model_.profile_program(key.micro_batch);
  if (!program.ok()) return WithContext(program.status(), where);
  // ZBH1 tells the weight gradients apart; a model whose backward cannot be split runs 1F1B,
  // and its whole backward counts as input gradients.
  absl::StatusOr<passes::DistributedPrograms> built = BuildStages(*program, key, "ZBH1");
  if (!built.ok()) built = BuildStages(*program, key, "1F1B");
  if (!built.ok()) return WithContext(built.status(), where);
  passes::ReshardPlanCache plans;
  SegmentCost stage[kProfileStages];
  for (int64_t s = 0; s < kProfileStages; ++s) {
    absl::StatusOr<ir::Program> local = passes::LocalProgram(built->train, passes::RankPipeline(s * key.mp, {}), plans);
    if (!local.ok()) return WithContext(local.status(), where);
    absl::StatusOr<SegmentCost> cost = PriceLocalProgram(*local, cluster_);
    if (!cost.ok()) return WithContext(cost.status(), where);
    stage[s] = *cost;
  }
  ModelProfile profile;
  profile.layer = stage[1];
  profile.embedding = stage[0] - stage[1];
  profile.head = stage[2] - stage[1] * static_cast<double>(program->layers - 2);
  // The layer's own boundary is what every cut sends; the embedding's and head's differences of
  // sends are not theirs.
  profile.embedding.boundary_bytes = profile.head.boundary_bytes = 0;
  // The first stage has no upstream to send input gradients to, so ZBH1's split puts all of its
  // backward into W, layer 0's included: stage 0 − layer leaves the embedding a negative B and
  // a W too large by as much. Their sum is the embedding's backward; it is a weight gradient.
  for (auto* by_role : {&profile.embedding.seconds, &profile.embedding.mp_comm_seconds}) {
    auto& r = *by_role;
    r[static_cast<size_t>(ir::OpRole::kBackwardWeight)] += r[static_cast<size_t>(ir::OpRole::kBackward)];
    r[static_cast<size_t>(ir::OpRole::kBackward)] = 0;
  }
  return profile;
}

}  // namespace pdist::planner

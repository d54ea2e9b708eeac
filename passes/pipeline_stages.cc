// Pipeline stages: balanced cuts where few values cross, stage meshes, boundary reshards.
#include "passes/pipeline_stages.h"

#include <algorithm>
#include <limits>
#include <map>
#include <unordered_map>

#include "absl/strings/str_cat.h"
#include "ir/dist/shard_tensor.h"
#include "ir/op_def.h"
#include "ir/status.h"
#include "passes/annotate.h"
#include "passes/annotate_from_strategy.h"
#include "passes/completion.h"

namespace pdist::passes {
namespace {

using ir::Operation;
using ir::Value;

// The levels at which cuts may go: each distinct number of crossing values, fewest first.
std::vector<int64_t> CrossingLevels(const std::vector<int64_t>& crossing) {
  std::vector<int64_t> levels(crossing.begin() + (crossing.empty() ? 0 : 1), crossing.end());
  std::sort(levels.begin(), levels.end());
  levels.erase(std::unique(levels.begin(), levels.end()), levels.end());
  return levels;
}

// The last op of `ops` that reads each value made by one of them (arguments left out).
std::unordered_map<const Value*, size_t> LastUses(const std::vector<const Operation*>& ops) {
  std::unordered_map<const Value*, size_t> last_use;
  for (size_t i = 0; i < ops.size(); ++i) {
    for (const Value* v : ops[i]->operands()) {
      if (v != nullptr && !v->is_argument()) last_use[v] = i;
    }
  }
  return last_use;
}

std::vector<const Operation*> OpsOf(const ir::Program& program) {
  std::vector<const Operation*> ops;
  for (const auto& op : program.block().ops()) ops.push_back(op.get());
  return ops;
}

// reach[c]: the last op that reads a value made before op c (c itself when none is read at or
// after it). A stage that begins at cut c must reach past reach[c], or a value made before it
// would be read two stages on.
std::vector<size_t> ReachOfCuts(const std::vector<const Operation*>& ops) {
  const std::unordered_map<const Value*, size_t> last_use = LastUses(ops);
  std::vector<size_t> reach(ops.size() + 1, 0);
  size_t running = 0;
  for (size_t c = 0; c <= ops.size(); ++c) {
    reach[c] = std::max(running, c);
    if (c == ops.size()) break;
    for (const Value* r : ops[c]->results()) {
      if (auto it = last_use.find(r); it != last_use.end()) running = std::max(running, it->second);
    }
  }
  return reach;
}

}  // namespace

double ForwardFlops(const Operation& op) {
  const ir::OpDef* def = ir::OpRegistry::Global().Find(op.type());
  if (def == nullptr || !def->cost) return 0;
  ir::InputTypes inputs;
  for (const Value* v : op.operands()) inputs.push_back(v == nullptr ? nullptr : &v->type());
  std::vector<ir::TensorType> outputs;
  for (const Value* r : op.results()) outputs.push_back(r->type());
  return def->cost(inputs, outputs, op.attrs()).flops;
}

std::vector<int64_t> CrossingValues(const ir::Program& program) { return CrossingValues(OpsOf(program)); }

std::vector<int64_t> CrossingValues(const std::vector<const ir::Operation*>& ops) {
  const std::unordered_map<const Value*, size_t> last_use = LastUses(ops);
  std::vector<int64_t> delta(ops.size() + 1, 0);
  for (size_t i = 0; i < ops.size(); ++i) {
    for (const Value* r : ops[i]->results()) {
      auto it = last_use.find(r);
      if (it == last_use.end() || it->second <= i) continue;
      ++delta[i + 1];
      --delta[it->second + 1];
    }
  }
  std::vector<int64_t> crossing(ops.size(), 0);
  int64_t running = 0;
  for (size_t c = 1; c < ops.size(); ++c) crossing[c] = running += delta[c];
  return crossing;
}

absl::StatusOr<std::vector<int64_t>> BalanceStages(const ir::Program& forward, int64_t virtual_stages) {
  const auto& ops = forward.block().ops();
  const size_t n = ops.size();
  if (virtual_stages < 1) return absl::InvalidArgumentError(absl::StrCat("stages: need at least 1, got ", virtual_stages));
  std::vector<int64_t> stage_of(n, 0);
  if (virtual_stages == 1) return stage_of;
  const size_t k = static_cast<size_t>(virtual_stages);
  const std::vector<int64_t> crossing = CrossingValues(forward);
  const std::vector<size_t> reach = ReachOfCuts(OpsOf(forward));
  std::vector<double> prefix(n + 1, 0);
  for (size_t i = 0; i < n; ++i) prefix[i + 1] = prefix[i] + ForwardFlops(*ops[i]) + 1;  // +1: every op costs something
  const double inf = std::numeric_limits<double>::infinity();
  // Cuts where the fewest values cross, loosening the bound until k stages fit. A value may
  // cross one cut only: one read two stages on would be a message between stages that are not
  // neighbours, which no schedule orders (under NCCL an interleaved step deadlocks on it).
  std::vector<size_t> pos;
  std::vector<std::vector<size_t>> from;
  size_t most_cuts = 0;
  bool found = false;
  for (int64_t bound : CrossingLevels(crossing)) {
    pos = {0};
    for (size_t c = 1; c < crossing.size(); ++c) {
      if (crossing[c] <= bound) pos.push_back(c);
    }
    most_cuts = pos.size() - 1;
    if (most_cuts < k - 1) continue;
    pos.push_back(n);
    // Linear partition over the candidate positions: best[j][i] is the smallest possible cost
    // of the heaviest of j stages covering ops [0, pos[i]).
    const size_t m = pos.size();
    std::vector<std::vector<double>> best(k + 1, std::vector<double>(m, inf));
    from.assign(k + 1, std::vector<size_t>(m, 0));
    best[0][0] = 0;
    for (size_t j = 1; j <= k; ++j) {
      for (size_t i = 1; i < m; ++i) {
        for (size_t prev = j - 1; prev < i; ++prev) {
          if (best[j - 1][prev] == inf || (prev > 0 && reach[pos[prev]] >= pos[i])) continue;
          const double cost = std::max(best[j - 1][prev], prefix[pos[i]] - prefix[pos[prev]]);
          if (cost < best[j][i]) {
            best[j][i] = cost;
            from[j][i] = prev;
          }
        }
      }
    }
    if (best[k][m - 1] < inf) {
      found = true;
      break;
    }
  }
  if (most_cuts < k - 1) {
    return absl::InvalidArgumentError(absl::StrCat("stages: the program (", n, " ops) can be cut in only ", most_cuts,
                                                   " places; ", virtual_stages,
                                                   " pipeline stages (pp_degree × vpp_degree) need ", k - 1));
  }
  if (!found) {
    // The most stages there can be: each cut as early as the previous one allows (reach never
    // decreases, so the earliest choice leaves the most room).
    int64_t most = 1;
    for (size_t cut = 0, c = 1; c < n; ++c) {
      if (cut == 0 || reach[cut] < c) {
        cut = c;
        ++most;
      }
    }
    return absl::InvalidArgumentError(absl::StrCat(
        "stages: the program (", n, " ops) cannot be cut into ", virtual_stages,
        " pipeline stages (pp_degree × vpp_degree) so that every value is read on its own stage or the next; "
        "it can be cut into at most ", most, ": ask for fewer, or a model with more layers"));
  }
  for (size_t j = k, i = pos.size() - 1; j >= 1; --j) {
    const size_t prev = from[j][i];
    for (size_t op = pos[prev]; op < pos[i]; ++op) stage_of[op] = static_cast<int64_t>(j - 1);
    i = prev;
  }
  return stage_of;
}

namespace {

// A mark's first reader may follow ops that read no argument and carry the values it reads (under
// mixed precision, the f32 cast before a layer norm: at the norm both the cast and the bf16
// residual cross, before the cast the residual alone). The stage then starts at the latest such
// op where the fewest values cross: the boundary sends less, and the ops it moves read no
// parameter, so every parameter stays on the stage the mark names.
size_t EarlierWhereFewerCross(const ir::Program& forward, const std::vector<int64_t>& crossing, size_t previous,
                              size_t start) {
  const auto& ops = forward.block().ops();
  size_t best = start;
  for (size_t p = start; p > previous + 1; --p) {
    const bool reads_an_argument = std::any_of(ops[p - 1]->operands().begin(), ops[p - 1]->operands().end(),
                                               [](const Value* v) { return v != nullptr && v->is_argument(); });
    if (reads_an_argument) break;
    if (crossing[p - 1] < crossing[best]) best = p - 1;
  }
  return best;
}

}  // namespace

absl::StatusOr<std::vector<int64_t>> StagesFromMarks(const ir::Program& forward,
                                                     const std::vector<std::string>& split_before) {
  const auto& ops = forward.block().ops();
  const std::vector<int64_t> crossing = CrossingValues(forward);
  std::vector<int64_t> stage_of(ops.size(), 0);
  size_t previous = 0;
  for (size_t k = 0; k < split_before.size(); ++k) {
    size_t start = ops.size();
    for (size_t i = 0; i < ops.size() && start == ops.size(); ++i) {
      for (const Value* v : ops[i]->operands()) {
        if (v != nullptr && v->is_argument() && GlobMatch(split_before[k], v->name())) start = i;
      }
    }
    const std::string key = absl::StrCat("pipeline.split_before[", k, "] '", split_before[k], "'");
    if (start == ops.size()) {
      // `?` and `[..]` look like wildcards but are matched as themselves (ir/glob.h).
      const bool shell_like = split_before[k].find_first_of("?[") != std::string::npos;
      return absl::InvalidArgumentError(absl::StrCat(key, " matches no argument an op reads",
                                                     shell_like ? " ('*' is the only wildcard: '?' and '[' match themselves)" : ""));
    }
    if (start == 0) {
      return absl::InvalidArgumentError(absl::StrCat(key, " starts at op #0, where the first stage starts unmarked: ",
                                                     "list where the stages after the first begin"));
    }
    if (start <= previous) {
      return absl::InvalidArgumentError(absl::StrCat(key, " starts at op #", start, ", not after the previous stage's start (op #",
                                                     previous, "): list the stages in program order"));
    }
    start = EarlierWhereFewerCross(forward, crossing, previous, start);
    for (size_t i = start; i < ops.size(); ++i) stage_of[i] = static_cast<int64_t>(k + 1);
    previous = start;
  }
  return stage_of;
}

namespace {

// The meshes of the pp stages: stage s holds ranks s·dp·mp … (s+1)·dp·mp − 1 as [dp, mp].
absl::StatusOr<std::vector<ir::ProcessMesh>> StageMeshes(const strategy::Strategy& strategy) {
  std::vector<ir::ProcessMesh> meshes;
  const int64_t per_mesh = strategy.dp_degree * strategy.mp_degree;
  for (int64_t s = 0; s < strategy.pp_degree; ++s) {
    std::vector<int64_t> ids;
    for (int64_t r = 0; r < per_mesh; ++r) ids.push_back(s * per_mesh + r);
    PDIST_ASSIGN_OR_RETURN(ir::ProcessMesh mesh,
                           ir::ProcessMesh::Create({strategy.dp_degree, strategy.mp_degree}, ids, {"dp", "mp"}));
    meshes.push_back(std::move(mesh));
  }
  return meshes;
}

// Cuts a forward program into virtual stages, given each op's virtual stage and the one-stage
// plan (the strategy's dp/mp/sp as if there were no pipeline), completed on a copy (`single`)
// so that every value that crosses a cut can be received as one stage would hold it.
class StageCutter {
 public:
  StageCutter(ir::Program& forward, const ir::Program& single, const StrategyAnnotationPlan& plan,
              std::vector<int64_t> stage_of, PipelineStages& out)
      : forward_(forward), single_(single), plan_(plan), stage_of_(std::move(stage_of)), out_(out),
        pp_(static_cast<int64_t>(out.meshes.size())) {}

  absl::Status Run() {
    PDIST_RETURN_IF_ERROR(FindHomes());
    PDIST_RETURN_IF_ERROR(AnnotateOnStages());
    PinArguments();
    InsertBoundaryReshards();
    return absl::OkStatus();
  }

 private:
  // A value's home: the virtual stage of its producer, or of an argument's first reader; and
  // each virtual stage's forward FLOPs.
  absl::Status FindHomes() {
    const auto& ops = forward_.block().ops();
    for (size_t i = 0; i < ops.size(); ++i) {
      if (stage_of_[i] < 0 || stage_of_[i] >= static_cast<int64_t>(out_.flops.size())) {
        return absl::InternalError(absl::StrCat("stages: op #", i, " is given virtual stage ", stage_of_[i], " of ",
                                                out_.flops.size()));
      }
      for (const Value* v : ops[i]->operands()) {
        if (v == nullptr) continue;
        home_.emplace(v, stage_of_[i]);
        // BalanceStages never cuts so; marks (pipeline.split_before) may. A value that stays on
        // its rank (pp 2: virtual stages k and k + 2) sends nothing and is let through.
        const int64_t skipped = stage_of_[i] - HomeOf(v);
        if (!v->is_argument() && skipped > 1 && skipped % pp_ != 0) {
          return absl::InvalidArgumentError(absl::StrCat(
              "stages: ", ops[i]->Describe(), " on virtual stage ", stage_of_[i], " reads %", v->id(), " (made by ",
              v->producer()->Describe(), ") from virtual stage ", HomeOf(v),
              " on another rank: a value may cross one cut only (a message between stages that are not neighbours "
              "adds a dependency no schedule orders); move the pipeline.split_before marks"));
        }
      }
      for (const Value* r : ops[i]->results()) home_[r] = stage_of_[i];
      out_.flops[static_cast<size_t>(stage_of_[i])] += ForwardFlops(*ops[i]);
    }
    return absl::OkStatus();
  }

  int64_t HomeOf(const Value* v) const {
    auto it = home_.find(v);
    return it == home_.end() ? int64_t{0} : it->second;
  }

  const ir::ProcessMesh& MeshOf(int64_t virtual_stage) const { return out_.meshes[static_cast<size_t>(virtual_stage % pp_)]; }

  // What one stage's completion gave `v`, moved onto the mesh of `virtual_stage`, not Partial.
  ir::DistAttr OneStageAttr(const Value* v, int64_t virtual_stage) const {
    ir::DistAttr attr = single_.FindValue(v->id())->dist_attr().value_or(ir::DistAttr::Replicated(plan_.mesh, v->type().rank()));
    attr.partial.clear();
    attr.mesh = MeshOf(virtual_stage);
    return attr;
  }

  absl::Status AnnotateOnStages() {
    for (const StrategyAnnotation& a : plan_.annotations) {
      PDIST_RETURN_IF_ERROR(ir::ShardTensor(a.value, MeshOf(HomeOf(a.value)), a.placements));
    }
    return absl::OkStatus();
  }

  // Every other argument is pinned to its home stage too, as one stage's completion places it:
  // left open, completion could put a tied embedding on the stage of its second reader, which
  // would then send it upstream inside each forward and wait on itself.
  void PinArguments() {
    for (Value* arg : forward_.block().arguments()) {
      if (arg->dist_attr()) continue;
      arg->set_dist_attr(OneStageAttr(arg, HomeOf(arg)));
      arg->set_dist_annotated(true);
    }
  }

  // Each op moves to its virtual stage's chunk; an operand from another virtual stage is read
  // through a reshard to this one, made once per (value, virtual stage). A parameter's (a tied
  // embedding's table, read by the head on the last stage) is the same for every micro-batch:
  // its reshard is in the prologue, which sends it once per step, not once per micro-batch.
  void InsertBoundaryReshards() {
    std::vector<std::unique_ptr<Operation>> old = std::move(forward_.block().mutable_ops());
    forward_.block().mutable_ops().clear();
    std::map<std::pair<const Value*, int64_t>, Value*> moved;  // (value, virtual stage) → its copy there
    for (size_t i = 0; i < old.size(); ++i) {
      const int64_t stage = stage_of_[i];
      for (size_t k = 0; k < old[i]->num_operands(); ++k) {
        Value* v = old[i]->operand(k);
        if (v == nullptr || HomeOf(v) == stage) continue;
        Value*& copy = moved[{v, stage}];
        if (copy == nullptr) {
          copy = forward_.NewValue(v->type(), ir::ValueRole::kActivation);
          copy->set_dist_attr(OneStageAttr(v, stage));
          copy->set_dist_annotated(true);
          auto reshard = std::make_unique<Operation>("reshard", std::vector<Value*>{v}, ir::AttributeMap{});
          reshard->set_chunk(stage / pp_);
          if (v->role() == ir::ValueRole::kParameter) reshard->set_role(ir::OpRole::kPrologue);
          reshard->add_result(copy);
          forward_.block().Append(std::move(reshard));
          ++out_.boundary_reshards;
        }
        old[i]->set_operand(k, copy);
      }
      old[i]->set_chunk(stage / pp_);
      forward_.block().Append(std::move(old[i]));
    }
  }

  ir::Program& forward_;
  const ir::Program& single_;
  const StrategyAnnotationPlan& plan_;
  std::vector<int64_t> stage_of_;
  PipelineStages& out_;
  int64_t pp_;
  std::unordered_map<const Value*, int64_t> home_;
};

}  // namespace

absl::StatusOr<PipelineStages> AnnotatePipelineStages(const strategy::Strategy& strategy, ir::Program& forward) {
  const int64_t pp = strategy.pp_degree;
  const int64_t vpp = strategy.pipeline.vpp_degree;
  if (pp < 1 || vpp < 1) {
    return absl::InvalidArgumentError(absl::StrCat("stages: pp_degree and vpp_degree must be ≥ 1, got ", pp, " and ", vpp));
  }
  if (!strategy.annotations.empty() && pp > 1) {
    return absl::UnimplementedError("stages: per-tensor annotations together with pp_degree > 1 are not supported; "
                                    "give the degrees only (dp_degree, mp_degree, sp, pp_degree)");
  }
  strategy::Strategy per_stage = strategy;
  per_stage.pp_degree = 1;
  PDIST_ASSIGN_OR_RETURN(StrategyAnnotationPlan plan, PlanStrategyAnnotations(per_stage, forward));

  // Where a value crosses a cut, the next stage receives it as this stage would hold it: the
  // per-stage plan completed on one mesh says how.
  ir::Program single = forward.Clone();
  for (const StrategyAnnotation& a : plan.annotations) {
    PDIST_RETURN_IF_ERROR(ir::ShardTensor(single.FindValue(a.value->id()), plan.mesh, a.placements));
  }
  PDIST_RETURN_IF_ERROR(WithContext(CompleteDistAttrs(single).status(), "stages: completing one stage"));

  PDIST_ASSIGN_OR_RETURN(std::vector<int64_t> stage_of, strategy.pipeline.split_before.empty()
                                                            ? BalanceStages(forward, pp * vpp)
                                                            : StagesFromMarks(forward, strategy.pipeline.split_before));
  PipelineStages out;
  PDIST_ASSIGN_OR_RETURN(out.meshes, StageMeshes(strategy));
  out.flops.assign(static_cast<size_t>(pp * vpp), 0);
  PDIST_RETURN_IF_ERROR(StageCutter(forward, single, plan, std::move(stage_of), out).Run());
  return out;
}

}  // namespace pdist::passes

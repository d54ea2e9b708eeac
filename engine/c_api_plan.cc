// The C API's planner: pdist_program_plan searches the strategies for a program on a cluster,
// as pdist-plan does, and answers with pdist-plan's JSON document plus its text.
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "engine/c_api.h"
#include "engine/c_api_internal.h"
#include "ir/json_reader.h"
#include "ir/status.h"
#include "planner/fixed_choices.h"
#include "planner/planned_model.h"
#include "planner/report.h"
#include "planner/search.h"
#include "strategy/cluster.h"

namespace {

using pdist::engine::capi::Fail;
using pdist::engine::capi::ToCode;

struct PlanOptions {
  std::string cluster = "dgx-a100";
  int64_t gpus = 0;
  std::string strategy_json;  // empty: nothing fixed
  double memory_margin = 0.10;
  int64_t max_micro_batch = 0;  // planner::MaxMicroBatch's default
  bool mp_across_nodes = false;
  int64_t top = 5;
};

absl::Status WrongType(const std::string& key, const char* expected, const nlohmann::json& value) {
  return pdist::engine::capi::WrongOptionType("plan options", key, expected, value.dump());
}

absl::StatusOr<PlanOptions> ParsePlanOptions(const char* text) {
  PlanOptions o;
  if (text == nullptr) return o;
  PDIST_ASSIGN_OR_RETURN(const nlohmann::json j, pdist::ir::ParseJson(text, "plan options"));
  if (!j.is_object()) return absl::InvalidArgumentError(absl::StrCat("plan options must be a JSON object, got ", j.dump()));
  for (const auto& [key, value] : j.items()) {
    if (key == "cluster") {
      if (!value.is_string()) return WrongType(key, "a preset name or a cluster file path", value);
      o.cluster = value.get<std::string>();
    } else if (key == "gpus" || key == "max_micro_batch" || key == "top") {
      if (!value.is_number_integer()) return WrongType(key, "an integer", value);
      const int64_t n = value.get<int64_t>();
      if (n < (key == "gpus" ? 0 : 1)) return WrongType(key, key == "gpus" ? "an integer >= 0" : "an integer >= 1", value);
      (key == "gpus" ? o.gpus : key == "top" ? o.top : o.max_micro_batch) = n;
    } else if (key == "strategy") {
      if (!value.is_object()) return WrongType(key, "a Strategy object", value);
      o.strategy_json = value.dump();
    } else if (key == "memory_margin") {
      if (!value.is_number() || value.get<double>() < 0 || value.get<double>() >= 1) {
        return WrongType(key, "a number in [0, 1)", value);
      }
      o.memory_margin = value.get<double>();
    } else if (key == "mp_across_nodes") {
      if (!value.is_boolean()) return WrongType(key, "true or false", value);
      o.mp_across_nodes = value.get<bool>();
    } else {
      return absl::InvalidArgumentError(absl::StrCat("plan options: unknown key \"", key,
                                                     "\" (keys: cluster, gpus, strategy, memory_margin, "
                                                     "max_micro_batch, mp_across_nodes, top)"));
    }
  }
  return o;
}

// The program without its placements: the planner places tensors by the degrees it searches
// (Megatron's column/row/vocab-parallel), so hand annotations are not what it prices. Returns
// how many values were annotated.
int64_t DropPlacements(pdist::ir::Program& program) {
  int64_t annotated = 0;
  auto drop = [&annotated](pdist::ir::Value* v) {
    annotated += v->dist_annotated() ? 1 : 0;
    v->set_dist_attr(std::nullopt);
    v->set_dist_annotated(false);
  };
  for (pdist::ir::Value* arg : program.block().arguments()) drop(arg);
  for (const auto& op : program.block().ops()) {
    for (pdist::ir::Value* r : op->results()) drop(r);
  }
  return annotated;
}

absl::StatusOr<std::string> Plan(const pdist::ir::Program& program, const char* options_text) {
  namespace planner = pdist::planner;
  PDIST_ASSIGN_OR_RETURN(const PlanOptions o, ParsePlanOptions(options_text));
  if (o.cluster == "cpu-local") {
    return absl::InvalidArgumentError("plan options: \"cluster\": cpu-local is measured by `pdist-plan --calibrate -o "
                                      "FILE`; give that cluster file");
  }
  absl::StatusOr<pdist::strategy::Cluster> cluster = pdist::strategy::ClusterFromFileOrPreset(o.cluster, o.gpus);
  if (!cluster.ok()) return pdist::WithContext(cluster.status(), "plan options: \"cluster\"");
  pdist::ir::Program forward = program.Clone();
  const int64_t annotated = DropPlacements(forward);
  PDIST_ASSIGN_OR_RETURN(planner::PlannedModel model, planner::ModelFromProgram(std::move(forward), "the program"));
  if (annotated > 0) {
    absl::StrAppend(&model.description, "; its ", annotated,
                    " annotated tensors are placed by the degrees instead (the planner does not price annotations)");
  }
  planner::SearchOptions search;
  if (!o.strategy_json.empty()) {
    absl::StatusOr<planner::FixedChoices> fixed = planner::FixedChoicesFromStrategyJson(o.strategy_json);
    if (!fixed.ok()) return pdist::WithContext(fixed.status(), "plan options: \"strategy\"");
    search.fixed = *fixed;
  }
  search.tensor_parallel_across_nodes = o.mp_across_nodes;
  search.max_micro_batch = o.max_micro_batch;
  search.estimate.memory_margin = o.memory_margin;
  PDIST_ASSIGN_OR_RETURN(const planner::SearchResult result, planner::Search(model, *cluster, search));
  nlohmann::json out = planner::ReportJson(result, *cluster, o.top);
  out["model"] = model.description;
  out["report"] = planner::ReportText(result, *cluster);
  out["explanation"] = planner::ExplainText(result, o.top);
  return out.dump(2);
}

}  // namespace

extern "C" {

pdist_status pdist_program_plan(pdist_program* program, const char* options, const char** plan_json) {
  if (program == nullptr || plan_json == nullptr) return Fail("program or plan_json is NULL");
  absl::StatusOr<std::string> planned = Plan(program->program, options);
  if (!planned.ok()) return ToCode(planned.status());
  program->planned = *std::move(planned);
  *plan_json = program->planned.c_str();
  return ToCode(absl::OkStatus());
}

}  // extern "C"

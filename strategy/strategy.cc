// Strategy JSON reading, validation and writing.
#include "strategy/strategy.h"

#include <functional>
#include <map>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "ir/checked_math.h"
#include "ir/dist/process_mesh.h"
#include "ir/input_file.h"
#include "ir/json_reader.h"
#include "ir/op_def.h"
#include "ir/status.h"

namespace pdist::strategy {

namespace {

using Json = nlohmann::json;

absl::Status KeyError(const std::string& path, const std::string& message) {
  return absl::InvalidArgumentError(absl::StrCat("strategy key '", path, "' ", message));
}

// Reads the keys of one JSON object into fields, rejecting keys no field claims.
class Section {
 public:
  Section(const Json& json, std::string path) : json_(json), path_(std::move(path)) {}

  // An integer in [min_value, max_value]; the default bound is the largest job pdist runs, far
  // above any real degree and below what would make a mesh allocate without end.
  Section& Int(const std::string& key, int64_t& field, int64_t min_value,
               int64_t max_value = ir::ProcessMesh::kMaxProcesses) {
    readers_[key] = [this, key, &field, min_value, max_value](const Json& v) -> absl::Status {
      if (!v.is_number_integer()) return TypeError(key, "an integer", v);
      // An unsigned value past int64's range reads as negative: rejected too.
      if (v.get<int64_t>() < min_value || v.get<int64_t>() > max_value) {
        return absl::InvalidArgumentError(absl::StrCat("strategy key '", Path(key), "' must be in [", min_value, ", ",
                                                       max_value, "], got ", v.dump()));
      }
      field = v.get<int64_t>();
      return absl::OkStatus();
    };
    return *this;
  }
  // A finite number in [min_value, max_value].
  Section& Double(const std::string& key, double& field, double min_value, double max_value) {
    readers_[key] = [this, key, &field, min_value, max_value](const Json& v) -> absl::Status {
      if (!v.is_number()) return TypeError(key, "a number", v);
      const double x = v.get<double>();
      if (!(x >= min_value && x <= max_value)) {
        return absl::InvalidArgumentError(absl::StrCat("strategy key '", Path(key), "' must be in [", min_value, ", ",
                                                       max_value, "], got ", v.dump()));
      }
      field = x;
      return absl::OkStatus();
    };
    return *this;
  }
  Section& Bool(const std::string& key, bool& field) {
    readers_[key] = [this, key, &field](const Json& v) -> absl::Status {
      if (!v.is_boolean()) return TypeError(key, "true or false", v);
      field = v.get<bool>();
      return absl::OkStatus();
    };
    return *this;
  }
  Section& Enum(const std::string& key, std::string& field, std::vector<std::string> allowed) {
    readers_[key] = [this, key, &field, allowed](const Json& v) -> absl::Status {
      if (!v.is_string()) return TypeError(key, "a string", v);
      const std::string s = v.get<std::string>();
      if (std::find(allowed.begin(), allowed.end(), s) == allowed.end()) {
        return absl::InvalidArgumentError(absl::StrCat("strategy key '", Path(key), "' is \"", s, "\"; expected one of ",
                                                       absl::StrJoin(allowed, ", ")));
      }
      field = s;
      return absl::OkStatus();
    };
    return *this;
  }
  Section& String(const std::string& key, std::string& field) {
    readers_[key] = [this, key, &field](const Json& v) -> absl::Status {
      if (!v.is_string()) return TypeError(key, "a string", v);
      field = v.get<std::string>();
      return absl::OkStatus();
    };
    return *this;
  }
  // A JSON array; `each` reads one item, given its path ("annotations[0]").
  Section& List(const std::string& key, std::function<absl::Status(const Json&, const std::string&)> each) {
    readers_[key] = [this, key, each](const Json& v) -> absl::Status {
      if (!v.is_array()) return TypeError(key, "a list", v);
      for (size_t i = 0; i < v.size(); ++i) PDIST_RETURN_IF_ERROR(each(v[i], absl::StrCat(Path(key), "[", i, "]")));
      return absl::OkStatus();
    };
    return *this;
  }
  // Keys that must be present (others are optional).
  Section& Require(std::vector<std::string> keys) {
    required_ = std::move(keys);
    return *this;
  }
  Section& Object(const std::string& key, std::function<absl::Status(Section&)> read) {
    readers_[key] = [this, key, read](const Json& v) -> absl::Status {
      if (!v.is_object()) return TypeError(key, "an object", v);
      Section section(v, Path(key));
      return read(section);
    };
    return *this;
  }

  absl::Status Read() const {
    if (!json_.is_object()) {
      return absl::InvalidArgumentError(absl::StrCat("strategy ", path_.empty() ? "" : "section '" + path_ + "' ",
                                                     "must be a JSON object"));
    }
    for (const auto& [key, value] : json_.items()) {
      auto it = readers_.find(key);
      if (it == readers_.end()) {
        std::vector<std::string> known;
        for (const auto& [k, r] : readers_) known.push_back(k);
        return absl::InvalidArgumentError(absl::StrCat("unknown strategy key '", Path(key), "' (known: ",
                                                       absl::StrJoin(known, ", "), ")"));
      }
      PDIST_RETURN_IF_ERROR(it->second(value));
    }
    for (const std::string& key : required_) {
      if (!json_.contains(key)) return KeyError(Path(key), "is missing");
    }
    return absl::OkStatus();
  }

 private:
  std::string Path(const std::string& key) const { return path_.empty() ? key : path_ + "." + key; }
  absl::Status TypeError(const std::string& key, const char* expected, const Json& v) const {
    return KeyError(Path(key), absl::StrCat("must be ", expected, ", got ", v.dump()));
  }

  const Json& json_;
  std::string path_;
  std::map<std::string, std::function<absl::Status(const Json&)>> readers_;
  std::vector<std::string> required_;
};

absl::Status ReadInt(const Json& v, const std::string& path, std::vector<int64_t>& out) {
  if (!v.is_number_integer()) return KeyError(path, absl::StrCat("must be an integer, got ", v.dump()));
  out.push_back(v.get<int64_t>());
  return absl::OkStatus();
}

absl::Status ReadString(const Json& v, const std::string& path, std::vector<std::string>& out) {
  if (!v.is_string()) return KeyError(path, absl::StrCat("must be a string, got ", v.dump()));
  out.push_back(v.get<std::string>());
  return absl::OkStatus();
}

// {"tensor": "gpt.h.*.attn.qkv.weight", "mesh": {"shape": [2,2], "dim_names": [...],
//  "process_ids": [...]}, "placements": ["Replicate()", "Shard(1)"]}
absl::StatusOr<TensorAnnotation> ReadAnnotation(const Json& json, const std::string& path) {
  TensorAnnotation a;
  std::vector<int64_t> shape, ids;
  std::vector<std::string> names, placements;
  Section section(json, path);
  section.Require({"tensor", "mesh", "placements"})
      .String("tensor", a.tensor)
      .Object("mesh", [&](Section& m) {
        return m.Require({"shape"})
            .List("shape", [&](const Json& v, const std::string& p) { return ReadInt(v, p, shape); })
            .List("dim_names", [&](const Json& v, const std::string& p) { return ReadString(v, p, names); })
            .List("process_ids", [&](const Json& v, const std::string& p) { return ReadInt(v, p, ids); })
            .Read();
      })
      .List("placements", [&](const Json& v, const std::string& p) -> absl::Status {
        PDIST_RETURN_IF_ERROR(ReadString(v, p, placements));
        absl::StatusOr<ir::Placement> placement = ir::Placement::Parse(placements.back());
        if (!placement.ok()) return KeyError(p, absl::StrCat("is invalid: ", placement.status().message()));
        a.placements.push_back(*placement);
        return absl::OkStatus();
      });
  PDIST_RETURN_IF_ERROR(section.Read());
  if (a.tensor.empty()) return KeyError(path + ".tensor", "is empty (a tensor name or a pattern with '*')");
  absl::StatusOr<ir::ProcessMesh> mesh = ir::ProcessMesh::Create(shape, ids, names);
  if (!mesh.ok()) return KeyError(path + ".mesh", absl::StrCat("is invalid: ", mesh.status().message()));
  a.mesh = *std::move(mesh);
  if (static_cast<int64_t>(a.placements.size()) != a.mesh.ndim()) {
    return KeyError(path + ".placements", absl::StrCat("has ", a.placements.size(), " entries for the ", a.mesh.ndim(),
                                                       "-d mesh ", a.mesh.ToString(), " (one per mesh dim)"));
  }
  return a;
}

// A List reader for amp's custom op lists: each item a registered op's name.
std::function<absl::Status(const Json&, const std::string&)> OpNameInto(std::vector<std::string>& list) {
  return [&list](const Json& item, const std::string& path) -> absl::Status {
    if (!item.is_string()) return absl::InvalidArgumentError(absl::StrCat("strategy key '", path, "' must be an op name"));
    const std::string name = item.get<std::string>();
    if (ir::OpRegistry::Global().Find(name) == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("strategy key '", path, "' is \"", name,
                                                     "\", which is not a pdist op type (op types: docs/spmd.md)"));
    }
    list.push_back(name);
    return absl::OkStatus();
  };
}

// Whether the strategy's JSON gives `key` (a top-level key) or `section`.`key`.
bool Gives(const Json& json, const char* key) { return json.is_object() && json.contains(key); }
bool Gives(const Json& json, const char* section, const char* key) {
  return Gives(json, section) && json[section].is_object() && json[section].contains(key);
}

// `json` is what was read: under StrategyKeys::kGivenOnly a check between keys runs only where
// the file gives every key it reads (an absent one is the planner's to choose, not its default).
absl::Status Validate(const Strategy& s, const Json& json, StrategyKeys keys) {
  const bool complete = keys == StrategyKeys::kAbsentAreDefaults;
  const bool dp_known = complete || Gives(json, "dp_degree");
  const bool mp_known = complete || Gives(json, "mp_degree");
  const bool stage_known = complete || Gives(json, "sharding", "stage");
  const bool vpp_known = complete || Gives(json, "pipeline", "vpp_degree");
  const bool pp_known = complete || Gives(json, "pp_degree");
  PDIST_RETURN_IF_ERROR(ir::CheckedProduct({s.dp_degree, s.mp_degree, s.pp_degree}, ir::ProcessMesh::kMaxProcesses,
                                           "strategy ranks dp_degree × mp_degree × pp_degree")
                            .status());
  if (s.sp && s.mp_degree == 1 && mp_known) {
    return absl::InvalidArgumentError("strategy key 'sp' needs mp_degree > 1 (sequence parallel splits the tensor-parallel group)");
  }
  if (!(s.amp.incr_ratio > 1.0) || !(s.amp.decr_ratio > 0.0 && s.amp.decr_ratio < 1.0)) {
    return absl::InvalidArgumentError(absl::StrCat("strategy keys 'amp.incr_ratio' (", s.amp.incr_ratio,
                                                   ") must be > 1 and 'amp.decr_ratio' (", s.amp.decr_ratio,
                                                   ") in (0, 1): the loss scale must grow and shrink"));
  }
  for (const std::string& op : s.amp.custom_white_list) {
    if (std::find(s.amp.custom_black_list.begin(), s.amp.custom_black_list.end(), op) != s.amp.custom_black_list.end()) {
      return absl::InvalidArgumentError(absl::StrCat("strategy keys 'amp.custom_white_list' and 'amp.custom_black_list' "
                                                     "both name '", op, "': an op runs in one precision"));
    }
  }
  if (s.sharding.enable && s.sharding.degree > s.dp_degree && dp_known) {
    return absl::InvalidArgumentError(absl::StrCat("strategy key 'sharding.degree' (", s.sharding.degree,
                                                   ") exceeds dp_degree (", s.dp_degree, ")"));
  }
  if (s.sharding.enable && s.sharding.degree > 0 && s.dp_degree % s.sharding.degree != 0 && dp_known) {
    return absl::InvalidArgumentError(absl::StrCat("strategy key 'sharding.degree' (", s.sharding.degree,
                                                   ") does not divide dp_degree (", s.dp_degree, ")"));
  }
  if (s.sharding.stage < 1 || s.sharding.stage > 3) {
    return absl::InvalidArgumentError(absl::StrCat("strategy key 'sharding.stage' must be 1, 2 or 3, got ", s.sharding.stage));
  }
  if (s.sharding.enable && s.sharding.accumulate_shards && s.sharding.stage < 2 && stage_known) {
    return absl::InvalidArgumentError(
        "strategy key 'sharding.accumulate_shards' needs stage 2 or 3: stage 1 all-reduces whole gradients");
  }
  if (s.sharding.enable && s.sharding.accumulate_shards && s.amp.ScalesLoss()) {
    return absl::InvalidArgumentError(
        "strategy key 'sharding.accumulate_shards' does not work with float16 dynamic loss scaling "
        "('amp.use_dynamic_loss_scaling'): the gradients are unscaled once per step, as the optimizer runs, so "
        "their reduce-scatter cannot move into the backward; use bfloat16, or leave accumulate_shards out");
  }
  if (s.gradient_merge.enable && (s.pp_degree > 1 || s.pipeline.accumulate_steps > 1) &&
      s.gradient_merge.k_steps != s.pipeline.accumulate_steps) {
    return absl::InvalidArgumentError(absl::StrCat(
        "strategy key 'gradient_merge.k_steps' (", s.gradient_merge.k_steps, ") with a pipeline (pp_degree ", s.pp_degree,
        ", pipeline.accumulate_steps ", s.pipeline.accumulate_steps,
        "): a pipelined step already accumulates its micro-batches; set pipeline.accumulate_steps and drop gradient_merge"));
  }
  if (s.pipeline.schedule_mode == "VPP" && s.pipeline.vpp_degree < 2 && vpp_known) {
    return absl::InvalidArgumentError("strategy key 'pipeline.vpp_degree' must be >= 2 for schedule_mode VPP");
  }
  const int64_t cuts = s.pp_degree * s.pipeline.vpp_degree - 1;
  if (!s.pipeline.split_before.empty() && static_cast<int64_t>(s.pipeline.split_before.size()) != cuts && pp_known &&
      vpp_known) {
    return absl::InvalidArgumentError(absl::StrCat("strategy key 'pipeline.split_before' has ",
                                                   s.pipeline.split_before.size(), " entries; pp_degree × vpp_degree = ",
                                                   cuts + 1, " stages need ", cuts));
  }
  // A section is off unless its "enable" says true (Paddle's reading): details given without it
  // were silently unused ({"sharding": {"stage": 3}} trained without ZeRO; a user probe).
  for (const char* section : {"sharding", "recompute", "amp", "gradient_merge"}) {
    if (!json.contains(section) || !json[section].is_object() || json[section].contains("enable")) continue;
    if (json[section].empty()) continue;
    return absl::InvalidArgumentError(absl::StrCat(
        "strategy key '", section, ".", json[section].begin().key(), "' without '", section,
        ".enable': a section without \"enable\": true is off and its keys unused; add \"enable\": true, or remove it"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Strategy> ParseStrategy(const std::string& json_text, StrategyKeys keys) {
  PDIST_ASSIGN_OR_RETURN(Json json, ir::ParseJson(json_text, "strategy"));
  Strategy s;
  Section root(json, "");
  root.Int("dp_degree", s.dp_degree, 1)
      .Int("mp_degree", s.mp_degree, 1)
      .Int("pp_degree", s.pp_degree, 1)
      .Bool("sp", s.sp)
      .Object("sharding", [&s](Section& x) {
        return x.Bool("enable", s.sharding.enable).Int("stage", s.sharding.stage, 1, 3).Int("degree", s.sharding.degree, 1)
            .Bool("accumulate_shards", s.sharding.accumulate_shards)
            .Read();
      })
      .Object("pipeline", [&s](Section& x) {
        return x.Bool("enable", s.pipeline.enable)
            .Enum("schedule_mode", s.pipeline.schedule_mode, {"FThenB", "1F1B", "VPP", "ZBH1"})
            .Int("accumulate_steps", s.pipeline.accumulate_steps, 1)
            .Int("micro_batch_size", s.pipeline.micro_batch_size, 1)
            .Int("vpp_degree", s.pipeline.vpp_degree, 1)
            .List("split_before", [&s](const Json& item, const std::string& path) -> absl::Status {
              if (!item.is_string()) return absl::InvalidArgumentError(absl::StrCat("strategy key '", path, "' must be a string"));
              s.pipeline.split_before.push_back(item.get<std::string>());
              return absl::OkStatus();
            })
            .Read();
      })
      .Object("recompute", [&s](Section& x) {
        return x.Bool("enable", s.recompute.enable)
            .Enum("granularity", s.recompute.granularity, {"full", "selective"})
            .Enum("segments", s.recompute.segments, {"layers", "stages", "finest"})
            .Read();
      })
      .Object("amp", [&s](Section& x) {
        return x.Bool("enable", s.amp.enable)
            .Enum("dtype", s.amp.dtype, {"float16", "bfloat16"})
            .Enum("level", s.amp.level, {"o1", "o2"})
            .Bool("use_dynamic_loss_scaling", s.amp.use_dynamic_loss_scaling)
            .Double("init_loss_scaling", s.amp.init_loss_scaling, 1.0, 3.0e38)
            .Int("incr_every_n_steps", s.amp.incr_every_n_steps, 1, int64_t{1} << 40)
            .Int("decr_every_n_nan_or_inf", s.amp.decr_every_n_nan_or_inf, 1, int64_t{1} << 40)
            .Double("incr_ratio", s.amp.incr_ratio, 1.0, 1e6)
            .Double("decr_ratio", s.amp.decr_ratio, 0.0, 1.0)
            .List("custom_white_list", OpNameInto(s.amp.custom_white_list))
            .List("custom_black_list", OpNameInto(s.amp.custom_black_list))
            .Read();
      })
      .Object("gradient_merge", [&s](Section& x) {
        return x.Bool("enable", s.gradient_merge.enable).Int("k_steps", s.gradient_merge.k_steps, 1).Bool("avg", s.gradient_merge.avg).Read();
      })
      .List("annotations", [&s](const Json& item, const std::string& path) -> absl::Status {
        PDIST_ASSIGN_OR_RETURN(TensorAnnotation a, ReadAnnotation(item, path));
        s.annotations.push_back(std::move(a));
        return absl::OkStatus();
      });
  PDIST_RETURN_IF_ERROR(root.Read());
  PDIST_RETURN_IF_ERROR(Validate(s, json, keys));
  return s;
}

std::string StrategyToJson(const Strategy& s) {
  Json j = {
      {"dp_degree", s.dp_degree},
      {"mp_degree", s.mp_degree},
      {"pp_degree", s.pp_degree},
      {"sp", s.sp},
      {"sharding", {{"enable", s.sharding.enable}, {"stage", s.sharding.stage}, {"degree", s.sharding.degree},
        {"accumulate_shards", s.sharding.accumulate_shards}}},
      {"pipeline",
       {{"enable", s.pipeline.enable},
        {"schedule_mode", s.pipeline.schedule_mode},
        {"accumulate_steps", s.pipeline.accumulate_steps},
        {"micro_batch_size", s.pipeline.micro_batch_size},
        {"vpp_degree", s.pipeline.vpp_degree},
        {"split_before", s.pipeline.split_before}}},
      {"recompute", {{"enable", s.recompute.enable}, {"granularity", s.recompute.granularity}, {"segments", s.recompute.segments}}},
      {"amp",
       {{"enable", s.amp.enable},
        {"dtype", s.amp.dtype},
        {"level", s.amp.level},
        {"use_dynamic_loss_scaling", s.amp.use_dynamic_loss_scaling},
        {"init_loss_scaling", s.amp.init_loss_scaling},
        {"incr_every_n_steps", s.amp.incr_every_n_steps},
        {"decr_every_n_nan_or_inf", s.amp.decr_every_n_nan_or_inf},
        {"incr_ratio", s.amp.incr_ratio},
        {"decr_ratio", s.amp.decr_ratio},
        {"custom_white_list", s.amp.custom_white_list},
        {"custom_black_list", s.amp.custom_black_list}}},
      {"gradient_merge", {{"enable", s.gradient_merge.enable}, {"k_steps", s.gradient_merge.k_steps}, {"avg", s.gradient_merge.avg}}},
      {"annotations", Json::array()},
  };
  if (s.sharding.degree == 0) j["sharding"].erase("degree");  // the whole dp axis
  for (const TensorAnnotation& a : s.annotations) {
    Json mesh = {{"shape", a.mesh.shape()}, {"dim_names", a.mesh.dim_names()}};
    if (!a.mesh.has_default_ids()) mesh["process_ids"] = a.mesh.process_ids();
    Json placements = Json::array();
    for (const ir::Placement& p : a.placements) placements.push_back(p.ToString());
    j["annotations"].push_back({{"tensor", a.tensor}, {"mesh", mesh}, {"placements", placements}});
  }
  return j.dump(2);
}

namespace {

bool IsInlineJson(const std::string& argument) {
  const size_t first = argument.find_first_not_of(" \t\r\n");
  // '[' too: a list is JSON that the reader refuses as not an object, not a file to look for.
  return first != std::string::npos && (argument[first] == '{' || argument[first] == '[');
}

}  // namespace

absl::StatusOr<std::string> ReadStrategyArgument(const std::string& argument) {
  if (IsInlineJson(argument)) return argument;
  return ir::ReadFileToString(argument);
}

std::string StrategyArgumentName(const std::string& argument) {
  return IsInlineJson(argument) ? "inline strategy JSON" : absl::StrCat("strategy file '", argument, "'");
}

}  // namespace pdist::strategy

#include "planner/planned_model.h"

#include <map>
#include <set>
#include <memory>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "ir/models/gpt.h"
#include "ir/models/layer_builder.h"
#include "ir/models/llama.h"
#include "ir/status.h"
#include "passes/micro_batch.h"

namespace pdist::planner {
namespace {

constexpr int64_t kProfileLayers = 3;

struct SpecFields {
  std::map<std::string, int64_t> ints{{"layers", 0}, {"hidden", 0}, {"heads", 0}, {"vocab", 0},
                                      {"seq", 0},    {"ffn", 0},    {"tied", 0}};
  std::string dtype = "f32";
};

absl::StatusOr<SpecFields> ParseSpecFields(const std::string& spec, const std::string& body) {
  SpecFields f;
  for (absl::string_view item : absl::StrSplit(body, ',', absl::SkipEmpty())) {
    std::pair<std::string, std::string> kv = absl::StrSplit(item, absl::MaxSplits('=', 1));
    if (kv.first == "dtype") {
      f.dtype = kv.second;
      continue;
    }
    auto it = f.ints.find(kv.first);
    if (it == f.ints.end()) {
      return absl::InvalidArgumentError(absl::StrCat("model spec '", spec, "': unknown key '", kv.first,
                                                     "' (keys: layers, hidden, heads, vocab, seq, ffn, tied, dtype)"));
    }
    if (!absl::SimpleAtoi(kv.second, &it->second) || it->second < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("model spec '", spec, "': ", kv.first, "='", kv.second, "' is not a non-negative integer"));
    }
  }
  for (const char* key : {"layers", "hidden", "heads", "vocab", "seq"}) {
    if (f.ints[key] == 0) return absl::InvalidArgumentError(absl::StrCat("model spec '", spec, "' needs ", key, "=N (N > 0)"));
  }
  return f;
}

// The prefix whose "<prefix>.<i>." numbers the most layers, and that count.
std::pair<std::string, int64_t> LayerPrefix(const ir::Program& program) {
  std::map<std::string, std::set<int64_t>> indices;
  for (const ir::Value* p : program.Parameters()) {
    const std::vector<std::string> parts = absl::StrSplit(p->name(), '.');
    std::string prefix;
    for (size_t i = 0; i + 1 < parts.size(); ++i) {
      int64_t index = 0;
      if (i > 0 && absl::SimpleAtoi(parts[i], &index) && index >= 0) indices[prefix].insert(index);
      prefix = i == 0 ? parts[i] : absl::StrCat(prefix, ".", parts[i]);
    }
  }
  std::pair<std::string, int64_t> best{"", 0};
  for (const auto& [prefix, set] : indices) {
    const int64_t n = static_cast<int64_t>(set.size());
    if (n > best.second && *set.rbegin() == n - 1) best = {prefix, n};
  }
  return best;
}

std::vector<std::string> Marks(const std::string& prefix) {
  return {absl::StrCat(prefix, ".1.*"), absl::StrCat(prefix, ".2.*")};
}

}  // namespace

absl::StatusOr<PlannedModel> ModelFromSpec(const std::string& spec, int64_t global_batch) {
  const size_t colon = spec.find(':');
  const std::string kind = spec.substr(0, colon);
  if (kind != "gpt" && kind != "llama") {
    return absl::InvalidArgumentError(absl::StrCat("model spec '", spec, "': unknown model '", kind, "' (gpt or llama)"));
  }
  if (global_batch < 1 || global_batch > ir::models::kMaxModelDim) {
    return absl::InvalidArgumentError(
        absl::StrCat("global batch must be in [1, ", ir::models::kMaxModelDim, "], got ", global_batch));
  }
  PDIST_ASSIGN_OR_RETURN(SpecFields f, ParseSpecFields(spec, colon == std::string::npos ? "" : spec.substr(colon + 1)));
  absl::StatusOr<ir::DataType> dtype = ir::ParseDataType(f.dtype);
  if (!dtype.ok()) return absl::InvalidArgumentError(absl::StrCat("model spec '", spec, "': dtype '", f.dtype, "' is not a dtype"));
  PlannedModel m;
  m.description = spec;
  m.layers = f.ints["layers"];
  m.global_batch = global_batch;
  m.seq_len = f.ints["seq"];
  m.dtype = *dtype;
  if (m.layers < kProfileLayers) {
    return absl::InvalidArgumentError(absl::StrCat("model spec '", spec, "': the planner needs layers >= 3, got ", m.layers));
  }
  const bool llama = kind == "llama";
  m.layer_prefix = llama ? "llama.h" : "gpt.h";
  m.head_mark = llama ? "llama.ln_f.*" : "gpt.ln_f.*";
  auto build = [f, llama, dtype = *dtype](int64_t micro_batch) mutable -> absl::StatusOr<ProfileProgram> {
    ProfileProgram p;
    p.layers = kProfileLayers;
    p.split_before = Marks(llama ? "llama.h" : "gpt.h");
    const int64_t layers = kProfileLayers, hidden = f.ints["hidden"], heads = f.ints["heads"], vocab = f.ints["vocab"],
                  seq = f.ints["seq"], ffn = f.ints["ffn"];
    const bool tied = f.ints["tied"] != 0;
    if (llama) {
      PDIST_ASSIGN_OR_RETURN(p.forward, ir::models::BuildLlama({.vocab = vocab, .hidden = hidden, .layers = layers,
                                                                .heads = heads, .ffn_hidden = ffn, .seq_len = seq,
                                                                .batch = micro_batch, .tied_embeddings = tied,
                                                                .dtype = dtype}));
    } else {
      PDIST_ASSIGN_OR_RETURN(p.forward, ir::models::BuildGpt({.vocab = vocab, .hidden = hidden, .layers = layers,
                                                              .heads = heads, .ffn_hidden = ffn, .seq_len = seq,
                                                              .batch = micro_batch, .tied_embeddings = tied,
                                                              .dtype = dtype}));
    }
    return p;
  };
  PDIST_RETURN_IF_ERROR(build(1).status());  // a bad config fails here, naming its field
  // The whole model's depth too (the profile builds only kProfileLayers of it).
  if (absl::Status s = ir::models::RequireInRange(llama ? "LlamaConfig" : "GptConfig", "layers", m.layers,
                                                  ir::models::kMaxModelLayers);
      !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("model spec '", spec, "': ", s.message()));
  }
  m.profile_program = build;
  return m;
}

absl::StatusOr<PlannedModel> ModelFromProgram(ir::Program program, std::string description) {
  if (program.loss() == nullptr) return absl::InvalidArgumentError(absl::StrCat(description, ": the program has no loss"));
  const auto [prefix, layers] = LayerPrefix(program);
  if (layers < kProfileLayers) {
    return absl::InvalidArgumentError(absl::StrCat(
        description, ": the planner needs at least 3 repeated layers whose parameters are named <prefix>.<i>.*, found ",
        layers, prefix.empty() ? "" : absl::StrCat(" (", prefix, ".*)")));
  }
  const ir::Value* input = nullptr;
  for (const ir::Value* arg : program.block().arguments()) {
    if (arg->role() == ir::ValueRole::kDataInput && !arg->type().shape.empty()) {
      input = arg;
      break;
    }
  }
  if (input == nullptr) return absl::InvalidArgumentError(absl::StrCat(description, ": the program has no batched data input"));
  PlannedModel m;
  m.layer_prefix = prefix;
  // The head starts at the first parameter declared after the last layer's.
  const std::string last_layer = absl::StrCat(prefix, ".", layers - 1, ".");
  bool after_last = false;
  for (const ir::Value* p : program.Parameters()) {
    m.dtype = p->type().dtype;
    if (absl::StartsWith(p->name(), last_layer)) {
      after_last = true;
    } else if (after_last && m.head_mark.empty()) {
      m.head_mark = p->name();
    }
  }
  if (m.head_mark.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(description, ": no parameter follows the last layer (", last_layer,
                                                   "*); the planner needs a head after the layers"));
  }
  m.description = absl::StrCat(description, " (", layers, " layers of ", prefix, ".*)");
  m.layers = layers;
  m.global_batch = input->type().shape[0];
  m.seq_len = input->type().shape.size() > 1 ? input->type().shape[1] : 1;
  auto shared = std::make_shared<ir::Program>(std::move(program));
  m.profile_program = [shared, prefix = prefix, layers = layers,
                       batch = m.global_batch](int64_t micro_batch) -> absl::StatusOr<ProfileProgram> {
    if (micro_batch < 1 || batch % micro_batch != 0) {
      return absl::InvalidArgumentError(absl::StrCat("micro-batch ", micro_batch, " does not divide the batch ", batch));
    }
    return ProfileProgram{shared->Clone(), layers, batch / micro_batch, Marks(prefix)};
  };
  return m;
}

}  // namespace pdist::planner

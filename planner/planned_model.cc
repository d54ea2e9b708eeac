#include "planner/planned_model.h"

#include <map>
#include <memory>
#include <set>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "ir/models/gpt.h"
#include "ir/models/layer_builder.h"
#include "ir/models/llama.h"
#include "ir/status.h"
#include "passes/batch_inputs.h"
#include "passes/micro_batch.h"

namespace pdist::planner {
namespace {

struct SpecFields {
  std::map<std::string, int64_t> ints{{"layers", 0}, {"hidden", 0}, {"heads", 0}, {"vocab", 0},
                                      {"seq", 0},    {"ffn", 0},    {"tied", 0}, {"f32_loss", 0}};
  std::string dtype = "f32";
};

absl::StatusOr<SpecFields> ParseSpecFields(const std::string& spec, const std::string& body) {
  SpecFields f;
  std::set<std::string> seen;
  for (absl::string_view item : absl::StrSplit(body, ',')) {
    if (body.empty()) break;  // "gpt" alone: the keys it needs are named below
    if (item.empty()) return absl::InvalidArgumentError(absl::StrCat("model spec '", spec, "': an empty item (a stray ',')"));
    std::pair<std::string, std::string> kv = absl::StrSplit(item, absl::MaxSplits('=', 1));
    // As a strategy's JSON refuses a duplicate key: which of two values was meant is a guess.
    if (!seen.insert(kv.first).second) {
      return absl::InvalidArgumentError(absl::StrCat("model spec '", spec, "': '", kv.first, "' given twice"));
    }
    if (kv.first == "dtype") {
      f.dtype = kv.second;
      continue;
    }
    auto it = f.ints.find(kv.first);
    if (it == f.ints.end()) {
      return absl::InvalidArgumentError(absl::StrCat("model spec '", spec, "': unknown key '", kv.first,
                                                     "' (keys: layers, hidden, heads, vocab, seq, ffn, tied, f32_loss, dtype)"));
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

// The dtype most parameter elements have: the peak rate MFU counts against (an o2 program keeps
// its LayerNorm scales in f32).
ir::DataType ParameterDtype(const ir::Program& program) {
  std::map<ir::DataType, int64_t> elements;
  for (const ir::Value* p : program.Parameters()) elements[p->type().dtype] += p->type().num_elements();
  ir::DataType best = ir::DataType::kFloat32;
  int64_t most = -1;
  for (const auto& [dtype, n] : elements) {
    if (n > most) {
      best = dtype;
      most = n;
    }
  }
  return best;
}

// The profile stages for `segments`: each kind measured once on a stage of its own — not on the
// first segment when a later one is of its kind, because the first stage sends no input
// gradients and ZBH1 gives its whole backward to W — and the segments in between merged into
// stages that are only cut off. Returns the marks and each stage's kind.
std::pair<std::vector<std::string>, std::vector<int64_t>> ProfileStages(const std::vector<ProgramSegment>& segments,
                                                                        int64_t kinds) {
  std::vector<int64_t> measured_at(static_cast<size_t>(kinds), -1);
  for (size_t i = 0; i < segments.size(); ++i) {
    int64_t& at = measured_at[static_cast<size_t>(segments[i].kind)];
    if (at <= 0) at = static_cast<int64_t>(i);  // the first, or the second when the first is segment 0
  }
  std::vector<std::string> marks;
  std::vector<int64_t> stage_kind;
  bool filler_open = false;  // the last stage is a filler that the next unmeasured segment joins
  for (size_t i = 0; i < segments.size(); ++i) {
    const bool measured = measured_at[static_cast<size_t>(segments[i].kind)] == static_cast<int64_t>(i);
    if (!measured && filler_open) continue;
    if (i > 0) marks.push_back(segments[i].mark);
    stage_kind.push_back(measured ? segments[i].kind : -1);
    filler_open = !measured;
  }
  return {marks, stage_kind};
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
  for (const char* flag : {"tied", "f32_loss"}) {
    if (f.ints[flag] > 1) {
      return absl::InvalidArgumentError(absl::StrCat("model spec '", spec, "': ", flag, " must be 0 or 1"));
    }
  }
  absl::StatusOr<ir::DataType> dtype = ir::ParseDataType(f.dtype);
  if (!dtype.ok() || !ir::IsFloatingPoint(*dtype)) {
    return absl::InvalidArgumentError(
        absl::StrCat("model spec '", spec, "': dtype '", f.dtype, "' is not a floating-point dtype (f32, f64, bf16, f16)"));
  }
  PlannedModel m;
  m.description = spec;
  m.layers = f.ints["layers"];
  m.global_batch = global_batch;
  m.seq_len = f.ints["seq"];
  m.dtype = *dtype;
  const bool llama = kind == "llama";
  const std::string prefix = llama ? "llama.h" : "gpt.h";
  const std::string head_mark = llama ? "llama.ln_f.*" : "gpt.ln_f.*";
  // The whole model's depth too (the profile builds one layer of it).
  if (absl::Status s = ir::models::RequireInRange(llama ? "LlamaConfig" : "GptConfig", "layers", m.layers,
                                                  ir::models::kMaxModelLayers);
      !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("model spec '", spec, "': ", s.message()));
  }
  // The profile is a 1-layer copy: a stage for the embedding, one for the layer, one for the head.
  m.kinds = 3;
  m.segments.push_back({.kind = kEmbeddingKind});
  for (int64_t i = 0; i < m.layers; ++i) {
    m.segments.push_back({.kind = kLayerKind, .mark = absl::StrCat(prefix, ".", i, ".*"), .layer = true});
  }
  m.segments.push_back({.kind = kHeadKind, .mark = head_mark});
  auto build = [f, llama, prefix, head_mark, dtype = *dtype](int64_t micro_batch) mutable -> absl::StatusOr<ProfileProgram> {
    ProfileProgram p;
    p.split_before = {absl::StrCat(prefix, ".0.*"), head_mark};
    p.stage_kind = {kEmbeddingKind, kLayerKind, kHeadKind};
    const int64_t layers = 1, hidden = f.ints["hidden"], heads = f.ints["heads"], vocab = f.ints["vocab"],
                  seq = f.ints["seq"], ffn = f.ints["ffn"];
    const bool tied = f.ints["tied"] != 0, f32_loss = f.ints["f32_loss"] != 0;
    if (llama) {
      PDIST_ASSIGN_OR_RETURN(p.forward, ir::models::BuildLlama({.vocab = vocab, .hidden = hidden, .layers = layers,
                                                                .heads = heads, .ffn_hidden = ffn, .seq_len = seq,
                                                                .batch = micro_batch, .tied_embeddings = tied,
                                                                .dtype = dtype, .f32_loss = f32_loss}));
    } else {
      PDIST_ASSIGN_OR_RETURN(p.forward, ir::models::BuildGpt({.vocab = vocab, .hidden = hidden, .layers = layers,
                                                              .heads = heads, .ffn_hidden = ffn, .seq_len = seq,
                                                              .batch = micro_batch, .tied_embeddings = tied,
                                                              .dtype = dtype, .f32_loss = f32_loss}));
    }
    return p;
  };
  PDIST_RETURN_IF_ERROR(build(1).status());  // a bad config fails here, naming its field
  m.profile_program = build;
  return m;
}

absl::StatusOr<PlannedModel> ModelFromProgram(ir::Program program, std::string description) {
  if (program.loss() == nullptr) return absl::InvalidArgumentError(absl::StrCat(description, ": the program has no loss"));
  absl::StatusOr<passes::BatchInputs> batch = passes::FindBatchInputs(program);
  if (!batch.ok()) return absl::InvalidArgumentError(absl::StrCat(description, ": the program has no batched data input"));
  const ir::Value* input = batch->inputs.front();
  // As --model's and pdist-export's: the search tries the divisors of the batch, and an
  // imported model declaring 2^40 samples ran out of memory profiling them.
  if (batch->batch > ir::models::kMaxModelDim) {
    return absl::InvalidArgumentError(absl::StrCat(description, ": data input '", input->name(), "' ",
                                                   input->type().ToString(), " has batch ", batch->batch,
                                                   "; the planner takes at most ", ir::models::kMaxModelDim));
  }
  absl::StatusOr<ProgramSegments> found = FindProgramSegments(program);
  if (!found.ok()) return WithContext(found.status(), description);
  PlannedModel m;
  m.description = absl::StrCat(description, " (", found->summary, ")");
  m.segments = found->segments;
  m.kinds = found->kinds;
  m.layers = found->layers;
  m.dtype = ParameterDtype(program);
  m.global_batch = input->type().shape[0];
  if (m.global_batch < 1) {  // a plan of no samples: every micro-batch size divides nothing
    return absl::InvalidArgumentError(absl::StrCat(description, ": data input '", input->name(), "' ",
                                                   input->type().ToString(), " has batch ", m.global_batch,
                                                   "; a plan needs at least one sample (export it with --batch N)"));
  }
  // Token ids [batch, seq, ...] have a sequence; features (an MLP's f32[batch, 16]) do not, and
  // their width counted as tokens made tokens/s 16 times the samples.
  const bool tokens = !ir::IsFloatingPoint(input->type().dtype) && input->type().shape.size() > 1;
  m.seq_len = tokens ? input->type().shape[1] : 1;
  auto [marks, stage_kind] = ProfileStages(m.segments, m.kinds);
  auto shared = std::make_shared<ir::Program>(std::move(program));
  m.profile_program = [shared, marks = marks, stage_kind = stage_kind,
                       batch = m.global_batch](int64_t micro_batch) -> absl::StatusOr<ProfileProgram> {
    if (micro_batch < 1 || batch % micro_batch != 0) {
      return absl::InvalidArgumentError(absl::StrCat("micro-batch ", micro_batch, " does not divide the batch ", batch));
    }
    return ProfileProgram{shared->Clone(), batch / micro_batch, marks, stage_kind};
  };
  m.forward = shared;
  return m;
}

}  // namespace pdist::planner

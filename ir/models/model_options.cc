// ModelOptions → GptConfig / LlamaConfig / MlpConfig → Program.
#include "ir/models/model_options.h"

#include <map>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "ir/models/gpt.h"
#include "ir/models/llama.h"
#include "ir/models/mlp.h"

namespace pdist::ir::models {

absl::Status SetModelOption(ModelOptions& o, const std::string& key, const std::string& value) {
  const std::map<std::string, int64_t*> ints = {{"layers", &o.layers}, {"hidden", &o.hidden}, {"heads", &o.heads},
                                                {"vocab", &o.vocab},   {"seq", &o.seq},       {"batch", &o.batch},
                                                {"ffn", &o.ffn},       {"input", &o.input},   {"classes", &o.classes}};
  auto bad = [&](const char* what) {
    return absl::InvalidArgumentError(absl::StrCat("model option ", key, "='", value, "' is not ", what));
  };
  if (auto it = ints.find(key); it != ints.end()) {
    return absl::SimpleAtoi(value, it->second) ? absl::OkStatus() : bad("an integer");
  }
  if (key == "dropout") return absl::SimpleAtod(value, &o.dropout) ? absl::OkStatus() : bad("a number");
  if (key == "tied") {
    if (value == "true" || value == "1") o.tied = true;
    else if (value == "false" || value == "0") o.tied = false;
    else return bad("true, false, 1 or 0");
    return absl::OkStatus();
  }
  if (key == "dtype") {
    o.dtype = value;
    return absl::OkStatus();
  }
  std::vector<std::string> keys;
  for (const auto& [name, field] : ints) keys.push_back(name);
  keys.insert(keys.end(), {"dropout", "tied", "dtype"});
  return absl::InvalidArgumentError(
      absl::StrCat("unknown model option '", key, "' (options: ", absl::StrJoin(keys, ", "), ")"));
}

absl::Status SetModelOptions(ModelOptions& options, const std::string& pairs) {
  for (absl::string_view item : absl::StrSplit(pairs, ',', absl::SkipWhitespace())) {
    std::vector<std::string> kv = absl::StrSplit(item, absl::MaxSplits('=', 1));
    if (kv.size() != 2) {
      return absl::InvalidArgumentError(absl::StrCat("model option '", item, "' is not key=value"));
    }
    if (absl::Status s = SetModelOption(options, std::string(absl::StripAsciiWhitespace(kv[0])),
                                        std::string(absl::StripAsciiWhitespace(kv[1])));
        !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<Program> BuildModel(const ModelOptions& o) {
  if (o.dtype != "f32" && o.dtype != "f64") {
    return absl::InvalidArgumentError(absl::StrCat("model dtype '", o.dtype, "' is not f32 or f64"));
  }
  const DataType dtype = o.dtype == "f64" ? DataType::kFloat64 : DataType::kFloat32;
  if (o.model == "gpt") {
    return BuildGpt({.vocab = o.vocab, .hidden = o.hidden, .layers = o.layers, .heads = o.heads, .ffn_hidden = o.ffn,
                     .seq_len = o.seq, .batch = o.batch, .tied_embeddings = o.tied, .dtype = dtype, .dropout = o.dropout});
  }
  if (o.model == "llama") {
    return BuildLlama({.vocab = o.vocab, .hidden = o.hidden, .layers = o.layers, .heads = o.heads, .ffn_hidden = o.ffn,
                       .seq_len = o.seq, .batch = o.batch, .tied_embeddings = o.tied, .dtype = dtype,
                       .dropout = o.dropout});
  }
  if (o.model == "mlp") {
    if (o.layers < 0) return absl::InvalidArgumentError(absl::StrCat("mlp layers must be >= 0, got ", o.layers));
    return BuildMlp({.input = o.input,
                     .hidden = std::vector<int64_t>(static_cast<size_t>(o.layers), o.hidden),
                     .classes = o.classes,
                     .batch = o.batch,
                     .dtype = dtype});
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown model '", o.model, "'; expected gpt, llama or mlp"));
}

}  // namespace pdist::ir::models

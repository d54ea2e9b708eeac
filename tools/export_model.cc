// pdist-export's flags → ir::models::ModelOptions → Program.
#include "tools/export_model.h"

#include <map>
#include <regex>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/model_program.h"
#include "ir/status.h"

namespace pdist::tools {

void RegisterExportFlags(cli::FlagSet& flags, ExportOptions* o) {
  flags.Int("layers", &o->layers, "transformer blocks (mlp: hidden relu layers)");
  flags.Int("hidden", &o->hidden, "hidden size (mlp: width of each relu layer)");
  flags.Int("heads", &o->heads, "attention heads; must divide --hidden");
  flags.Int("vocab", &o->vocab, "vocabulary size");
  flags.Int("seq", &o->seq, "sequence length");
  flags.Int("batch", &o->batch, "the step's batch, all ranks and micro-batches together (a strategy's micro-batches divide it)");
  flags.Int("ffn", &o->ffn, "MLP width; 0: 4*hidden (gpt), 8*hidden/3 rounded up to 8 (llama)");
  flags.Bool("tied", &o->tied, "share the token embedding with the output head");
  flags.Double("dropout", &o->dropout, "embedding and residual dropout probability (gpt, llama)");
  flags.Int("input", &o->input, "mlp: input features");
  flags.Int("classes", &o->classes, "mlp: output classes");
  flags.String("dtype", &o->dtype,
               "f32, f64, or bf16: mixed precision o2 (bf16 parameters and matmuls; norms, softmax and the loss in "
               "f32; training adds f32 master weights)");
}

absl::Status CheckFlagsApply(const cli::FlagSet& flags, const std::string& model) {
  if (model != "gpt" && model != "llama" && model != "mlp") return absl::OkStatus();  // the build names it
  const std::vector<std::string> unused = model == "mlp" ? std::vector<std::string>{"heads", "vocab", "seq", "ffn",
                                                                                      "tied", "dropout"}
                                                         : std::vector<std::string>{"input", "classes"};
  for (const std::string& name : unused) {
    if (flags.Given(name)) {
      return absl::InvalidArgumentError(absl::StrCat("--", name, " does not apply to ", model, " (see --help)"));
    }
  }
  return absl::OkStatus();
}

namespace {

// The builders name their config's fields ("GptConfig.seq_len must be in [1, ...], got 0"); a
// pdist-export user gave flags, so the message names the flag (--seq) instead.
std::string InFlagNames(std::string message) {
  static const std::regex field(R"((?:Gpt|Llama|Mlp)Config\.([a-z_]+)(?:\[[0-9]+\])?)");
  static const std::map<std::string, std::string> flag_of = {
      {"vocab", "vocab"},   {"hidden", "hidden"}, {"heads", "heads"},     {"ffn_hidden", "ffn"}, {"seq_len", "seq"},
      {"batch", "batch"},   {"layers", "layers"}, {"dropout", "dropout"}, {"input", "input"},    {"classes", "classes"}};
  std::string out;
  auto begin = std::sregex_iterator(message.begin(), message.end(), field);
  size_t last = 0;
  for (auto it = begin; it != std::sregex_iterator(); ++it) {
    const auto flag = flag_of.find((*it)[1].str());
    out += message.substr(last, static_cast<size_t>(it->position()) - last);
    out += flag != flag_of.end() ? "--" + flag->second : it->str();
    last = static_cast<size_t>(it->position() + it->length());
  }
  return out + message.substr(last);
}

}  // namespace

absl::StatusOr<ir::Program> BuildExportModel(const ExportOptions& o) {
  // 0 is the default width; the builder's range ([1, ...]) read as if 0 were refused.
  if (o.ffn < 0) {
    return absl::InvalidArgumentError(absl::StrCat("--ffn ", o.ffn, " must be >= 0 (0: the model's default width)"));
  }
  absl::StatusOr<ir::Program> program = engine::BuildModelProgram(o);
  if (!engine::IsModelDtype(o.dtype)) return WithContext(program.status(), "flag --dtype");
  if (!program.ok()) return absl::Status(program.status().code(), InFlagNames(std::string(program.status().message())));
  return program;
}

}  // namespace pdist::tools

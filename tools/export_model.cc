// pdist-export's flags → GptConfig / LlamaConfig / MlpConfig → Program.
#include "tools/export_model.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "ir/models/gpt.h"
#include "ir/models/llama.h"
#include "ir/models/mlp.h"

namespace pdist::tools {

void RegisterExportFlags(cli::FlagSet& flags, ExportOptions* o) {
  flags.Int("layers", &o->layers, "transformer blocks (mlp: hidden relu layers)");
  flags.Int("hidden", &o->hidden, "hidden size (mlp: width of each relu layer)");
  flags.Int("heads", &o->heads, "attention heads; must divide --hidden");
  flags.Int("vocab", &o->vocab, "vocabulary size");
  flags.Int("seq", &o->seq, "sequence length");
  flags.Int("batch", &o->batch, "micro-batch size");
  flags.Int("ffn", &o->ffn, "MLP width; 0: 4*hidden (gpt), 8*hidden/3 rounded up to 8 (llama)");
  flags.Bool("tied", &o->tied, "share the token embedding with the output head");
  flags.Double("dropout", &o->dropout, "embedding and residual dropout probability (gpt, llama)");
  flags.Int("input", &o->input, "mlp: input features");
  flags.Int("classes", &o->classes, "mlp: output classes");
  flags.String("dtype", &o->dtype, "parameter dtype: f32 or f64");
}

absl::StatusOr<ir::Program> BuildExportModel(const ExportOptions& o) {
  if (o.dtype != "f32" && o.dtype != "f64") {
    return absl::InvalidArgumentError(absl::StrCat("flag --dtype: '", o.dtype, "' is not f32 or f64"));
  }
  const ir::DataType dtype = o.dtype == "f64" ? ir::DataType::kFloat64 : ir::DataType::kFloat32;
  if (o.model == "gpt") {
    return ir::models::BuildGpt({.vocab = o.vocab, .hidden = o.hidden, .layers = o.layers, .heads = o.heads,
                                 .ffn_hidden = o.ffn, .seq_len = o.seq, .batch = o.batch,
                                 .tied_embeddings = o.tied, .dtype = dtype, .dropout = o.dropout});
  }
  if (o.model == "llama") {
    return ir::models::BuildLlama({.vocab = o.vocab, .hidden = o.hidden, .layers = o.layers, .heads = o.heads,
                                   .ffn_hidden = o.ffn, .seq_len = o.seq, .batch = o.batch,
                                   .tied_embeddings = o.tied, .dtype = dtype, .dropout = o.dropout});
  }
  if (o.model == "mlp") {
    if (o.layers < 0) return absl::InvalidArgumentError(absl::StrCat("flag --layers must be >= 0 for mlp, got ", o.layers));
    return ir::models::BuildMlp({.input = o.input,
                                 .hidden = std::vector<int64_t>(static_cast<size_t>(o.layers), o.hidden),
                                 .classes = o.classes,
                                 .batch = o.batch,
                                 .dtype = dtype});
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown model '", o.model, "'; expected gpt, llama or mlp"));
}

}  // namespace pdist::tools

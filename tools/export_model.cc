// pdist-export's flags → GptConfig / LlamaConfig / MlpConfig → Program.
#include "tools/export_model.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "ir/models/gpt.h"
#include "ir/models/llama.h"
#include "ir/models/mlp.h"
#include "ir/status.h"
#include "passes/amp.h"

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
  flags.String("dtype", &o->dtype,
               "f32, f64, or bf16: mixed precision o2 (bf16 parameters and matmuls; norms, softmax and the loss in "
               "f32; training adds f32 master weights)");
}

namespace {

absl::StatusOr<ir::Program> BuildInDtype(const ExportOptions& o, ir::DataType dtype);

}  // namespace

absl::StatusOr<ir::Program> BuildExportModel(const ExportOptions& o) {
  if (o.dtype == "bf16") {
    // The f32 model through the amp pass: what a strategy's amp {bfloat16, o2} trains.
    PDIST_ASSIGN_OR_RETURN(ir::Program program, BuildInDtype(o, ir::DataType::kFloat32));
    PDIST_RETURN_IF_ERROR(passes::ApplyAmp(program, ir::DataType::kBFloat16, passes::AmpLevel::kO2).status());
    return program;
  }
  if (o.dtype != "f32" && o.dtype != "f64") {
    return absl::InvalidArgumentError(absl::StrCat(
        "flag --dtype: '", o.dtype, "' is not f32, f64 or bf16 (for float16, export f32 and train with the strategy's "
        "amp {\"dtype\": \"float16\"}, which adds the loss scaling float16 needs)"));
  }
  return BuildInDtype(o, o.dtype == "f64" ? ir::DataType::kFloat64 : ir::DataType::kFloat32);
}

namespace {

absl::StatusOr<ir::Program> BuildInDtype(const ExportOptions& o, ir::DataType dtype) {
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

}  // namespace

}  // namespace pdist::tools

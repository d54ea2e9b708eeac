// pdist-export's flag handling: flags → model program, and the errors bad flags give.
#include "tools/export_model.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ir/models/gpt.h"
#include "ir/models/model_stats.h"
#include "ir/serialize.h"
#include "ir/status.h"

namespace pdist::tools {
namespace {

using ::testing::HasSubstr;

// Parses `args` (after the program name) as pdist-export does; the positional is the model.
absl::StatusOr<ir::Program> Export(std::vector<const char*> args) {
  args.insert(args.begin(), "pdist-export");
  ExportOptions o;
  cli::FlagSet flags("pdist-export", "gpt|llama|mlp [options]");
  RegisterExportFlags(flags, &o);
  absl::StatusOr<std::vector<std::string>> positional = flags.Parse(static_cast<int>(args.size()), args.data());
  if (!positional.ok()) return positional.status();
  o.model = positional->empty() ? "" : positional->front();
  PDIST_RETURN_IF_ERROR(CheckFlagsApply(flags, o.model));
  return BuildExportModel(o);
}

// A flag the model has no use for was ignored, its own checks too (mlp --seq 0 exported).
TEST(ExportModelTest, FlagsAModelHasNoUseForAreRefused) {
  EXPECT_EQ(Export({"mlp", "--seq", "0"}).status().message(), "--seq does not apply to mlp (see --help)");
  EXPECT_EQ(Export({"mlp", "--heads", "3"}).status().message(), "--heads does not apply to mlp (see --help)");
  EXPECT_EQ(Export({"gpt", "--input", "0"}).status().message(), "--input does not apply to gpt (see --help)");
  EXPECT_EQ(Export({"llama", "--classes", "2"}).status().message(), "--classes does not apply to llama (see --help)");
  EXPECT_TRUE(Export({"mlp", "--layers", "2", "--hidden", "8", "--batch", "4"}).ok());  // shared flags
}

TEST(ExportModelTest, GptFlagsBecomeTheConfig) {
  absl::StatusOr<ir::Program> p = Export({"gpt", "--layers", "3", "--hidden=32", "--heads", "2", "--vocab", "100",
                                          "--seq", "16", "--batch", "4", "--ffn", "48", "--tied", "--dtype", "f64"});
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->FindArgument("tokens")->type(), (ir::TensorType{{4, 16}, ir::DataType::kInt64}));
  EXPECT_EQ(p->FindArgument("gpt.h.2.mlp.up.weight")->type(), (ir::TensorType{{32, 48}, ir::DataType::kFloat64}));
  EXPECT_EQ(p->FindArgument("gpt.lm_head.weight"), nullptr);
  EXPECT_EQ(ir::models::CountParameters(*p),
            ir::models::GptParameterCount({.vocab = 100, .hidden = 32, .layers = 3, .heads = 2, .ffn_hidden = 48,
                                           .seq_len = 16, .batch = 4, .tied_embeddings = true}));
  // What pdist-export writes is a valid model.pb.
  absl::StatusOr<std::string> bytes = ir::SerializeProgram(*p);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  EXPECT_TRUE(ir::DeserializeProgram(*bytes).ok());
}

TEST(ExportModelTest, LlamaAndMlp) {
  absl::StatusOr<ir::Program> llama = Export({"llama"});
  ASSERT_TRUE(llama.ok()) << llama.status();
  EXPECT_NE(llama->FindArgument("llama.h.1.mlp.gate.weight"), nullptr);
  absl::StatusOr<ir::Program> mlp = Export({"mlp", "--input", "5", "--layers", "3", "--hidden", "7", "--classes", "2"});
  ASSERT_TRUE(mlp.ok()) << mlp.status();
  EXPECT_EQ(mlp->FindArgument("mlp.fc.2.weight")->type().shape, (ir::Shape{7, 7}));
  EXPECT_EQ(mlp->FindArgument("mlp.head.weight")->type().shape, (ir::Shape{7, 2}));
}

// --dtype bf16 is the f32 model through amp o2: bf16 parameters and matmuls, the norms' scales
// and the loss in f32 (a model pdist-train trains, with f32 master weights).
TEST(ExportModelTest, Bfloat16IsMixedPrecisionOTwo) {
  absl::StatusOr<ir::Program> gpt = Export({"gpt", "--dtype", "bf16"});
  ASSERT_TRUE(gpt.ok()) << gpt.status();
  EXPECT_EQ(gpt->FindArgument("gpt.h.0.mlp.up.weight")->type().dtype, ir::DataType::kBFloat16);
  EXPECT_EQ(gpt->FindArgument("gpt.h.0.ln_1.weight")->type().dtype, ir::DataType::kFloat32);
  EXPECT_EQ(gpt->loss()->type().dtype, ir::DataType::kFloat32);
  int64_t bf16_matmuls = 0;
  for (const auto& op : gpt->block().ops()) {
    if (op->type() == "matmul") bf16_matmuls += op->result(0)->type().dtype == ir::DataType::kBFloat16;
    if (op->type() == "layer_norm") {  // a bf16 activation, f32 parameters and statistics
      EXPECT_EQ(op->operand(0)->type().dtype, ir::DataType::kBFloat16);
      EXPECT_EQ(op->operand(1)->type().dtype, ir::DataType::kFloat32);
      EXPECT_EQ(op->result(1)->type().dtype, ir::DataType::kFloat32);
    }
  }
  EXPECT_GT(bf16_matmuls, 4);
}

TEST(ExportModelTest, BadFlagsAreInvalidArgument) {
  auto error = [](std::vector<const char*> args) {
    absl::StatusOr<ir::Program> p = Export(std::move(args));
    EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
    return std::string(p.status().message());
  };
  // The builders' field names read as the flags the user gave (GptConfig.seq_len → --seq).
  EXPECT_THAT(error({"gpt", "--heads", "5"}), HasSubstr("--hidden (64) must be divisible by --heads (5)"));
  EXPECT_THAT(error({"gpt", "--dtype", "f16"}), HasSubstr("flag --dtype: dtype 'f16' is not f32, f64 or bf16"));
  EXPECT_THAT(error({"bert"}), HasSubstr("unknown model 'bert'; expected gpt, llama or mlp"));
  EXPECT_THAT(error({"gpt", "--layer", "2"}), HasSubstr("--layer"));
  EXPECT_THAT(error({"gpt", "--layers", "two"}), HasSubstr("two"));
  EXPECT_THAT(error({"mlp", "--layers", "-1"}), HasSubstr("layers must be >= 0"));
  EXPECT_EQ(error({"llama", "--seq", "0"}), "--seq must be in [1, 16777216], got 0");
  EXPECT_EQ(error({"gpt", "--ffn", "-2"}), "--ffn -2 must be >= 0 (0: the model's default width)");
  EXPECT_THAT(error({"mlp", "--classes", "0"}), HasSubstr("--classes must be in [1, 16777216], got 0"));
}

}  // namespace
}  // namespace pdist::tools

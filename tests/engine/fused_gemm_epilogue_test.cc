// Bias adds in GEMM epilogues (passes/fuse_gemm_epilogue.h) are the same computation: with
// fuse_gemm_epilogue on, every strategy trains bit for bit as with a matmul and an add — losses,
// parameters and optimizer states — in f32, f64 and bf16 o2, with tensor parallelism (the
// column-parallel biases fuse; the row-parallel ones, added after the all-reduce, do not),
// sequence parallelism, pipelines, recompute (the replayed pairs fuse too) and ZeRO-3; the
// programs do fuse, and the op itself checks its shapes and differentiates.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>
#include <variant>
#include <vector>

#include "absl/strings/str_cat.h"
#include "ir/builder.h"
#include "executor/executor.h"
#include "passes/autodiff.h"
#include "passes/distributed_programs.h"
#include "passes/fuse_gemm_epilogue.h"
#include "tests/engine/distributed_test_util.h"

namespace pdist::engine {
namespace {

using testing::RunOutcome;

constexpr int64_t kSteps = 3;

struct Case {
  std::string name;
  std::string strategy;
  ir::DataType dtype;
};
void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

RunOutcome Train(const Case& c, bool fuse) {
  EngineOptions o = testing::EquivalenceOptions();
  o.strategy_json = c.strategy;
  o.fuse_gemm_epilogue = fuse;
  return testing::TrainSteps(testing::BuildSmallModel("gpt", c.dtype, 2, 8), o, kSteps, testing::kSmallVocab);
}

class FusedGemmEpilogueTest : public ::testing::TestWithParam<Case> {};

TEST_P(FusedGemmEpilogueTest, TrainsBitForBitAsAMatmulAndAnAdd) {
  testing::ExpectBitForBit(Train(GetParam(), true), Train(GetParam(), false), kSteps);
}

std::string Json(const std::string& body) { return absl::StrCat("{", body, "}"); }

INSTANTIATE_TEST_SUITE_P(
    Strategies, FusedGemmEpilogueTest,
    ::testing::Values(
        Case{"one_rank_f64", "", ir::DataType::kFloat64}, Case{"one_rank_f32", "", ir::DataType::kFloat32},
        Case{"bf16_o2", Json(R"("amp": {"enable": true, "dtype": "bfloat16", "level": "o2"})"), ir::DataType::kFloat32},
        Case{"dp2_mp2", Json(R"("dp_degree": 2, "mp_degree": 2)"), ir::DataType::kFloat64},
        Case{"mp2_sp", Json(R"("mp_degree": 2, "sp": true)"), ir::DataType::kFloat32},
        Case{"recompute_full", Json(R"("recompute": {"enable": true, "granularity": "full"})"), ir::DataType::kFloat64},
        Case{"dp2_zero3", Json(R"("dp_degree": 2, "sharding": {"enable": true, "stage": 3})"), ir::DataType::kFloat32},
        Case{"pp2_1f1b_dp2",
             Json(R"("dp_degree": 2, "pp_degree": 2, "pipeline": {"enable": true, "schedule_mode": "1F1B", "accumulate_steps": 2})"),
             ir::DataType::kFloat64}),
    [](const ::testing::TestParamInfo<Case>& info) { return info.param.name; });

// The ops of a program, counted by type.
std::map<std::string, int64_t> OpCounts(const ir::Program& program) {
  std::map<std::string, int64_t> count;
  for (const auto& op : program.block().ops()) ++count[op->type()];
  return count;
}

// One rank of the 2-layer GPT: every linear layer's bias add fuses (qkv, out-projection, two MLP
// layers per block; the head has no bias), the MLP's GELU (tanh form) with its first layer, the
// sums' gradients read the fused results, and the bias gradients join the weight gradients. With
// mp 2 the row-parallel layers' biases are added after their all-reduce: half of them stay adds.
TEST(FuseGemmEpilogueTest, EveryLinearLayersBiasAddFuses) {
  for (const auto& [strategy_json, fused_per_layer] : {std::pair{std::string("{}"), 4}, std::pair{Json(R"("mp_degree": 2)"), 2}}) {
    SCOPED_TRACE(strategy_json);
    const ir::Program model = testing::BuildSmallModel("gpt", ir::DataType::kFloat32, 2, 8);
    absl::StatusOr<ir::Program> plain = testing::LocalTrainProgram(model, strategy_json, 0, std::nullopt, {});
    absl::StatusOr<ir::Program> fused =
        testing::LocalTrainProgram(model, strategy_json, 0, std::nullopt, {.gemm_epilogue = true});
    ASSERT_TRUE(plain.ok()) << plain.status();
    ASSERT_TRUE(fused.ok()) << fused.status();
    std::map<std::string, int64_t> before = OpCounts(*plain), after = OpCounts(*fused);
    EXPECT_EQ(after["fused_gemm_epilogue"], 2 * fused_per_layer);
    EXPECT_EQ(after["matmul"], before["matmul"] - after["fused_gemm_epilogue"]);
    EXPECT_EQ(after["add"], before["add"] - after["fused_gemm_epilogue"]);
    EXPECT_EQ(before["gelu"], 2);
    EXPECT_EQ(after["gelu"], 0);
    int64_t with_gelu = 0;
    for (const auto& op : fused->block().ops()) {
      if (op->type() != "fused_gemm_epilogue" || std::get<std::string>(op->attrs().at("activation")) != "gelu") continue;
      ++with_gelu;
      ASSERT_EQ(op->num_results(), 2u);
      bool read_by_gelu_grad = false;  // the kept sum is what the GELU's gradient reads
      for (const auto& reader : fused->block().ops()) {
        read_by_gelu_grad |= reader->type() == "gelu_grad" && reader->operand(0) == op->result(1);
      }
      EXPECT_TRUE(read_by_gelu_grad) << op->Describe();
    }
    EXPECT_EQ(with_gelu, 2);
    // The backward: each fused pair's bias gradient comes out of its weight gradient's GEMM.
    EXPECT_GE(after["fused_gemm_epilogue_grad"], after["fused_gemm_epilogue"]);
    EXPECT_EQ(after["matmul_grad"], before["matmul_grad"] - after["fused_gemm_epilogue_grad"]);
    EXPECT_EQ(after["add_grad"], before["add_grad"] - after["fused_gemm_epilogue_grad"]);
    for (const auto& op : fused->block().ops()) {
      if (op->type() != "add_grad") continue;
      const ir::Operation* producer = op->operand(0)->producer();
      EXPECT_TRUE(producer == nullptr || producer->type() != "matmul" || op->operand(1)->type().rank() != 1)
          << "an add_grad still reads a fused product: " << op->Describe();
    }
    const passes::FuseGemmEpilogueReport again = passes::FuseGemmEpilogues(*fused);  // nothing left to fuse
    EXPECT_EQ(again.bias_adds, 0);
    EXPECT_EQ(again.gelus, 0);
    EXPECT_EQ(again.bias_grads, 0);
  }
}

// With data parallelism the bias gradients' all-reduces (bucketed or not) follow the fused ops:
// the epilogues fuse before fuse-allreduce moves each collective next to its gradient's producer,
// which would otherwise sit between a bias's add_grad and its matmul_grad.
TEST(FuseGemmEpilogueTest, BiasGradientsFuseUnderDataParallelBuckets) {
  const ir::Program model = testing::BuildSmallModel("gpt", ir::DataType::kFloat32, 2, 8);
  for (int64_t bucket_bytes : {int64_t{0}, int64_t{1} << 20}) {
    SCOPED_TRACE(bucket_bytes);
    absl::StatusOr<ir::Program> local =
        testing::LocalTrainProgram(model, Json(R"("dp_degree": 2)"), 0, bucket_bytes, {.gemm_epilogue = true});
    ASSERT_TRUE(local.ok()) << local.status();
    std::map<std::string, int64_t> count = OpCounts(*local);
    EXPECT_EQ(count["fused_gemm_epilogue_grad"], 8);  // 4 per block
    EXPECT_GT(count["c_allreduce"] + count["c_allreduce_coalesced"], 0);
  }
}

// A product read by anything but its add (its values, not only its type) stays a matmul.
TEST(FuseGemmEpilogueTest, AProductReadElsewhereStaysAMatmul) {
  ir::Program p;
  ir::Builder b(&p);
  ir::Value* x = b.Data("x", {{4, 8}, ir::DataType::kFloat32});
  ir::Value* w = b.Data("w", {{8, 6}, ir::DataType::kFloat32});
  ir::Value* bias = b.Data("b", {{6}, ir::DataType::kFloat32});
  absl::StatusOr<ir::Value*> product = b.Op1("matmul", {x, w}, {{"trans_x", false}, {"trans_y", false}});
  ASSERT_TRUE(product.ok());
  absl::StatusOr<ir::Value*> sum = b.Op1("add", {*product, bias});
  absl::StatusOr<ir::Value*> other = b.Op1("relu", {*product});
  ASSERT_TRUE(sum.ok() && other.ok());
  p.add_output("sum", *sum);
  p.add_output("other", *other);
  EXPECT_EQ(passes::FuseGemmEpilogues(p).bias_adds, 0);
  EXPECT_EQ(OpCounts(p)["matmul"], 1);
}

// Shape inference names what does not fold into one GEMM with a bias per column, forward and
// backward.
TEST(FuseGemmEpilogueTest, TheOpRefusesWhatIsNotOneGemmWithAColumnBias) {
  ir::Program p;
  ir::Builder b(&p);
  const ir::DataType f32 = ir::DataType::kFloat32;
  ir::Value* x = b.Data("x", {{2, 4, 8}, f32});
  ir::Value* w = b.Data("w", {{8, 6}, f32});
  const ir::AttributeMap plain = {{"trans_x", false}, {"trans_y", false}};
  EXPECT_TRUE(b.Op1("fused_gemm_epilogue", {x, w, b.Data("b", {{6}, f32})}, plain).ok());
  absl::StatusOr<ir::Value*> rows = b.Op1("fused_gemm_epilogue", {x, w, b.Data("b4", {{4}, f32})}, plain);
  ASSERT_FALSE(rows.ok());
  EXPECT_NE(rows.status().message().find("bias must be f32[6]"), std::string::npos) << rows.status();
  absl::StatusOr<ir::Value*> batched =
      b.Op1("fused_gemm_epilogue", {x, b.Data("w3", {{2, 8, 6}, f32}), b.Data("b6", {{6}, f32})}, plain);
  ASSERT_FALSE(batched.ok());
  EXPECT_NE(batched.status().message().find("one matrix y"), std::string::npos) << batched.status();
  absl::StatusOr<ir::Value*> transposed = b.Op1("fused_gemm_epilogue", {b.Data("xt", {{8, 4}, f32}), w,
                                                                        b.Data("b7", {{6}, f32})},
                                                {{"trans_x", true}, {"trans_y", false}});
  ASSERT_FALSE(transposed.ok());
  EXPECT_NE(transposed.status().message().find("transposed"), std::string::npos) << transposed.status();
  absl::StatusOr<std::vector<ir::Value*>> gelu = b.Create(
      "fused_gemm_epilogue", {x, w, b.Data("b8", {{6}, f32})}, {{"trans_x", false}, {"trans_y", false}, {"activation", std::string("gelu")}});
  ASSERT_TRUE(gelu.ok()) << gelu.status();
  EXPECT_EQ(gelu->size(), 2u);  // gelu(sum), and the sum
  absl::StatusOr<std::vector<ir::Value*>> grads =
      b.Create("fused_gemm_epilogue_grad", {x, w, b.Data("g", {{2, 4, 6}, f32})}, {{"trans_x", false}, {"trans_y", false}});
  ASSERT_TRUE(grads.ok()) << grads.status();
  EXPECT_EQ((*grads)[2]->type(), (ir::TensorType{{6}, f32}));  // the bias's gradient
  absl::StatusOr<std::vector<ir::Value*>> batched_grads =
      b.Create("fused_gemm_epilogue_grad", {x, b.Data("w4", {{2, 8, 6}, f32}), b.Data("g2", {{2, 4, 6}, f32})},
               {{"trans_x", false}, {"trans_y", false}});
  ASSERT_FALSE(batched_grads.ok());
  EXPECT_NE(batched_grads.status().message().find("fused_gemm_epilogue_grad multiplies"), std::string::npos)
      << batched_grads.status();
  absl::StatusOr<ir::Value*> relu = b.Op1("fused_gemm_epilogue", {x, w, b.Data("b9", {{6}, f32})},
                                          {{"trans_x", false}, {"trans_y", false}, {"activation", std::string("relu")}});
  ASSERT_FALSE(relu.ok());
  EXPECT_NE(relu.status().message().find("activation must be none or gelu, got 'relu'"), std::string::npos)
      << relu.status();
}

// A one-layer program, its bias (and a GELU, with `gelu`) applied by fused_gemm_epilogue or by
// matmul, add (and gelu), trained through loss = sum(out²): its gradients.
std::map<std::string, exec::Tensor> LinearGradients(bool fused, bool gelu) {
  ir::Program p;
  ir::Builder b(&p);
  const ir::DataType f64 = ir::DataType::kFloat64;
  ir::Value* x = b.Data("x", {{3, 4, 8}, f64});
  ir::Value* w = b.Parameter("w", {{8, 6}, f64}, "normal(0.5)");
  ir::Value* bias = b.Parameter("b", {{6}, f64}, "normal(0.5)");
  const ir::AttributeMap attrs = {{"trans_x", false}, {"trans_y", false}};
  ir::AttributeMap fused_attrs = attrs;
  fused_attrs["activation"] = std::string(gelu ? "gelu" : "none");
  absl::StatusOr<ir::Value*> out;
  if (fused) {
    absl::StatusOr<std::vector<ir::Value*>> results = b.Create("fused_gemm_epilogue", {x, w, bias}, fused_attrs);
    EXPECT_TRUE(results.ok()) << results.status();
    out = results->front();  // gelu(sum), or the sum
  } else {
    out = b.Op1("matmul", {x, w}, attrs);
    if (out.ok()) out = b.Op1("add", {*out, bias});
    if (gelu && out.ok()) out = b.Op1("gelu", {*out}, {{"approximate", true}});
  }
  EXPECT_TRUE(out.ok()) << out.status();
  absl::StatusOr<ir::Value*> square = b.Op1("multiply", {*out, *out});
  absl::StatusOr<ir::Value*> loss =
      b.Op1("sum", {*square}, {{"axis", std::vector<int64_t>{}}, {"keep_dim", false}});
  EXPECT_TRUE(loss.ok()) << loss.status();
  p.set_loss(*loss);
  const absl::Status backward = passes::AppendBackward(p, *loss);
  EXPECT_TRUE(backward.ok()) << backward;
  std::vector<int64_t> fetch;
  for (const ir::StateUpdate& g : p.gradients()) fetch.push_back(g.new_value->id());
  absl::StatusOr<exec::Executor> executor = exec::Executor::Create(p, {.fetch_ids = fetch});
  EXPECT_TRUE(executor.ok()) << executor.status();
  exec::Workspace workspace;
  EXPECT_TRUE(exec::InitializeWorkspace(p, /*seed=*/3, workspace).ok());  // the same w and b both times
  std::vector<double> xs(static_cast<size_t>(x->type().num_elements()));
  for (size_t i = 0; i < xs.size(); ++i) xs[i] = std::sin(0.7 * static_cast<double>(i) + 0.3);
  absl::StatusOr<exec::RunResult> run = executor->Run({{"x", exec::TensorFromDoubles(x->type(), xs)}}, workspace);
  EXPECT_TRUE(run.ok()) << run.status();
  std::map<std::string, exec::Tensor> grads;
  for (const ir::StateUpdate& g : p.gradients()) grads[g.state->name()] = run->fetched.at(g.new_value->id());
  return grads;
}

// Its gradient is the GELU's (with "gelu"), then matmul's for x and w and the column sums for the
// bias: a program holding one differentiates to the gradients of the ops it stands for.
TEST(FuseGemmEpilogueTest, ItDifferentiatesAsAMatmulAndABiasAdd) {
  for (bool gelu : {false, true}) {
  SCOPED_TRACE(gelu ? "with gelu" : "without an activation");
  const std::map<std::string, exec::Tensor> fused = LinearGradients(true, gelu), separate = LinearGradients(false, gelu);
  ASSERT_EQ(fused.size(), 2u);
  ASSERT_EQ(separate.size(), 2u);
  for (const auto& [name, expected] : separate) {
    const exec::Tensor& got = fused.at(name);
    ASSERT_EQ(got.type(), expected.type()) << name;
    double diff = 0, norm = 0;
    for (int64_t i = 0; i < expected.num_elements(); ++i) {
      diff += (got.At(i) - expected.At(i)) * (got.At(i) - expected.At(i));
      norm += expected.At(i) * expected.At(i);
    }
    EXPECT_GT(norm, 0) << name;
    EXPECT_LE(std::sqrt(diff), 1e-12 * std::sqrt(norm)) << name;  // the bias's sum may add in another order
  }
  }
}

}  // namespace
}  // namespace pdist::engine

// Mixed precision trains like float32, and its distributed forms are the same computation:
//  - bf16 o1, bf16 o2 and f16 o2 follow the f32 loss curve of the same model and seed within a
//    measured tolerance (docs/mixed_precision.md records the numbers);
//  - o2's parameters are at every step the bf16 rounding of their f32 master weights;
//  - o2's norms and cross entropy on bf16 activations are their f32-list forms rounded once, and
//    tensor parallelism with the vocabulary split follows one rank;
//  - ZeRO 1/2/3 under bf16 o2 are bit-for-bit the dp run they shard: the reductions add the same
//    f32 numbers, only where the slices live differs;
//  - float16 loss scaling skips every step whose gradients overflow (forced here by a loss scale
//    of 2^30, which sends the scaled gradients past f16's 65504 to inf), leaves the parameters
//    untouched then, shrinks the scale by Paddle's rule until steps are clean, grows it again,
//    and the run then learns — on one rank and on four (dp2 × mp2, dp2 × pp2: all must skip at
//    once), and a pipeline skips exactly the steps one rank skips.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "executor/tensor.h"
#include "passes/amp.h"
#include "tests/engine/distributed_test_util.h"

namespace pdist::engine {
namespace {

using testing::RunOutcome;

constexpr int64_t kSteps = 30;

// A strategy with amp on; `more` adds top-level keys, `amp_keys` keys of the amp section.
std::string Amp(const std::string& dtype, const std::string& level, const std::string& more = "",
                const std::string& amp_keys = "") {
  return absl::StrCat(R"({"amp": {"enable": true, "dtype": ")", dtype, R"(", "level": ")", level, R"(")", amp_keys,
                      "}", more, "}");
}

// One fixed batch, learnt by heart: the loss falls steeply, so a curve has a shape to follow.
RunOutcome Train(const std::string& strategy_json, int64_t steps = kSteps) {
  EngineOptions o = testing::EquivalenceOptions();
  o.lr.base = 3e-3;
  o.strategy_json = strategy_json;
  ir::Program model = testing::BuildSmallModel("gpt", ir::DataType::kFloat32);
  const ir::Program reference = model.Clone();
  return testing::TrainOn(std::move(model), o, steps,
                          [&](int64_t) { return testing::RandomTokenBatch(reference, 0, testing::kSmallVocab); });
}

double MaxRelativeLossGap(const RunOutcome& got, const RunOutcome& want) {
  double gap = 0;
  for (size_t s = 0; s < want.losses.size(); ++s) {
    gap = std::max(gap, std::abs(got.losses.at(s) - want.losses[s]) / std::abs(want.losses[s]));
  }
  return gap;
}

struct CurveCase {
  std::string dtype, level;
  double tolerance;  // max relative loss gap to f32 over the run (measured, with margin)
};

void PrintTo(const CurveCase& c, std::ostream* os) { *os << c.dtype << " " << c.level; }

class MixedPrecisionCurveTest : public ::testing::TestWithParam<CurveCase> {};

TEST_P(MixedPrecisionCurveTest, FollowsTheFloat32LossCurve) {
  const CurveCase& c = GetParam();
  const RunOutcome f32 = Train("{}");
  const RunOutcome amp = Train(Amp(c.dtype, c.level));
  const double gap = MaxRelativeLossGap(amp, f32);
  std::printf("%s %s: loss %.4f -> %.4f (f32 %.4f -> %.4f), max relative gap %.3g over %lld steps\n", c.dtype.c_str(),
              c.level.c_str(), amp.losses.front(), amp.losses.back(), f32.losses.front(), f32.losses.back(), gap,
              static_cast<long long>(kSteps));
  EXPECT_LE(gap, c.tolerance);
  EXPECT_LT(amp.losses.back(), 0.8 * amp.losses.front()) << "the mixed-precision run must learn";
  EXPECT_NE(amp.losses, f32.losses) << "a mixed-precision run identical to f32 ran no low-precision op";
}

INSTANTIATE_TEST_SUITE_P(Levels, MixedPrecisionCurveTest,
                         ::testing::Values(CurveCase{"bfloat16", "o1", 2e-2}, CurveCase{"bfloat16", "o2", 2e-2},
                                           CurveCase{"float16", "o2", 1e-2}),
                         [](const auto& info) { return info.param.dtype + "_" + info.param.level; });

// Paddle's custom lists move op types between the lists: here every matmul to f32 (black) and
// layer_norm to bf16 (white), in the program the engine trains.
TEST(MixedPrecisionTest, CustomListsMoveOpsBetweenPrecisions) {
  auto dtypes_of = [](const std::string& strategy) {
    EngineOptions o = testing::EquivalenceOptions();
    o.strategy_json = strategy;
    auto engine = Engine::Create(testing::BuildSmallModel("gpt", ir::DataType::kFloat32), o);
    EXPECT_TRUE(engine.ok()) << engine.status();
    std::map<std::string, std::set<ir::DataType>> out;
    if (!engine.ok()) return out;
    for (const auto& op : (*engine)->train_program().block().ops()) {
      if (op->role() == ir::OpRole::kForward && op->num_results() > 0) out[op->type()].insert(op->result(0)->type().dtype);
    }
    return out;
  };
  const auto built_in = dtypes_of(R"({"amp": {"enable": true, "dtype": "bfloat16"}})");
  EXPECT_EQ(built_in.at("matmul"), std::set<ir::DataType>{ir::DataType::kBFloat16});
  EXPECT_EQ(built_in.at("layer_norm"), std::set<ir::DataType>{ir::DataType::kFloat32});
  const auto custom = dtypes_of(R"({"amp": {"enable": true, "dtype": "bfloat16", "custom_black_list": ["matmul"],
                                            "custom_white_list": ["layer_norm"]}})");
  EXPECT_EQ(custom.at("matmul"), std::set<ir::DataType>{ir::DataType::kFloat32});
  EXPECT_EQ(custom.at("layer_norm"), std::set<ir::DataType>{ir::DataType::kBFloat16});
}

// A strategy's amp on a program that is mixed precision already (exported with --dtype bf16):
// refused by name (bf16 stayed as it was, whatever the level; float16 turned it into f16).
TEST(MixedPrecisionTest, AmpOnAMixedPrecisionProgramIsRefused) {
  ir::Program program = testing::BuildSmallModel("gpt", ir::DataType::kFloat32);
  ASSERT_TRUE(passes::ApplyAmp(program, ir::DataType::kBFloat16, passes::AmpLevel::kO2).ok());
  EngineOptions o = testing::EquivalenceOptions();
  o.strategy_json = R"({"amp": {"enable": true, "dtype": "float16", "level": "o1"}})";
  auto engine = Engine::Create(std::move(program), o);
  ASSERT_FALSE(engine.ok());
  EXPECT_NE(engine.status().message().find("already: the program is mixed precision"), std::string::npos)
      << engine.status();
}

TEST(MixedPrecisionTest, OTwoParametersAreTheirMasterWeightsRounded) {
  const RunOutcome run = Train(Amp("bfloat16", "o2"), 5);
  int64_t checked = 0;
  for (const auto& [name, param] : run.state) {
    if (param.dtype() != ir::DataType::kBFloat16) continue;
    auto master = run.state.find(name + ".master");
    ASSERT_NE(master, run.state.end()) << "no master weight for bf16 parameter " << name;
    ASSERT_EQ(master->second.dtype(), ir::DataType::kFloat32) << name;
    const exec::Tensor rounded = exec::CastTensor(master->second, ir::DataType::kBFloat16);
    for (int64_t i = 0; i < param.num_elements(); ++i) ASSERT_EQ(param.At(i), rounded.At(i)) << name << "[" << i << "]";
    ++checked;
  }
  EXPECT_GT(checked, 10);
  // The LayerNorm scales are read only as a norm's parameters and stay f32, without a master.
  auto ln = run.state.find("gpt.h.0.ln_1.weight");
  ASSERT_NE(ln, run.state.end());
  EXPECT_EQ(ln->second.dtype(), ir::DataType::kFloat32);
  EXPECT_EQ(run.state.count("gpt.h.0.ln_1.weight.master"), 0u);
}

// 8 steps of the small GPT under bf16 o2 with `amp_keys` added to the amp section: the losses,
// the state, rank 0's activation peak and the casts of the train program.
struct OTwoRun {
  std::vector<double> losses;
  exec::Workspace state;
  int64_t activation_peak = 0;
  int64_t casts = 0;
};
OTwoRun RunOTwo(const std::string& amp_keys) {
  EngineOptions o = testing::EquivalenceOptions();
  o.lr.base = 3e-3;
  o.strategy_json = Amp("bfloat16", "o2", "", amp_keys);
  ir::Program model = testing::BuildSmallModel("gpt", ir::DataType::kFloat32);
  const exec::Feeds batch = testing::RandomTokenBatch(model, 0, testing::kSmallVocab);
  OTwoRun out;
  auto engine = Engine::Create(std::move(model), o);
  EXPECT_TRUE(engine.ok()) << engine.status();
  if (!engine.ok()) return out;
  for (const auto& op : (*engine)->train_program().block().ops()) out.casts += op->type() == "cast";
  for (int64_t s = 0; s < 8; ++s) {
    absl::StatusOr<StepResult> r = (*engine)->TrainStep(batch);
    EXPECT_TRUE(r.ok()) << r.status();
    if (!r.ok()) return out;
    out.losses.push_back(r->loss);
    out.activation_peak = std::max(out.activation_peak, r->rank_peak_activation_bytes.at(0));
  }
  absl::StatusOr<exec::Workspace> state = (*engine)->WholeState();
  EXPECT_TRUE(state.ok()) << state.status();
  if (state.ok()) out.state = std::move(*state);
  return out;
}

// o2 with an op on the custom f32 list (`black_listed`: the op computed on an f32 cast of its
// activation, the result cast back) against o2's own form of it (f32 math on the bf16
// activation): the same numbers bit for bit, fewer casts and a lower activation peak.
void ExpectF32MathOnBf16IsTheF32OpRoundedOnce(const std::string& black_listed, const char* what) {
  const OTwoRun low = RunOTwo("");
  const OTwoRun f32 = RunOTwo(absl::StrCat(R"(, "custom_black_list": [")", black_listed, R"("])"));
  ASSERT_EQ(low.losses.size(), 8u);
  EXPECT_EQ(low.losses, f32.losses);
  EXPECT_GT(testing::ExpectSameState(low.state, f32.state), 20);
  EXPECT_LT(low.casts, f32.casts);
  EXPECT_LT(low.activation_peak, f32.activation_peak);
  std::printf("activation peak: %s on bf16 %lld bytes, in f32 %lld; casts %lld vs %lld\n", what,
              static_cast<long long>(low.activation_peak), static_cast<long long>(f32.activation_peak),
              static_cast<long long>(low.casts), static_cast<long long>(f32.casts));
}

// o2's norms read the bf16 residual and compute in f32 (ir/ops/norm.cc). That is the f32 norm on
// an exact upcast with its result rounded once — what o2 with layer_norm on the custom f32 list
// runs through two casts — so the runs agree bit for bit, while the backward keeps the norm's
// 2-byte input instead of its 4-byte copy and the casts are gone.
TEST(MixedPrecisionTest, OTwoNormsOnBf16ActivationsAreTheFloat32NormsRoundedOnce) {
  ExpectF32MathOnBf16IsTheF32OpRoundedOnce("layer_norm", "norms");
}

// o2's cross entropy reads the bf16 logits, computes in f32 and gives an f32 loss; its backward
// recomputes the softmax from the bf16 logits it keeps (2 bytes per token and class) where the
// f32 form keeps an f32 softmax (4) after an f32 copy of the logits. The softmax of an exact
// upcast is the same f32 softmax (the same SoftmaxLane), so the runs agree bit for bit.
TEST(MixedPrecisionTest, OTwoCrossEntropyOnBf16LogitsIsTheFloat32OneRoundedOnce) {
  ExpectF32MathOnBf16IsTheF32OpRoundedOnce("cross_entropy_with_softmax", "cross entropy");
}

// Tensor parallelism under bf16 o2: the head's logits are split over the vocabulary, and the
// cross entropy's backward recomputes each rank's softmax piece from its bf16 logits piece with
// the forward's two all-reduces (c_softmax_with_cross_entropy_grad_from_logits). Not bit for
// bit with one rank: the row-parallel matmuls' partial sums are added across ranks and rounded
// to bf16 in another order; the tolerance is the measured gap with a margin.
TEST(MixedPrecisionTest, OTwoTensorParallelVocabularyFollowsOneRank) {
  const std::string strategy = Amp("bfloat16", "o2", R"(, "mp_degree": 2)");
  {  // the gradient reads the logits, split over the vocabulary (partition makes it the c_ form)
    EngineOptions o = testing::EquivalenceOptions();
    o.strategy_json = strategy;
    auto engine = Engine::Create(testing::BuildSmallModel("gpt", ir::DataType::kFloat32), o);
    ASSERT_TRUE(engine.ok()) << engine.status();
    const ir::Operation* grad = nullptr;
    for (const auto& op : (*engine)->train_program().block().ops()) {
      if (op->type() == "cross_entropy_with_softmax_grad_from_logits") grad = op.get();
    }
    ASSERT_NE(grad, nullptr);
    ASSERT_TRUE(grad->operand(1)->dist_attr().has_value());
    EXPECT_GE(grad->operand(1)->dist_attr()->dims_mapping.back(), 0) << "the logits' vocabulary is not split";
  }
  const RunOutcome one = Train(Amp("bfloat16", "o2"), 10);
  const RunOutcome mp = Train(strategy, 10);
  ASSERT_EQ(mp.losses.size(), one.losses.size());
  const double gap = MaxRelativeLossGap(mp, one);
  std::printf("bf16 o2 mp2 against one rank: max relative loss gap %.3g over 10 steps\n", gap);
  EXPECT_LE(gap, 2e-3);  // measured: 3.0e-4
  EXPECT_LT(mp.losses.back(), 0.9 * mp.losses.front()) << "the run must learn";
}

class MixedPrecisionZeroTest : public ::testing::TestWithParam<int64_t> {};

TEST_P(MixedPrecisionZeroTest, ShardsTheMasterWeightsWithoutChangingABit) {
  const std::string dp = R"(, "dp_degree": 2)";
  const RunOutcome plain = Train(Amp("bfloat16", "o2", dp), 10);
  const RunOutcome zero =
      Train(Amp("bfloat16", "o2", absl::StrCat(dp, R"(, "sharding": {"enable": true, "stage": )", GetParam(), "}")), 10);
  EXPECT_EQ(zero.losses, plain.losses);
  EXPECT_GT(testing::ExpectSameState(zero.state, plain.state), 50);
}

INSTANTIATE_TEST_SUITE_P(Stages, MixedPrecisionZeroTest, ::testing::Values(1, 2, 3),
                         [](const auto& info) { return absl::StrCat("zero", info.param); });

// Hybrid ZeRO-3 (pairs of dp 4) under bf16 o2: the f32 masters are sharded over the pair and the
// run stays with plain dp 4. Not bit for bit: the pair's reduce-scatter and the replicas'
// all-reduce add the four gradients in another order than one all-reduce over four, and each
// bf16 gradient is rounded after it; 1e-3 is six times the measured difference.
TEST(MixedPrecisionHybridZeroTest, ShardsTheMasterWeightsOverTheirGroup) {
  const std::string dp = R"(, "dp_degree": 4)";
  const RunOutcome plain = Train(Amp("bfloat16", "o2", dp), 10);
  const RunOutcome hybrid =
      Train(Amp("bfloat16", "o2", absl::StrCat(dp, R"(, "sharding": {"enable": true, "stage": 3, "degree": 2})")), 10);
  ASSERT_EQ(hybrid.losses.size(), plain.losses.size());
  double worst = 0;
  for (size_t s = 0; s < plain.losses.size(); ++s) {
    worst = std::max(worst, std::abs(hybrid.losses[s] / plain.losses[s] - 1));
  }
  EXPECT_LE(worst, 1e-3);  // measured: 1.6e-4
  const auto master = hybrid.state.find("gpt.h.0.attn.qkv.weight.master");
  ASSERT_NE(master, hybrid.state.end());
  EXPECT_EQ(master->second.dtype(), ir::DataType::kFloat32);
}

struct ScaledStep {
  double loss;
  double scale;
  int64_t skipped;
};

std::vector<ScaledStep> TrainScaled(const std::string& degrees, int64_t steps) {
  EngineOptions o = testing::EquivalenceOptions();
  o.lr.base = 3e-3;
  o.strategy_json = Amp("float16", "o2", degrees,
                        R"(, "init_loss_scaling": 1073741824, "decr_every_n_nan_or_inf": 1, "incr_every_n_steps": 4)");
  ir::Program model = testing::BuildSmallModel("gpt", ir::DataType::kFloat32);
  const exec::Feeds batch = testing::RandomTokenBatch(model, 0, testing::kSmallVocab);
  auto engine = Engine::Create(std::move(model), o);
  EXPECT_TRUE(engine.ok()) << engine.status();
  std::vector<ScaledStep> out;
  if (!engine.ok()) return out;
  for (int64_t s = 0; s < steps; ++s) {
    absl::StatusOr<StepResult> r = (*engine)->TrainStep(batch);
    EXPECT_TRUE(r.ok()) << r.status();
    if (!r.ok() || !r->loss_scale) return out;
    out.push_back({r->loss, *r->loss_scale, r->skipped_steps});
  }
  return out;
}

// Paddle's update_loss_scaling with decr_every 1, incr_every 4, ratios 2 and 0.5, replayed from
// which steps skipped: the scale each step must have.
void ExpectPaddlesScaleRule(const std::vector<ScaledStep>& steps) {
  double scale = 1073741824.0;
  int64_t good = 0, skipped = 0;
  for (size_t s = 0; s < steps.size(); ++s) {
    const bool overflow = steps[s].skipped > skipped;
    skipped = steps[s].skipped;
    if (overflow) {
      good = 0;
      scale = std::max(scale * 0.5, 1.0);
    } else if (++good == 4) {
      scale *= 2;
      good = 0;
    }
    EXPECT_EQ(steps[s].scale, scale) << "step " << s;
  }
}

class LossScalingTest : public ::testing::TestWithParam<std::string> {};

TEST_P(LossScalingTest, SkipsOverflowingStepsAndRecovers) {
  const std::vector<ScaledStep> steps = TrainScaled(GetParam(), 40);
  ASSERT_EQ(steps.size(), 40u);
  // 2^30 overflows f16 at once; the first steps are all skipped and change no parameter, so the
  // loss on the same batch stays exactly where it was.
  int64_t first_clean = 0;
  while (first_clean < 40 && steps[first_clean].skipped == first_clean + 1) ++first_clean;
  std::printf("%s: %lld steps skipped before the first clean one (scale %g then); %lld skipped in all; loss %.4f -> %.4f\n",
              GetParam().empty() ? "one rank" : GetParam().c_str(), static_cast<long long>(first_clean),
              steps[first_clean].scale, static_cast<long long>(steps.back().skipped), steps.front().loss,
              steps.back().loss);
  ASSERT_GT(first_clean, 5);
  ASSERT_LT(first_clean, 35);
  for (int64_t s = 1; s <= first_clean; ++s) EXPECT_EQ(steps[s].loss, steps[0].loss) << "step " << s;
  ExpectPaddlesScaleRule(steps);
  // It grows back (clean steps double it every 4) and overflows again now and then: skipped
  // steps after the first clean one show the scale found its ceiling.
  EXPECT_GT(steps.back().skipped, first_clean);
  EXPECT_LT(steps.back().loss, 0.8 * steps.front().loss) << "after recovering, the run must learn";
}

INSTANTIATE_TEST_SUITE_P(Ranks, LossScalingTest,
                         ::testing::Values("", R"(, "dp_degree": 2, "mp_degree": 2)",
                                           R"(, "dp_degree": 2, "pp_degree": 2, "pipeline": {"accumulate_steps": 2})"),
                         [](const auto& info) {
                           if (info.param.empty()) return std::string("one_rank");
                           return std::string(info.param.find("pp_degree") != std::string::npos ? "dp2_pp2" : "dp2_mp2");
                         });

// A pipeline decides as one rank does: each stage sends its count to the stage that holds the
// scale, which sends the decision back; the same steps are skipped as by gradient merge over
// the same micro-batches on one rank.
TEST(LossScalingTest, APipelineSkipsTheStepsOneRankSkips) {
  const std::vector<ScaledStep> one = TrainScaled(R"(, "gradient_merge": {"enable": true, "k_steps": 2})", 30);
  const std::vector<ScaledStep> pp = TrainScaled(R"(, "pp_degree": 2, "pipeline": {"accumulate_steps": 2})", 30);
  ASSERT_EQ(one.size(), 30u);
  ASSERT_EQ(pp.size(), 30u);
  for (size_t s = 0; s < one.size(); ++s) {
    EXPECT_EQ(pp[s].skipped, one[s].skipped) << "step " << s;
    EXPECT_EQ(pp[s].scale, one[s].scale) << "step " << s;
    EXPECT_NEAR(pp[s].loss, one[s].loss, 1e-3 * one[s].loss) << "step " << s;
  }
  EXPECT_GT(one.back().skipped, 5);
}

}  // namespace
}  // namespace pdist::engine

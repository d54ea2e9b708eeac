// The built models run on the CPU executor in float64: the initial loss is ln(vocab) (the
// init makes logits nearly uniform) and the decoders are causal (a token never sees the future).
#include <algorithm>
#include <cmath>
#include <vector>

#include "executor/executor.h"
#include "executor/tensor.h"
#include "gtest/gtest.h"
#include "ir/models/gpt.h"
#include "ir/models/llama.h"
#include "ir/models/mlp.h"
#include "tests/models/model_test_util.h"

namespace pdist::ir::models {
namespace {

using exec::Tensor;

Tensor Ids(const Shape& shape, int64_t vocab, uint64_t seed) {
  std::vector<double> ids(static_cast<size_t>(NumElements(shape)));
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<double>((i * 7919 + seed * 104729) % vocab);
  return exec::TensorFromDoubles({shape, DataType::kInt64}, ids);
}

struct Forward {
  double loss = 0;
  std::vector<double> logits;
};

Forward RunForward(const Program& program, const exec::Feeds& feeds) {
  const Value* logits = testing::Logits(program);
  absl::StatusOr<exec::Executor> executor = exec::Executor::Create(program, {.fetch_ids = {logits->id()}});
  EXPECT_TRUE(executor.ok()) << executor.status();
  if (!executor.ok()) return {};
  exec::Workspace ws;
  EXPECT_TRUE(exec::InitializeWorkspace(program, /*seed=*/3, ws).ok());
  absl::StatusOr<exec::RunResult> r = executor->Run(feeds, ws);
  EXPECT_TRUE(r.ok()) << r.status();
  if (!r.ok()) return {};
  return {r->loss, exec::TensorToDoubles(r->fetched.at(logits->id()))};
}

// Runs `program` on two token batches that differ only in the last position: the logits of
// every earlier position must be identical, the last ones must differ.
void ExpectCausal(const Program& program, int64_t batch, int64_t seq, int64_t vocab) {
  const Shape shape{batch, seq};
  Tensor tokens = Ids(shape, vocab, 1);
  Tensor changed = tokens.Clone();
  for (int64_t b = 0; b < batch; ++b) {
    int64_t& last = changed.data<int64_t>()[b * seq + seq - 1];
    last = (last + 1) % vocab;
  }
  const Tensor labels = Ids(shape, vocab, 2);
  const Forward a = RunForward(program, {{"tokens", tokens}, {"labels", labels}});
  const Forward b = RunForward(program, {{"tokens", changed}, {"labels", labels}});
  ASSERT_EQ(a.logits.size(), static_cast<size_t>(batch * seq * vocab));
  ASSERT_EQ(b.logits.size(), a.logits.size());
  double past = 0, last = 0;
  for (int64_t i = 0; i < batch * seq * vocab; ++i) {
    const bool is_last = (i / vocab) % seq == seq - 1;
    double& worst = is_last ? last : past;
    worst = std::max(worst, std::abs(a.logits[i] - b.logits[i]));
  }
  EXPECT_EQ(past, 0.0) << "a later token changed an earlier position's logits";
  EXPECT_GT(last, 1e-6) << "the changed token did not reach its own logits";
  // Near-uniform logits at init: loss ≈ ln(vocab).
  EXPECT_NEAR(a.loss, std::log(static_cast<double>(vocab)), 0.1);
}

TEST(ModelRunTest, GptIsCausalAndStartsAtLnVocab) {
  for (bool tied : {false, true}) {
    absl::StatusOr<Program> p = BuildGpt({.vocab = 64, .hidden = 32, .layers = 2, .heads = 4, .seq_len = 8,
                                          .batch = 2, .tied_embeddings = tied, .dtype = DataType::kFloat64});
    ASSERT_TRUE(p.ok()) << p.status();
    ExpectCausal(*p, 2, 8, 64);
  }
}

TEST(ModelRunTest, LlamaIsCausalAndStartsAtLnVocab) {
  absl::StatusOr<Program> p = BuildLlama({.vocab = 64, .hidden = 32, .layers = 2, .heads = 4, .seq_len = 8,
                                          .batch = 2, .dtype = DataType::kFloat64});
  ASSERT_TRUE(p.ok()) << p.status();
  ExpectCausal(*p, 2, 8, 64);
}

TEST(ModelRunTest, MlpRunsToAFiniteLoss) {
  absl::StatusOr<Program> p = BuildMlp({.input = 6, .hidden = {8}, .classes = 3, .batch = 4, .dtype = DataType::kFloat64});
  ASSERT_TRUE(p.ok()) << p.status();
  std::vector<double> x(24);
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(static_cast<double>(i));
  const Forward f = RunForward(*p, {{"x", exec::TensorFromDoubles({{4, 6}, DataType::kFloat64}, x)},
                                    {"labels", exec::TensorFromDoubles({{4, 1}, DataType::kInt64}, {0, 1, 2, 1})}});
  EXPECT_TRUE(std::isfinite(f.loss));
  EXPECT_GT(f.loss, 0.0);
  EXPECT_EQ(f.logits.size(), 12u);
}

}  // namespace
}  // namespace pdist::ir::models

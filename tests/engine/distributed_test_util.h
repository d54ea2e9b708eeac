// Helpers for tests that compare a distributed run with the single-rank run of the same model:
// train both for some AdamW steps on the same batches, then compare every step's loss and
// every final parameter (gathered whole).
#pragma once

#include <cmath>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "engine/engine.h"
#include "executor/tensor.h"
#include "ir/models/gpt.h"
#include "ir/models/llama.h"
#include "ir/program.h"
#include "ir/status.h"
#include "passes/distributed_programs.h"
#include "strategy/strategy.h"

namespace pdist::engine::testing {

constexpr int64_t kSmallVocab = 64;
constexpr int64_t kSmallHeads = 4;

// GPT and LLaMA share these config fields; small enough for the suite, divisible by 4 ranks.
template <typename Config>
Config SmallConfig(ir::DataType dtype, int64_t layers, int64_t batch) {
  Config cfg;
  cfg.vocab = kSmallVocab;
  cfg.hidden = 32;
  cfg.layers = layers;
  cfg.heads = kSmallHeads;
  cfg.seq_len = 8;
  cfg.batch = batch;
  cfg.dtype = dtype;
  return cfg;
}

// "gpt" or "llama".
inline ir::Program BuildSmallModel(const std::string& model, ir::DataType dtype, int64_t layers = 2, int64_t batch = 4) {
  if (model == "llama") return *ir::models::BuildLlama(SmallConfig<ir::models::LlamaConfig>(dtype, layers, batch));
  return *ir::models::BuildGpt(SmallConfig<ir::models::GptConfig>(dtype, layers, batch));
}

// AdamW with weight decay: every parameter moves, so a wrong gradient anywhere shows.
inline EngineOptions EquivalenceOptions() {
  EngineOptions o;
  o.lr.base = 1e-3;
  o.optimizer.weight_decay = 0.01;
  o.seed = 7;
  return o;
}

// Tokens and labels of shape [batch, seq] from a fixed LCG: the same batches on every run.
inline exec::Feeds RandomTokenBatch(const ir::Program& model, int64_t step, int64_t vocab) {
  exec::Feeds feeds;
  uint64_t state = 0x9E3779B97F4A7C15ull * static_cast<uint64_t>(step + 1);
  for (const char* name : {"tokens", "labels"}) {
    const ir::Value* arg = model.FindArgument(name);
    exec::Tensor t = exec::Tensor::Empty(arg->type());
    for (int64_t i = 0; i < t.num_elements(); ++i) {
      state = state * 6364136223846793005ull + 1442695040888963407ull;
      const auto id = static_cast<int64_t>((state >> 33) % static_cast<uint64_t>(vocab));
      if (t.dtype() == ir::DataType::kInt64) t.data<int64_t>()[i] = id;
      else t.data<int32_t>()[i] = static_cast<int32_t>(id);
    }
    feeds[name] = t;
  }
  return feeds;
}

struct RunOutcome {
  std::vector<double> losses;
  exec::Workspace state;  // whole tensors
  // After the last step: the loss on the next batch, parameters unchanged (Engine::EvalStep),
  // and the model's outputs on it (Engine::Predict), when it has any.
  std::optional<double> eval_loss;
  std::map<std::string, exec::Tensor> predicted;
};

// Trains `model` for `steps` steps on `batch(step)`; the losses and the whole final state.
// `world_size`, when given, receives the engine's.
inline RunOutcome TrainOn(ir::Program model, EngineOptions options, int64_t steps,
                          const std::function<exec::Feeds(int64_t step)>& batch, int64_t* world_size = nullptr) {
  RunOutcome out;
  auto engine = Engine::Create(std::move(model), options);
  EXPECT_TRUE(engine.ok()) << engine.status();
  if (!engine.ok()) return out;
  if (world_size != nullptr) *world_size = (*engine)->world_size();
  for (int64_t s = 0; s < steps; ++s) {
    auto r = (*engine)->TrainStep(batch(s));
    EXPECT_TRUE(r.ok()) << r.status();
    if (!r.ok()) return out;
    out.losses.push_back(r->loss);
  }
  auto state = (*engine)->WholeState();
  EXPECT_TRUE(state.ok()) << state.status();
  if (state.ok()) out.state = std::move(*state);
  auto eval = (*engine)->EvalStep(batch(steps));
  EXPECT_TRUE(eval.ok()) << eval.status();
  if (eval.ok()) out.eval_loss = *eval;
  if (!(*engine)->forward_program().outputs().empty()) {
    auto predicted = (*engine)->Predict(batch(steps));
    EXPECT_TRUE(predicted.ok()) << predicted.status();
    if (predicted.ok()) out.predicted = std::move(*predicted);
  }
  return out;
}

// On RandomTokenBatch batches.
inline RunOutcome TrainSteps(ir::Program model, EngineOptions options, int64_t steps, int64_t vocab) {
  const ir::Program reference = model.Clone();
  return TrainOn(std::move(model), options, steps, [&](int64_t s) { return RandomTokenBatch(reference, s, vocab); });
}

// On sine batches of the one f64 data input "tokens".
inline RunOutcome TrainOnSineBatches(ir::Program model, EngineOptions options, int64_t steps,
                                     int64_t* world_size = nullptr) {
  const ir::TensorType type = model.FindArgument("tokens")->type();
  auto sine = [&](int64_t s) {
    std::vector<double> values;
    for (int64_t i = 0; i < type.num_elements(); ++i) values.push_back(std::sin(0.37 * static_cast<double>(i + 17 * s)));
    return exec::Feeds{{"tokens", exec::TensorFromDoubles(type, values)}};
  };
  return TrainOn(std::move(model), options, steps, sine, world_size);
}

// Every tensor of `want` is in `got` with the same type and the same bits; how many were compared.
inline int64_t ExpectSameState(const exec::Workspace& got, const exec::Workspace& want) {
  int64_t compared = 0;
  for (const auto& [name, tensor] : want) {
    auto it = got.find(name);
    if (it == got.end()) {
      ADD_FAILURE() << name << " is missing";
      continue;
    }
    EXPECT_EQ(it->second.type(), tensor.type()) << name;
    if (it->second.type() == tensor.type()) {
      EXPECT_EQ(exec::TensorToDoubles(it->second), exec::TensorToDoubles(tensor)) << name;
    }
    ++compared;
  }
  return compared;
}

// ‖a − b‖ / ‖b‖.
inline double RelativeNormDistance(const exec::Tensor& a, const exec::Tensor& b) {
  double diff = 0, norm = 0;
  for (int64_t i = 0; i < b.num_elements(); ++i) {
    const double d = a.At(i) - b.At(i);
    diff += d * d;
    norm += b.At(i) * b.At(i);
  }
  return norm == 0 ? std::sqrt(diff) : std::sqrt(diff / norm);
}

// Elements left out of a parameter comparison, by parameter name.
using ElementMask = std::map<std::string, std::vector<bool>>;

// Zeroes the masked elements of a copy of `t`.
inline exec::Tensor Masked(const exec::Tensor& t, const std::vector<bool>* mask) {
  if (mask == nullptr) return t;
  exec::Tensor out = t.Clone();
  std::vector<double> values = exec::TensorToDoubles(out);
  for (size_t i = 0; i < values.size() && i < mask->size(); ++i) {
    if ((*mask)[i]) values[i] = 0;
  }
  return exec::TensorFromDoubles(out.type(), values);
}

// The key bias of attention has no gradient in exact arithmetic: q·(k + b) shifts every score
// of a query by the same q·b, which softmax ignores. Its float32 gradient is rounding noise
// (|g| ~ 1e-9), which AdamW's g/√v turns into steps whose direction depends on the summation
// order: measured on gpt dp2 f32, the key-bias slices differ by 4e-6 with norm 1e-5, while the
// query and value slices of the same tensor differ by 3e-9 with norm 1e-2. Any change of
// summation order moves them so, parallel or not; the float32 GPT comparisons therefore leave
// the key-bias slices out, and the float64 runs, where the noise stays below AdamW's epsilon,
// compare every element at 1e-10. (qkv columns are grouped by head: [q k v] per head, ir/models/decoder.h.)
inline ElementMask KeyBiasElements(const ir::Program& model, int64_t heads) {
  ElementMask mask;
  for (const ir::Value* p : model.Parameters()) {
    if (p->name().find("attn.qkv.bias") == std::string::npos) continue;
    const int64_t width = p->type().shape[0], head_dim = width / (3 * heads);
    std::vector<bool> keys(static_cast<size_t>(width), false);
    for (int64_t h = 0; h < heads; ++h) {
      for (int64_t i = 0; i < head_dim; ++i) keys[static_cast<size_t>(h * 3 * head_dim + head_dim + i)] = true;
    }
    mask[p->name()] = keys;
  }
  return mask;
}

// Every loss within `tol` relative, every parameter within `tol` in relative norm (without the
// elements of `excluded`).
inline void ExpectSameTraining(const RunOutcome& got, const RunOutcome& want, const ir::Program& model, double tol,
                               const ElementMask& excluded = {}) {
  ASSERT_EQ(got.losses.size(), want.losses.size());
  for (size_t s = 0; s < want.losses.size(); ++s) {
    EXPECT_NEAR(got.losses[s], want.losses[s], tol * std::abs(want.losses[s])) << "loss of step " << s;
  }
  ASSERT_EQ(got.eval_loss.has_value(), want.eval_loss.has_value());
  if (want.eval_loss) {
    EXPECT_NEAR(*got.eval_loss, *want.eval_loss, tol * std::abs(*want.eval_loss)) << "evaluation loss";
  }
  ASSERT_EQ(got.predicted.size(), want.predicted.size());
  for (const auto& [name, tensor] : want.predicted) {
    auto g = got.predicted.find(name);
    ASSERT_NE(g, got.predicted.end()) << "output " << name;
    ASSERT_EQ(g->second.type(), tensor.type()) << "output " << name;
    EXPECT_LE(RelativeNormDistance(g->second, tensor), tol) << "output " << name;
  }
  int64_t compared = 0;
  for (const ir::Value* p : model.Parameters()) {
    auto g = got.state.find(p->name());
    auto w = want.state.find(p->name());
    ASSERT_NE(g, got.state.end()) << p->name();
    ASSERT_NE(w, want.state.end()) << p->name();
    ASSERT_EQ(g->second.type(), w->second.type()) << p->name();
    auto mask = excluded.find(p->name());
    const std::vector<bool>* m = mask == excluded.end() ? nullptr : &mask->second;
    EXPECT_LE(RelativeNormDistance(Masked(g->second, m), Masked(w->second, m)), tol) << "parameter " << p->name();
    ++compared;
  }
  EXPECT_GT(compared, 0);
}

// `got` trained exactly as `want` did: `steps` losses and every state tensor equal bit for bit
// (a rewrite that must not change a number: fused kernels, merged updates).
inline void ExpectBitForBit(const RunOutcome& got, const RunOutcome& want, int64_t steps) {
  ASSERT_EQ(want.losses.size(), static_cast<size_t>(steps));
  EXPECT_EQ(got.losses, want.losses);
  EXPECT_EQ(ExpectSameState(got.state, want.state), static_cast<int64_t>(want.state.size()));
  EXPECT_EQ(got.state.size(), want.state.size());
}

// Rank `rank`'s local training program of `model` under `strategy_json` (a JSON object), made as
// the engine makes it (passes::RankPipeline with `bucket_bytes` and `fusions`).
inline absl::StatusOr<ir::Program> LocalTrainProgram(const ir::Program& model, const std::string& strategy_json,
                                                     int64_t rank, std::optional<int64_t> bucket_bytes,
                                                     const passes::KernelFusions& fusions) {
  PDIST_ASSIGN_OR_RETURN(strategy::Strategy strategy, strategy::ParseStrategy(strategy_json));
  PDIST_ASSIGN_OR_RETURN(passes::DistributedPrograms programs, passes::BuildDistributedPrograms(model, strategy, {}));
  passes::ReshardPlanCache plans;
  return passes::LocalProgram(programs.train, passes::RankPipeline(rank, bucket_bytes, fusions), plans);
}

}  // namespace pdist::engine::testing

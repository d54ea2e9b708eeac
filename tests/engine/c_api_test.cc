// The C API: codes and messages for bad input, and a full create → fit → evaluate → save → load.
#include "engine/c_api.h"

#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "engine/engine.h"
#include "engine/timeline_files.h"
#include "ir/models/gpt.h"
#include "ir/serialize.h"
#include "tests/testing/temp_path.h"

namespace {

std::string WriteTinyModel() {
  pdist::ir::models::GptConfig c;
  c.vocab = 256;
  c.hidden = 32;
  c.layers = 1;
  c.heads = 2;
  c.seq_len = 16;
  c.batch = 2;
  auto program = pdist::ir::models::BuildGpt(c);
  EXPECT_TRUE(program.ok()) << program.status();
  const std::string path = pdist::testing::UniqueTempPath("model.pb");
  EXPECT_TRUE(pdist::ir::SaveProgram(*program, path).ok());
  return path;
}

std::string WriteText(const std::string& name, const std::string& text) {
  const std::string path = pdist::testing::UniqueTempPath(name);
  std::ofstream(path) << text;
  return path;
}

int Record(int64_t step, double loss, double seconds, void* user) {
  static_cast<std::vector<double>*>(user)->push_back(loss);
  return 0;
}

// Fit resumes at global step 4: stop after steps 4 and 5.
int StopAfterTwo(int64_t step, double loss, double seconds, void* user) { return step >= 5 ? 1 : 0; }

TEST(CApiTest, MissingModelIsNotFoundWithThePath) {
  pdist_engine* engine = reinterpret_cast<pdist_engine*>(0x1);
  EXPECT_EQ(pdist_engine_create_from_file("/nonexistent/model.pb", nullptr, &engine), PDIST_NOT_FOUND);
  EXPECT_EQ(engine, nullptr);
  EXPECT_NE(std::string(pdist_last_error()).find("/nonexistent/model.pb"), std::string::npos) << pdist_last_error();
}

TEST(CApiTest, GarbageBytesAreInvalidArgument) {
  const char garbage[] = "this is not a model";
  pdist_engine* engine = nullptr;
  EXPECT_EQ(pdist_engine_create_from_bytes(garbage, sizeof(garbage), nullptr, &engine), PDIST_INVALID_ARGUMENT);
  EXPECT_EQ(engine, nullptr);
  EXPECT_STRNE(pdist_last_error(), "");
}

// From memory as from a file: the program's text too, with or without the C string's NUL (the
// docs said "the same from memory"; text was refused as "not a pdist model.pb").
TEST(CApiTest, BytesMayHoldTheProgramsText) {
  const std::string model = WriteTinyModel();
  pdist_program* program = nullptr;
  ASSERT_EQ(pdist_program_load(model.c_str(), &program), PDIST_OK) << pdist_last_error();
  const std::string text = pdist_program_print(program);
  pdist_program_destroy(program);
  for (size_t size : {text.size(), text.size() + 1}) {
    pdist_engine* engine = nullptr;
    EXPECT_EQ(pdist_engine_create_from_bytes(text.c_str(), size, nullptr, &engine), PDIST_OK) << pdist_last_error();
    EXPECT_NE(engine, nullptr);
    pdist_engine_destroy(engine);
  }
}

TEST(CApiTest, BadConfigNamesTheField) {
  const std::string model = WriteTinyModel();
  pdist_engine_config cfg;
  pdist_engine_config_init(&cfg);
  cfg.optimizer = "adagrad";
  pdist_engine* engine = nullptr;
  EXPECT_EQ(pdist_engine_create_from_file(model.c_str(), &cfg, &engine), PDIST_INVALID_ARGUMENT);
  EXPECT_NE(std::string(pdist_last_error()).find("adagrad"), std::string::npos);
  pdist_engine_config_init(&cfg);
  cfg.learning_rate = -1;
  EXPECT_EQ(pdist_engine_create_from_file(model.c_str(), &cfg, &engine), PDIST_INVALID_ARGUMENT);
  EXPECT_NE(std::string(pdist_last_error()).find("learning_rate"), std::string::npos);
  pdist_engine_config_init(&cfg);
  cfg.fusions = "optimizer,flash";
  EXPECT_EQ(pdist_engine_create_from_file(model.c_str(), &cfg, &engine), PDIST_INVALID_ARGUMENT);
  EXPECT_NE(std::string(pdist_last_error()).find("fusions: unknown fusion 'flash'"), std::string::npos)
      << pdist_last_error();
  pdist_engine_config_init(&cfg);
  cfg.device = "gpu0";
  EXPECT_EQ(pdist_engine_create_from_file(model.c_str(), &cfg, &engine), PDIST_INVALID_ARGUMENT);
  EXPECT_NE(std::string(pdist_last_error()).find("unknown device 'gpu0'"), std::string::npos);
  // A GPU where there is none (or no CUDA backend in this build): refused, naming the device.
  cfg.device = "cuda:0";
  EXPECT_NE(pdist_engine_create_from_file(model.c_str(), &cfg, &engine), PDIST_OK);
  EXPECT_NE(std::string(pdist_last_error()).find("cuda:0"), std::string::npos) << pdist_last_error();
  EXPECT_EQ(engine, nullptr);
  // The deadlines default to the engine's and reach it.
  pdist_engine_config_init(&cfg);
  EXPECT_EQ(cfg.collective_timeout_s, pdist::engine::EngineOptions{}.collective_timeout_s);
  EXPECT_EQ(cfg.checkpoint_timeout_s, pdist::engine::EngineOptions{}.checkpoint_timeout_s);
  cfg.collective_timeout_s = 0;
  EXPECT_EQ(pdist_engine_create_from_file(model.c_str(), &cfg, &engine), PDIST_INVALID_ARGUMENT);
  EXPECT_NE(std::string(pdist_last_error()).find("collective timeout 0 s must be > 0"), std::string::npos)
      << pdist_last_error();
}

TEST(CApiTest, ATimelineDirectoryGetsEachStepsTrace) {
  const std::string model = WriteTinyModel();
  std::string text;
  for (int i = 0; i < 200; ++i) text += "the quick brown fox jumps over the lazy dog. ";
  const std::string data_path = WriteText("c_api_timeline.txt", text);
  const std::string dir = pdist::testing::UniqueTempPath("c_api_timeline");
  pdist_engine_config cfg;
  pdist_engine_config_init(&cfg);
  EXPECT_EQ(cfg.timeline_dir, nullptr);
  cfg.timeline_dir = dir.c_str();
  pdist_engine* engine = nullptr;
  ASSERT_EQ(pdist_engine_create_from_file(model.c_str(), &cfg, &engine), PDIST_OK) << pdist_last_error();
  pdist_dataset data = {data_path.c_str(), PDIST_DATA_TEXT_BYTES, 1};
  ASSERT_EQ(pdist_engine_fit(engine, &data, 2, nullptr, nullptr), PDIST_OK) << pdist_last_error();
  pdist_engine_destroy(engine);
  absl::StatusOr<pdist::exec::TimelineRows> rows = pdist::engine::ReadChromeTraces(dir);
  ASSERT_TRUE(rows.ok()) << rows.status();
  ASSERT_EQ(rows->size(), 1u);
  std::set<std::string> jobs;
  for (const pdist::exec::TimelineSpan& span : rows->front().second) {
    if (span.category != pdist::exec::kWaitCategory) jobs.insert(span.name);
    EXPECT_LE(span.start_s, span.end_s) << span.name;
  }
  EXPECT_EQ(jobs, (std::set<std::string>{"B", "F", "O"}));
  // A file where the directory belongs is refused when the engine is made, not after a step.
  cfg.timeline_dir = data_path.c_str();
  EXPECT_EQ(pdist_engine_create_from_file(model.c_str(), &cfg, &engine), PDIST_INVALID_ARGUMENT);
  EXPECT_NE(std::string(pdist_last_error()).find("is a file, not a directory"), std::string::npos)
      << pdist_last_error();
}

TEST(CApiTest, FitEvaluateSaveLoad) {
  const std::string model = WriteTinyModel();
  std::string text;
  for (int i = 0; i < 200; ++i) text += "the quick brown fox jumps over the lazy dog. ";
  const std::string data_path = WriteText("c_api_test.txt", text);
  pdist_engine* engine = nullptr;
  ASSERT_EQ(pdist_engine_create_from_file(model.c_str(), nullptr, &engine), PDIST_OK) << pdist_last_error();
  pdist_dataset data = {data_path.c_str(), PDIST_DATA_TEXT_BYTES, 1};
  std::vector<double> losses;
  ASSERT_EQ(pdist_engine_fit(engine, &data, 4, Record, &losses), PDIST_OK) << pdist_last_error();
  ASSERT_EQ(losses.size(), 4u);
  EXPECT_EQ(pdist_engine_step(engine), 4);

  // The callback stops fit early.
  ASSERT_EQ(pdist_engine_fit(engine, &data, 10, StopAfterTwo, nullptr), PDIST_OK);
  EXPECT_EQ(pdist_engine_step(engine), 6);

  double eval = 0;
  ASSERT_EQ(pdist_engine_evaluate(engine, &data, 2, &eval), PDIST_OK) << pdist_last_error();
  EXPECT_GT(eval, 0.0);
  // A callback after each batch, with the batch's loss: stopping after the second of five
  // leaves the mean over those two, which is evaluate's over two.
  std::vector<double> batch_losses;
  double stopped = 0;
  auto stop_at_two = [](int64_t batch, double loss, double, void* user) {
    static_cast<std::vector<double>*>(user)->push_back(loss);
    return batch == 2 ? 1 : 0;
  };
  ASSERT_EQ(pdist_engine_evaluate_with_callback(engine, &data, 5, stop_at_two, &batch_losses, &stopped), PDIST_OK)
      << pdist_last_error();
  ASSERT_EQ(batch_losses.size(), 2u);
  EXPECT_EQ(stopped, eval);
  EXPECT_EQ((batch_losses[0] + batch_losses[1]) / 2, eval);
  // Ranks that are threads of this process share one callback: any_rank is the value itself.
  int any = -1;
  ASSERT_EQ(pdist_engine_any_rank(engine, 0, &any), PDIST_OK);
  EXPECT_EQ(any, 0);
  ASSERT_EQ(pdist_engine_any_rank(engine, 7, &any), PDIST_OK);
  EXPECT_EQ(any, 1);
  EXPECT_EQ(pdist_engine_any_rank(engine, 1, nullptr), PDIST_INVALID_ARGUMENT);

  const std::string ckpt = pdist::testing::UniqueTempPath("ckpt");
  ASSERT_EQ(pdist_engine_save(engine, ckpt.c_str()), PDIST_OK) << pdist_last_error();
  pdist_engine* restored = nullptr;
  ASSERT_EQ(pdist_engine_create_from_file(model.c_str(), nullptr, &restored), PDIST_OK);
  ASSERT_EQ(pdist_engine_load(restored, ckpt.c_str()), PDIST_OK) << pdist_last_error();
  EXPECT_EQ(pdist_engine_step(restored), 6);
  double eval_restored = 0;
  ASSERT_EQ(pdist_engine_evaluate(restored, &data, 2, &eval_restored), PDIST_OK);
  EXPECT_EQ(eval_restored, eval);

  EXPECT_EQ(pdist_engine_load(restored, "/nonexistent.ckpt"), PDIST_NOT_FOUND);
  pdist_engine_destroy(engine);
  pdist_engine_destroy(restored);
  std::remove(ckpt.c_str());
}

// Batches from host memory: a step on them, and every malformed feed named before anything is
// allocated or read (an absurd shape is a mismatch with the model, not an allocation).
// numpy has no bfloat16: f32 batches feed a model whose data input is bf16, rounded by the library.
TEST(CApiTest, FloatBatchesFeedABf16Input) {
  const std::string path = pdist::testing::UniqueTempPath("bf16.pdir");
  std::ofstream(path) << "program {\n"
                         "  %x = data \"x\" : bf16[2,4]\n"
                         "  %w = param \"w\" : bf16[4,3] {init = \"normal(0.5)\"}\n"
                         "  %y = matmul(%x, %w) : bf16[2,3]\n"
                         "  %f = cast(%y) {dtype = f32} : f32[2,3]\n"
                         "  %l = mean(%f) : f32[]\n"
                         "  loss %l\n"
                         "}\n";
  pdist_engine* engine = nullptr;
  ASSERT_EQ(pdist_engine_create_from_file(path.c_str(), nullptr, &engine), PDIST_OK) << pdist_last_error();
  const std::vector<float> x = {1, 2, 3, 4, 5, 6, 7, 8};
  const int64_t shape[2] = {2, 4};
  const pdist_feed feed = {"x", "f32", 2, shape, x.data()};
  double loss = 0;
  ASSERT_EQ(pdist_engine_eval_step(engine, &feed, 1, &loss), PDIST_OK) << pdist_last_error();
  // The same numbers fed as bf16 bits (1..8 are exact in bf16: a float's upper half) give the same loss.
  std::vector<uint16_t> bits;
  for (float v : x) {
    uint32_t u = 0;
    std::memcpy(&u, &v, sizeof(u));
    bits.push_back(static_cast<uint16_t>(u >> 16));
  }
  const pdist_feed as_bf16 = {"x", "bf16", 2, shape, bits.data()};
  double bf16_loss = 0;
  ASSERT_EQ(pdist_engine_eval_step(engine, &as_bf16, 1, &bf16_loss), PDIST_OK) << pdist_last_error();
  EXPECT_EQ(loss, bf16_loss);
  EXPECT_NE(loss, 0.0);
  const std::vector<double> x64(8, 1.0);
  const pdist_feed wrong = {"x", "f64", 2, shape, x64.data()};
  EXPECT_EQ(pdist_engine_eval_step(engine, &wrong, 1, &loss), PDIST_INVALID_ARGUMENT);
  EXPECT_NE(std::string(pdist_last_error()).find("f64[2,4], but the model's data input is bf16[2,4]"), std::string::npos)
      << pdist_last_error();
  pdist_engine_destroy(engine);
}

// A bf16 output comes widened to f32 (numpy has no bf16), whole, in the model's order; its mean
// is the model's loss. A model without outputs says so.
TEST(CApiTest, PredictGivesTheOutputsAndRefusesAModelWithoutThem) {
  const std::string body = "program {\n"
                           "  %x = data \"x\" : f32[2,4]\n"
                           "  %w = param \"w\" : bf16[4,3] {init = \"normal(0.5)\"}\n"
                           "  %xb = cast(%x) {dtype = bf16} : bf16[2,4]\n"
                           "  %y = matmul(%xb, %w) : bf16[2,3]\n"
                           "  %f = cast(%y) {dtype = f32} : f32[2,3]\n"
                           "  %l = mean(%f) : f32[]\n"
                           "  loss %l\n";
  const std::string with = WriteText("outputs.pdir", body + "  output \"y\" %y\n  output \"mean\" %l\n}\n");
  pdist_engine* engine = nullptr;
  ASSERT_EQ(pdist_engine_create_from_file(with.c_str(), nullptr, &engine), PDIST_OK) << pdist_last_error();
  const std::vector<float> x = {1, 2, 3, 4, 5, 6, 7, 8};
  const int64_t shape[2] = {2, 4};
  const pdist_feed feed = {"x", "f32", 2, shape, x.data()};
  const pdist_output* outputs = nullptr;
  int count = 0;
  ASSERT_EQ(pdist_engine_predict(engine, &feed, 1, &outputs, &count), PDIST_OK) << pdist_last_error();
  ASSERT_EQ(count, 2);
  EXPECT_STREQ(outputs[0].name, "y");
  EXPECT_STREQ(outputs[0].dtype, "f32");
  ASSERT_EQ(outputs[0].ndim, 2);
  EXPECT_EQ(outputs[0].shape[0], 2);
  EXPECT_EQ(outputs[0].shape[1], 3);
  EXPECT_STREQ(outputs[1].name, "mean");
  EXPECT_EQ(outputs[1].ndim, 0);
  const auto* y = static_cast<const float*>(outputs[0].data);
  double sum = 0;
  for (int i = 0; i < 6; ++i) sum += y[i];
  double loss = 0;
  ASSERT_EQ(pdist_engine_eval_step(engine, &feed, 1, &loss), PDIST_OK) << pdist_last_error();
  EXPECT_NEAR(sum / 6, loss, 1e-6 * std::abs(loss));
  EXPECT_EQ(*static_cast<const float*>(outputs[1].data), static_cast<float>(loss));
  EXPECT_EQ(pdist_engine_predict(engine, &feed, 1, nullptr, &count), PDIST_INVALID_ARGUMENT);
  pdist_engine_destroy(engine);

  const std::string without = WriteText("no_outputs.pdir", body + "}\n");
  ASSERT_EQ(pdist_engine_create_from_file(without.c_str(), nullptr, &engine), PDIST_OK) << pdist_last_error();
  EXPECT_EQ(pdist_engine_predict(engine, &feed, 1, &outputs, &count), PDIST_FAILED_PRECONDITION);
  EXPECT_NE(std::string(pdist_last_error()).find("no outputs"), std::string::npos) << pdist_last_error();
  pdist_engine_destroy(engine);
}

// A batch of the tiny model ([2, 16] tokens, labels one ahead) with the feeds that point into it.
struct TinyBatch {
  static std::vector<int64_t> Pattern(int64_t shift) {
    std::vector<int64_t> v(2 * 16);
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<int64_t>((i + shift) % 7);
    return v;
  }
  TinyBatch() = default;
  TinyBatch(const TinyBatch&) = delete;  // the feeds point into this one
  std::vector<int64_t> tokens = Pattern(0), labels = Pattern(1);
  int64_t shape[2] = {2, 16};
  pdist_feed feeds[2] = {{"tokens", "i64", 2, shape, tokens.data()}, {"labels", "i64", 2, shape, labels.data()}};
};

TEST(CApiTest, HostBatchesTrainAndBadFeedsAreNamed) {
  const std::string model = WriteTinyModel();
  pdist_engine* engine = nullptr;
  ASSERT_EQ(pdist_engine_create_from_file(model.c_str(), nullptr, &engine), PDIST_OK) << pdist_last_error();
  TinyBatch batch;
  const pdist_feed* feeds = batch.feeds;
  const int64_t* shape = batch.shape;
  std::vector<int64_t>& tokens = batch.tokens;
  double before = 0, loss = 0, after = 0;
  ASSERT_EQ(pdist_engine_eval_step(engine, feeds, 2, &before), PDIST_OK) << pdist_last_error();
  ASSERT_EQ(pdist_engine_train_step(engine, feeds, 2, &loss), PDIST_OK) << pdist_last_error();
  EXPECT_DOUBLE_EQ(loss, before);  // the step's loss is the loss before its update
  ASSERT_EQ(pdist_engine_eval_step(engine, feeds, 2, &after), PDIST_OK);
  EXPECT_LT(after, before);
  EXPECT_EQ(pdist_engine_step(engine), 1);

  const int64_t huge[2] = {int64_t{1} << 40, int64_t{1} << 40};
  const int64_t wide[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
  struct Bad {
    pdist_feed feed;
    const char* message;
  };
  const std::vector<Bad> bad = {
      {{"tokens", "i64", 2, huge, tokens.data()}, "i64[1099511627776,1099511627776], but the model's data input is i64[2,16]"},
      {{"tokens", "f99", 2, shape, tokens.data()}, "dtype 'f99' is not a dtype"},
      {{"tokens", "i64", 9, wide, tokens.data()}, "ndim 9 must be in [0, 8]"},
      {{"tokens", "i64", 2, nullptr, tokens.data()}, "ndim 2 must be in [0, 8] with a shape"},
      {{"tokens", "i64", 2, shape, nullptr}, "'tokens'): data is NULL"},
      {{"wte", "f32", 2, shape, tokens.data()}, "'wte' is not a data input of the model (data inputs: 'tokens', 'labels')"},
      {{nullptr, "i64", 2, shape, tokens.data()}, "name or dtype is NULL"},
  };
  for (const Bad& b : bad) {
    const pdist_feed two[2] = {b.feed, feeds[1]};
    EXPECT_EQ(pdist_engine_train_step(engine, two, 2, &loss), PDIST_INVALID_ARGUMENT) << b.message;
    EXPECT_NE(std::string(pdist_last_error()).find(b.message), std::string::npos) << pdist_last_error();
  }
  const pdist_feed twice[2] = {feeds[0], feeds[0]};
  EXPECT_EQ(pdist_engine_train_step(engine, twice, 2, &loss), PDIST_INVALID_ARGUMENT);
  EXPECT_NE(std::string(pdist_last_error()).find("'tokens' is fed twice"), std::string::npos) << pdist_last_error();
  EXPECT_EQ(pdist_engine_train_step(engine, feeds, 1, &loss), PDIST_INVALID_ARGUMENT);
  EXPECT_NE(std::string(pdist_last_error()).find("no feed for data input 'labels'"), std::string::npos)
      << pdist_last_error();
  EXPECT_EQ(pdist_engine_train_step(engine, nullptr, 2, &loss), PDIST_INVALID_ARGUMENT);
  EXPECT_EQ(pdist_engine_train_step(nullptr, feeds, 2, &loss), PDIST_INVALID_ARGUMENT);
  EXPECT_EQ(pdist_engine_step(engine), 1);  // no bad call stepped
  pdist_engine_destroy(engine);
}

// Threads sharing an engine take turns (two training threads crashed it: a user probe); a step
// callback may call back into its engine on fit's thread.
int ReadStepInside(int64_t step, double, double, void* engine) {  // `step`: the one just taken, from 0
  return pdist_engine_step(static_cast<pdist_engine*>(engine)) == step + 1 ? 0 : 1;
}

TEST(CApiTest, ThreadsSharingAnEngineTakeTurns) {
  const std::string model = WriteTinyModel();
  pdist_engine* engine = nullptr;
  ASSERT_EQ(pdist_engine_create_from_file(model.c_str(), nullptr, &engine), PDIST_OK) << pdist_last_error();
  TinyBatch batch;
  const pdist_feed* feeds = batch.feeds;
  constexpr int kSteps = 40;
  std::atomic<int> failed{0};
  auto train = [&] {
    for (int i = 0; i < kSteps; ++i) {
      double loss = 0;
      if (pdist_engine_train_step(engine, feeds, 2, &loss) != PDIST_OK || !std::isfinite(loss)) ++failed;
    }
  };
  auto predict = [&] {
    for (int i = 0; i < kSteps; ++i) {
      const pdist_output* outputs = nullptr;
      int n = 0;
      if (pdist_engine_predict(engine, feeds, 1, &outputs, &n) != PDIST_OK || n < 1) ++failed;
    }
  };
  std::thread a(train), b(train), c(predict);
  a.join();
  b.join();
  c.join();
  EXPECT_EQ(failed.load(), 0);
  EXPECT_EQ(pdist_engine_step(engine), 2 * kSteps);

  const std::string data_path = WriteText("c_api_threads.txt", std::string(4096, 'a'));
  pdist_dataset ds = {data_path.c_str(), PDIST_DATA_TEXT_BYTES, 0};
  EXPECT_EQ(pdist_engine_fit(engine, &ds, 2, ReadStepInside, engine), PDIST_OK) << pdist_last_error();
  EXPECT_EQ(pdist_engine_step(engine), 2 * kSteps + 2);
  pdist_engine_destroy(engine);
}

TEST(CApiTest, DatasetShorterThanOneBatchIsAnError) {
  const std::string model = WriteTinyModel();
  const std::string data_path = WriteText("c_api_short.txt", "too short");
  pdist_engine* engine = nullptr;
  ASSERT_EQ(pdist_engine_create_from_file(model.c_str(), nullptr, &engine), PDIST_OK);
  pdist_dataset data = {data_path.c_str(), PDIST_DATA_TEXT_BYTES, 1};
  EXPECT_EQ(pdist_engine_fit(engine, &data, 1, nullptr, nullptr), PDIST_INVALID_ARGUMENT);
  EXPECT_NE(std::string(pdist_last_error()).find("c_api_short.txt"), std::string::npos) << pdist_last_error();
  pdist_engine_destroy(engine);
}

}  // namespace

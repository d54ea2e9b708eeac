// The C API's program handle: load, shard_tensor, print, save → load round trip, and errors.
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "engine/c_api.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/temp_path.h"

namespace {

using ::testing::HasSubstr;

constexpr char kProgram[] =
    "program {\n"
    "  %x = data \"x\" : f32[8,64]\n"
    "  %w = param \"w\" : f32[64,32] {init = \"normal(0.02)\"}\n"
    "  %y = matmul(%x, %w) : f32[8,32]\n"
    "  %l = sum(%y) : f32[]\n"
    "  loss %l\n"
    "}\n";

std::string TempPath(const std::string& name) {
  return pdist::testing::UniqueTempPath(name);
}

// A loaded program, destroyed at scope exit.
class ProgramTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string path = TempPath("c_api_program.pdir");
    std::ofstream(path) << kProgram;
    ASSERT_EQ(pdist_program_load(path.c_str(), &prog_), PDIST_OK) << pdist_last_error();
  }
  void TearDown() override { pdist_program_destroy(prog_); }

  pdist_program* prog_ = nullptr;
};

TEST_F(ProgramTest, ShardTensorShowsInPrintAndSurvivesSaveLoad) {
  const int64_t mesh[2] = {2, 2};
  const char* names[2] = {"dp", "mp"};
  ASSERT_EQ(pdist_program_shard_tensor(prog_, "w", mesh, 2, names, "Replicate(),Shard(1)"), PDIST_OK)
      << pdist_last_error();
  ASSERT_EQ(pdist_program_shard_tensor(prog_, "x", mesh, 2, nullptr, "S(0), R"), PDIST_OK) << pdist_last_error();
  // A result by its printed number.
  ASSERT_EQ(pdist_program_shard_tensor(prog_, "%2", mesh, 2, names, "Shard(0),Partial(sum)"), PDIST_OK)
      << pdist_last_error();
  const std::string text = pdist_program_print(prog_);
  EXPECT_THAT(text, HasSubstr("%0 = data \"x\" : f32[8,64] dist! {mesh: [2,2] [d0,d1], dims_mapping: [0,-1]}"));
  EXPECT_THAT(text, HasSubstr("\"w\" : f32[64,32] dist! {mesh: [2,2] [dp,mp], dims_mapping: [-1,1]} {init"));
  EXPECT_THAT(text, HasSubstr(": f32[8,32] dist! {mesh: [2,2] [dp,mp], dims_mapping: [0,-1], partial: {1: sum}}"));

  const std::string saved = TempPath("c_api_program.pb");
  ASSERT_EQ(pdist_program_save(prog_, saved.c_str()), PDIST_OK) << pdist_last_error();
  pdist_program* loaded = nullptr;
  ASSERT_EQ(pdist_program_load(saved.c_str(), &loaded), PDIST_OK) << pdist_last_error();
  EXPECT_EQ(std::string(pdist_program_print(loaded)), text);
  pdist_program_destroy(loaded);
}

TEST_F(ProgramTest, ErrorsNameTheTensorAndThePlacement) {
  const int64_t mesh[2] = {2, 2};
  EXPECT_EQ(pdist_program_shard_tensor(prog_, "v", mesh, 2, nullptr, "R,R"), PDIST_NOT_FOUND);
  EXPECT_THAT(pdist_last_error(), HasSubstr("tensor 'v' is neither a block argument"));
  EXPECT_EQ(pdist_program_shard_tensor(prog_, "%9", mesh, 2, nullptr, "R,R"), PDIST_NOT_FOUND);
  EXPECT_EQ(pdist_program_shard_tensor(prog_, "w", mesh, 2, nullptr, "R,Shard(2)"), PDIST_INVALID_ARGUMENT);
  EXPECT_THAT(pdist_last_error(), HasSubstr("shard_tensor('w' f32[64,32]"));
  EXPECT_THAT(pdist_last_error(), HasSubstr("Shard(2)"));
  EXPECT_EQ(pdist_program_shard_tensor(prog_, "w", mesh, 2, nullptr, "R,Shrd(1)"), PDIST_INVALID_ARGUMENT);
  EXPECT_THAT(pdist_last_error(), HasSubstr("shard_tensor('w'): placements \"R,Shrd(1)\": item 1: unknown placement 'Shrd(1)'"));
  EXPECT_EQ(pdist_program_shard_tensor(prog_, "w", mesh, 2, nullptr, "R"), PDIST_INVALID_ARGUMENT);
  EXPECT_THAT(pdist_last_error(), HasSubstr("give 1 entries for the 2-d mesh"));
  const int64_t bad_mesh[1] = {0};
  EXPECT_EQ(pdist_program_shard_tensor(prog_, "w", bad_mesh, 1, nullptr, "R"), PDIST_INVALID_ARGUMENT);
  EXPECT_THAT(pdist_last_error(), HasSubstr("every dim must be >= 1"));
  const char* dup[2] = {"a", "a"};
  EXPECT_EQ(pdist_program_shard_tensor(prog_, "w", mesh, 2, dup, "R,R"), PDIST_INVALID_ARGUMENT);
  EXPECT_THAT(pdist_last_error(), HasSubstr("dim name 'a' appears twice"));
  EXPECT_EQ(pdist_program_shard_tensor(prog_, "w", nullptr, 0, nullptr, ""), PDIST_INVALID_ARGUMENT);
  // Nothing was applied by the failed calls.
  EXPECT_THAT(std::string(pdist_program_print(prog_)), ::testing::Not(HasSubstr("dist")));
  EXPECT_STREQ(pdist_last_error(), "");
}

// The planner through the C API: pdist-plan's JSON with its report; bad options named.
TEST_F(ProgramTest, PlanAnswersWithTheReportAndNamesBadOptions) {
  const char* plan = nullptr;
  ASSERT_EQ(pdist_program_plan(prog_, R"({"cluster": "dgx-a100", "gpus": 2, "strategy": {"dp_degree": 2}})", &plan),
            PDIST_OK)
      << pdist_last_error();
  EXPECT_THAT(plan, HasSubstr("\"step_time_s\""));
  EXPECT_THAT(plan, HasSubstr("\"dp_degree\": 2"));
  EXPECT_THAT(plan, HasSubstr("plan: dp2 mp1 pp1"));  // the report
  const std::vector<std::pair<const char*, const char*>> bad = {
      {nullptr, "the number of devices is needed with the preset 'dgx-a100'"},
      {R"({"gpu": 2})", "unknown key \"gpu\""},
      {R"({"gpus": "2"})", "\"gpus\" must be an integer, got \"2\""},
      {R"({"gpus": 2, "memory_margin": 1.5})", "\"memory_margin\" must be a number in [0, 1)"},
      {R"({"cluster": "cpu-local", "gpus": 2})", "cpu-local is measured by"},
      {R"({"cluster": "dgx-z9", "gpus": 2})", "cluster 'dgx-z9' is neither a file nor a preset"},
      {R"({"gpus": 2, "strategy": {"dp_degre": 2}})", "dp_degre"},
      {"[1]", "must be a JSON object"},
      {"{", "plan options"},
  };
  for (const auto& [options, message] : bad) {
    EXPECT_NE(pdist_program_plan(prog_, options, &plan), PDIST_OK) << (options ? options : "NULL");
    EXPECT_THAT(pdist_last_error(), HasSubstr(message)) << (options ? options : "NULL");
  }
  EXPECT_EQ(pdist_program_plan(nullptr, "{}", &plan), PDIST_INVALID_ARGUMENT);
}

TEST(ProgramApiTest, NullArgumentsAndMissingFiles) {
  pdist_program* prog = reinterpret_cast<pdist_program*>(0x1);
  EXPECT_EQ(pdist_program_load("/nonexistent/m.pb", &prog), PDIST_NOT_FOUND);
  EXPECT_EQ(prog, nullptr);
  EXPECT_THAT(pdist_last_error(), HasSubstr("/nonexistent/m.pb"));
  EXPECT_EQ(pdist_program_load(nullptr, &prog), PDIST_INVALID_ARGUMENT);
  EXPECT_EQ(pdist_program_load("x", nullptr), PDIST_INVALID_ARGUMENT);
  EXPECT_EQ(pdist_program_shard_tensor(nullptr, "w", nullptr, 0, nullptr, "R"), PDIST_INVALID_ARGUMENT);
  EXPECT_EQ(pdist_program_save(nullptr, "x"), PDIST_INVALID_ARGUMENT);
  EXPECT_EQ(pdist_program_print(nullptr), nullptr);
  EXPECT_THAT(pdist_last_error(), HasSubstr("program is NULL"));
  pdist_program_destroy(nullptr);
}

}  // namespace

namespace {

TEST(ImportOnnxCApiTest, OptionsAreCheckedBeforeTheFileIsRead) {
  pdist_program* prog = nullptr;
  EXPECT_EQ(pdist_program_import_onnx("m.onnx", R"({"los": "mse"})", &prog), PDIST_INVALID_ARGUMENT);
  EXPECT_THAT(pdist_last_error(), HasSubstr("import options: unknown key \"los\" (keys: loss, logits, labels, frozen, input_shapes)"));
  EXPECT_EQ(pdist_program_import_onnx("m.onnx", R"({"frozen": "mask"})", &prog), PDIST_INVALID_ARGUMENT);
  EXPECT_THAT(pdist_last_error(), HasSubstr("\"frozen\" must be a list of names or globs, got \"mask\""));
  EXPECT_EQ(pdist_program_import_onnx("m.onnx", R"({"input_shapes": {"x": [8, -1]}})", &prog), PDIST_INVALID_ARGUMENT);
  EXPECT_THAT(pdist_last_error(), HasSubstr("\"input_shapes.x\" must be a list of dimensions >= 0"));
  EXPECT_EQ(pdist_program_import_onnx(TempPath("missing.onnx").c_str(), nullptr, &prog), PDIST_NOT_FOUND);
  EXPECT_THAT(pdist_last_error(), HasSubstr("does not exist"));
  EXPECT_EQ(prog, nullptr);
  EXPECT_EQ(pdist_program_import_onnx(nullptr, nullptr, &prog), PDIST_INVALID_ARGUMENT);
}

}  // namespace

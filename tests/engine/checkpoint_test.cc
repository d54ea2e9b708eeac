// Checkpoints say when they are damaged: a flipped byte, trailing garbage, a duplicated tensor,
// a truncated file and header fields out of range are errors that name the file and what is
// wrong; a save leaves no temporary file behind; version 1 files still load.
#include "engine/checkpoint.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "ir/builder.h"
#include "tests/testing/temp_path.h"

namespace pdist::engine {
namespace {

using ::testing::HasSubstr;

Checkpoint Sample() {
  Checkpoint c;
  c.step = 7;
  exec::Tensor w = exec::Tensor::Empty({{2, 3}, ir::DataType::kFloat32});
  for (int64_t i = 0; i < 6; ++i) w.data<float>()[i] = 0.5f * static_cast<float>(i);
  exec::Tensor m = exec::Tensor::Empty({{4}, ir::DataType::kFloat64});
  for (int64_t i = 0; i < 4; ++i) m.data<double>()[i] = -1.0 * static_cast<double>(i);
  c.tensors = {{"w", w}, {"w.moment1", m}};
  return c;
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void WriteAll(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

std::string LoadError(const std::string& path) {
  absl::StatusOr<Checkpoint> c = LoadCheckpoint(path);
  EXPECT_FALSE(c.ok());
  return c.ok() ? "" : std::string(c.status().message());
}

// A version-1 file (no checksums) with the given header fields and one tensor 'w' f32[2] per name.
std::string VersionOne(uint64_t step, const std::vector<std::string>& names) {
  std::string out = "PDISTCKP";
  auto put = [&out](auto v) { out.append(reinterpret_cast<const char*>(&v), sizeof(v)); };
  put(uint32_t{1});
  put(step);
  put(static_cast<uint64_t>(names.size()));
  for (const std::string& name : names) {
    put(static_cast<uint32_t>(name.size()));
    out += name;
    put(static_cast<uint8_t>(ir::DataType::kFloat32));
    put(uint32_t{1});
    put(int64_t{2});
    put(1.5f);
    put(2.5f);
  }
  return out;
}

TEST(CheckpointTest, RoundTripsAndLeavesNoTemporaryFile) {
  const std::string path = testing::UniqueTempPath("ok.ckpt");
  WriteAll(path + ".tmp", "left behind by a killed writer");
  ASSERT_TRUE(SaveCheckpoint(Sample(), path).ok());
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
  absl::StatusOr<Checkpoint> back = LoadCheckpoint(path);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->step, 7);
  ASSERT_EQ(back->tensors.size(), 2u);
  EXPECT_EQ(back->tensors.at("w").type().ToString(), "f32[2,3]");
  EXPECT_EQ(back->tensors.at("w").data<float>()[5], 2.5f);
  EXPECT_EQ(back->tensors.at("w.moment1").data<double>()[3], -3.0);
}

TEST(CheckpointTest, DamageIsNamed) {
  const std::string path = testing::UniqueTempPath("damaged.ckpt");
  ASSERT_TRUE(SaveCheckpoint(Sample(), path).ok());
  const std::string good = ReadAll(path);

  std::string flipped = good;
  flipped[good.size() - 12] ^= 0x10;  // a data byte of the last tensor ('w.moment1')
  WriteAll(path, flipped);
  EXPECT_THAT(LoadError(path), HasSubstr("is corrupted: the checksum of tensor 'w.moment1' does not match"));

  std::string header = good;
  header[12] ^= 0x01;  // the step counter
  WriteAll(path, header);
  EXPECT_THAT(LoadError(path), HasSubstr("the checksum of the header does not match"));

  WriteAll(path, good + "garbage");
  EXPECT_THAT(LoadError(path), HasSubstr("has 7 bytes after its last tensor"));

  WriteAll(path, good.substr(0, good.size() - 20));
  EXPECT_THAT(LoadError(path), HasSubstr("is truncated"));

  WriteAll(path, "not a checkpoint at all");
  EXPECT_THAT(LoadError(path), HasSubstr("is not a pdist checkpoint"));
}

TEST(CheckpointTest, HeaderFieldsAreCheckedBeforeUse) {
  const std::string path = testing::UniqueTempPath("v1.ckpt");
  WriteAll(path, VersionOne(3, {"w"}));
  absl::StatusOr<Checkpoint> v1 = LoadCheckpoint(path);  // version 1 still loads
  ASSERT_TRUE(v1.ok()) << v1.status();
  EXPECT_EQ(v1->step, 3);
  EXPECT_EQ(v1->tensors.at("w").data<float>()[1], 2.5f);

  WriteAll(path, VersionOne(uint64_t{1} << 60, {"w"}));
  EXPECT_THAT(LoadError(path), HasSubstr("has step 1152921504606846976, beyond the limit of 281474976710656"));
  WriteAll(path, VersionOne(uint64_t{9223372036854775807}, {"w"}));
  EXPECT_THAT(LoadError(path), HasSubstr("beyond the limit"));
  WriteAll(path, VersionOne(1, {"w", "w"}));
  EXPECT_THAT(LoadError(path), HasSubstr("holds tensor 'w' twice"));

  std::string many = VersionOne(1, {"w"});
  const uint64_t huge = uint64_t{1} << 40;
  many.replace(20, 8, reinterpret_cast<const char*>(&huge), 8);  // the tensor count
  WriteAll(path, many);
  EXPECT_THAT(LoadError(path), HasSubstr("claims 1099511627776 tensors in"));

  std::filesystem::create_directories(path + ".d");
  EXPECT_THAT(LoadError(path + ".d"), HasSubstr("is a directory without index.json"));
  EXPECT_THAT(std::string(SaveCheckpoint({.step = -1}, path).message()), HasSubstr("checkpoint step -1 is outside"));
}

// A tensor the model has no value for: where it is a state of one of the model's parameters
// (another optimizer's), the error says so rather than only naming the tensor.
TEST(CheckpointTest, AnotherOptimizersStateIsNamedAsSuch) {
  ir::Program p;
  ir::Builder b(&p);
  b.Parameter("h.0.w", {{4}, ir::DataType::kFloat32}, "zeros");
  b.Parameter("h.0.w.scale", {{4}, ir::DataType::kFloat32}, "ones");  // a parameter whose name extends another's
  EXPECT_EQ(UnknownCheckpointTensor("ckpt", "h.0.w.scale.beta1_pow", p).message(),
            "ckpt has tensor 'h.0.w.scale.beta1_pow' that the model does not have: a state of parameter 'h.0.w.scale' "
            "this run's optimizer does not keep (saved with another --optimizer?)");
  EXPECT_EQ(UnknownCheckpointTensor("ckpt", "h.1.w", p).message(), "ckpt has tensor 'h.1.w' that the model does not have");
  // Not an optimizer's state: a name that merely extends a parameter's; amp's master weight is
  // amp's (EngineTest.LoadUnderOtherAmpSettingsSaysSo).
  EXPECT_EQ(UnknownCheckpointTensor("ckpt", "h.0.w.extra", p).message(),
            "ckpt has tensor 'h.0.w.extra' that the model does not have");
  EXPECT_EQ(UnknownCheckpointTensor("ckpt", "h.0.w.master", p).message(),
            "ckpt has tensor 'h.0.w.master' that the model does not have: the f32 master weight amp o2 keeps for "
            "'h.0.w' (saved under amp o2: resume with the same amp settings)");
}

}  // namespace
}  // namespace pdist::engine

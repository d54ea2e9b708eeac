// model.pb round trips and robustness: truncations, byte flips and garbage are errors, not crashes.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>

#include "gmock/gmock.h"
#include "google/protobuf/stubs/logging.h"
#include "gtest/gtest.h"
#include "ir/printer.h"
#include "ir/serialize.h"
#include "program.pb.h"
#include "tests/ir/sample_programs.h"
#include "tests/testing/temp_path.h"

namespace pdist::ir {
namespace {

std::string Serialized(const Program& p) {
  absl::StatusOr<std::string> bytes = SerializeProgram(p);
  EXPECT_TRUE(bytes.ok()) << bytes.status();
  return bytes.ok() ? *bytes : "";
}

// A file path in the test's temporary directory.
std::string TempPath(const std::string& name) {
  return pdist::testing::UniqueTempPath(name);
}

TEST(SerializeTest, RoundTripIsExact) {
  for (const Program& p : {testing::MatmulSumProgram(), testing::RichProgram(), testing::TrainingProgram()}) {
    const std::string bytes = Serialized(p);
    absl::StatusOr<Program> loaded = DeserializeProgram(bytes);
    ASSERT_TRUE(loaded.ok()) << loaded.status();
    EXPECT_EQ(PrintProgram(*loaded), PrintProgram(p));
    EXPECT_EQ(Serialized(*loaded), bytes);
  }
}

TEST(SerializeTest, CanonicalIdsMakeBytesIndependentOfInternalIds) {
  // The same program text through two routes: built (ids follow creation) and parsed.
  const Program built = testing::TrainingProgram();
  absl::StatusOr<Program> parsed = DecodeProgram(PrintProgram(built));
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(Serialized(*parsed), Serialized(built));
}

TEST(SerializeTest, InvalidProgramIsNotSerialised) {
  Program p = testing::MatmulSumProgram();
  p.set_loss(p.FindValue(0));  // data input f32[8,64]: not a scalar
  absl::StatusOr<std::string> bytes = SerializeProgram(p);
  EXPECT_THAT(std::string(bytes.status().message()), ::testing::HasSubstr("cannot serialise an invalid program: loss %0"));
}

TEST(SerializeTest, EveryTruncationIsAnError) {
  const std::string bytes = Serialized(testing::TrainingProgram());
  for (size_t n = 0; n < bytes.size(); ++n) {
    absl::StatusOr<Program> p = DeserializeProgram(std::string_view(bytes).substr(0, n));
    ASSERT_FALSE(p.ok()) << "a prefix of " << n << " of " << bytes.size() << " bytes loaded";
    EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
  }
}

TEST(SerializeTest, ByteFlipsAreErrors) {
  const std::string bytes = Serialized(testing::RichProgram());
  std::mt19937 rng(1234);
  for (int trial = 0; trial < 2000; ++trial) {
    std::string corrupt = bytes;
    const int flips = 1 + trial % 3;
    for (int i = 0; i < flips; ++i) corrupt[rng() % corrupt.size()] ^= static_cast<char>(1 + rng() % 255);
    EXPECT_FALSE(DeserializeProgram(corrupt).ok()) << "trial " << trial;
  }
}

// With a valid checksum the corruption reaches the proto reader and the verifier: they must
// reject it (or accept a still-valid program) without crashing.
TEST(SerializeTest, ResealedByteFlipsNeverCrash) {
  const std::string bytes = Serialized(testing::TrainingProgram());
  const std::string body = bytes.substr(0, bytes.size() - 9);
  std::mt19937 rng(99);
  int accepted = 0;
  google::protobuf::LogSilencer quiet;  // invalid UTF-8 in a string field: expected, not news
  for (int trial = 0; trial < 3000; ++trial) {
    std::string corrupt = body;
    corrupt[rng() % corrupt.size()] ^= static_cast<char>(1 + rng() % 255);
    absl::StatusOr<Program> p = DeserializeProgram(SealModelBytes(corrupt));
    if (p.ok()) {
      ++accepted;
      EXPECT_TRUE(SerializeProgram(*p).ok());
    }
  }
  EXPECT_LT(accepted, 3000);
}

TEST(SerializeTest, GarbageAndWrongVersion) {
  EXPECT_THAT(std::string(DeserializeProgram("").status().message()), ::testing::HasSubstr("empty input"));
  EXPECT_THAT(std::string(DeserializeProgram("hello world, not a model").status().message()),
              ::testing::HasSubstr("does not end with the checksum field"));
  std::mt19937 rng(7);
  for (int trial = 0; trial < 500; ++trial) {
    std::string garbage(rng() % 200, '\0');
    for (char& c : garbage) c = static_cast<char>(rng());
    EXPECT_FALSE(DeserializeProgram(garbage).ok());
  }

  proto::Program p;
  ASSERT_TRUE(p.ParseFromString(Serialized(testing::MatmulSumProgram())));
  p.set_version(2);
  p.clear_checksum();
  EXPECT_THAT(std::string(DeserializeProgram(SealModelBytes(p.SerializeAsString())).status().message()),
              ::testing::HasSubstr("format version 2 is not supported (this build reads version 1)"));
}

TEST(SerializeTest, FilesNameThePath) {
  const std::string path = TempPath("model.pb");
  const Program p = testing::TrainingProgram();
  ASSERT_TRUE(SaveProgram(p, path).ok());
  absl::StatusOr<Program> loaded = LoadProgram(path);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(PrintProgram(*loaded), PrintProgram(p));
  absl::StatusOr<Program> autoloaded = LoadProgramAuto(path);
  ASSERT_TRUE(autoloaded.ok()) << autoloaded.status();

  const std::string text_path = TempPath("model.pdir");
  std::ofstream(text_path) << "// a comment first\n" << PrintProgram(p);
  autoloaded = LoadProgramAuto(text_path);
  ASSERT_TRUE(autoloaded.ok()) << autoloaded.status();
  EXPECT_EQ(PrintProgram(*autoloaded), PrintProgram(p));

  const std::string missing = TempPath("missing.pb");
  EXPECT_EQ(LoadProgram(missing).status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(LoadProgram(missing).status().message()), ::testing::HasSubstr(missing));

  const std::string truncated = TempPath("truncated.pb");
  const std::string bytes = Serialized(p);
  std::ofstream(truncated, std::ios::binary) << bytes.substr(0, bytes.size() / 2);
  EXPECT_EQ(LoadProgram(truncated).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(LoadProgram(truncated).status().message()), ::testing::StartsWith(truncated + ": invalid model.pb"));

  std::ofstream(text_path) << "program {\n  %0 = data \"x\" : f32[2]\n  loss %0\n}\n";
  EXPECT_THAT(std::string(LoadProgramAuto(text_path).status().message()),
              ::testing::StartsWith(text_path + ": loss %0 must be a floating-point scalar"));
}

}  // namespace
}  // namespace pdist::ir

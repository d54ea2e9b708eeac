// Reading what a user wrote: JSON bounded in depth, size and count with duplicate keys
// rejected, and files whose path is wrong named as such — a clean error, never a crash. Writing
// where a user said: whole or not at all.
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "ir/input_file.h"
#include "ir/json_reader.h"
#include "ir/output_file.h"
#include "tests/testing/temp_path.h"

namespace pdist::ir {
namespace {

std::string Nested(int depth) { return std::string(static_cast<size_t>(depth), '[') + std::string(static_cast<size_t>(depth), ']'); }

std::string ErrorOf(const std::string& text, const JsonLimits& limits = {}) {
  absl::StatusOr<nlohmann::json> j = ParseJson(text, "request", limits);
  EXPECT_FALSE(j.ok()) << text.substr(0, 80);
  return j.ok() ? "" : std::string(j.status().message());
}

TEST(ParseJsonTest, ReadsWhatNlohmannReads) {
  absl::StatusOr<nlohmann::json> j = ParseJson(R"({"a": [1, 2.5, "x", true, null, {"b": {}}], "c": -3})", "t");
  ASSERT_TRUE(j.ok()) << j.status();
  EXPECT_EQ(*j, nlohmann::json::parse(R"({"a": [1, 2.5, "x", true, null, {"b": {}}], "c": -3})"));
  EXPECT_EQ(*ParseJson("7", "t"), nlohmann::json(7));
}

TEST(ParseJsonTest, DepthIsBoundedBeforeTheTreeGrows) {
  EXPECT_TRUE(ParseJson(Nested(64), "t").ok());
  EXPECT_EQ(ErrorOf(Nested(65)), "request: JSON nested deeper than 64 levels");
  EXPECT_EQ(ErrorOf(Nested(100000)), "request: JSON nested deeper than 64 levels");  // crashed nlohmann's tree
  EXPECT_EQ(ErrorOf(R"({"a": {"b": {"c": 1}}})", {.max_depth = 2}), "request: JSON nested deeper than 2 levels");
}

TEST(ParseJsonTest, DuplicateKeysAreRejectedAtAnyDepth) {
  EXPECT_EQ(ErrorOf(R"({"dp_degree": 2, "dp_degree": 4})"), "request: duplicate key 'dp_degree' in one object");
  EXPECT_EQ(ErrorOf(R"({"pipeline": {"enable": true, "enable": false}})"),
            "request: duplicate key 'enable' in one object");
  // The same key in two objects is no duplicate.
  EXPECT_TRUE(ParseJson(R"([{"a": 1}, {"a": 2}, {"b": {"a": 3}}])", "t").ok());
}

TEST(ParseJsonTest, SizeAndCountAreBounded) {
  EXPECT_EQ(ErrorOf("[1, 2, 3]", {.max_bytes = 8}), "request: JSON of 9 bytes is larger than the limit of 8");
  EXPECT_EQ(ErrorOf("[1, 2, 3]", {.max_values = 3}), "request: more than 3 JSON values");
  EXPECT_TRUE(ParseJson("[1, 2, 3]", "t", {.max_values = 4}).ok());
}

TEST(ParseJsonTest, MalformedTextSaysWhere) {
  EXPECT_EQ(ErrorOf("{no"), "request: not valid JSON (line 1, column 3: syntax error while parsing object key - "
                            "invalid literal; last read: '{no'; expected string literal)");
  EXPECT_NE(ErrorOf("").find("request: not valid JSON (line 1, column 1"), std::string::npos);
  EXPECT_NE(ErrorOf("[1] 2").find("not valid JSON"), std::string::npos);  // trailing garbage
}

TEST(InputFileTest, NamesWhatIsWrongWithThePath) {
  const std::string dir = testing::UniqueTempPath("dir");
  std::filesystem::create_directories(dir);
  absl::StatusOr<std::string> read = ReadFileToString(dir);
  EXPECT_EQ(read.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(read.status().message(), "'" + dir + "' is a directory, not a file");
  EXPECT_EQ(CheckReadableFile(dir).message(), read.status().message());

  const std::string missing = dir + "/none.json";
  EXPECT_EQ(ReadFileToString(missing).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(ReadFileToString(missing).status().message(), "'" + missing + "' does not exist");
  EXPECT_EQ(ReadFileToString("/dev/null").status().message(),
            "'/dev/null' is not a regular file (a device, socket or pipe)");

  const std::string file = dir + "/ten.txt";
  std::ofstream(file) << "0123456789";
  EXPECT_EQ(*ReadFileToString(file), "0123456789");
  EXPECT_TRUE(CheckReadableFile(file).ok());
  EXPECT_EQ(ReadFileToString(file, 9).status().message(), "'" + file + "' is 10 bytes, more than the limit of 9");
  std::filesystem::remove_all(dir);
}

// A write names what is wrong with the path, and a failed one leaves the file as it was with no
// PATH.tmp beside it (pdist-export -o DIR used to leave DIR.tmp).
TEST(OutputFileTest, WritesWholeOrNotAtAll) {
  const std::string dir = testing::UniqueTempPath("out");
  std::filesystem::create_directories(dir);
  const absl::Status into_dir = WriteFileAtomically(dir, "x");
  EXPECT_EQ(into_dir.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(into_dir.message(), "'" + dir + "' is a directory, not a file");
  EXPECT_FALSE(std::filesystem::exists(dir + ".tmp"));

  const std::string file = dir + "/plan.json";
  ASSERT_TRUE(WriteFileAtomically(file, "first").ok());
  ASSERT_TRUE(WriteFileAtomically(file, "second").ok());  // replaces, not appends
  EXPECT_EQ(*ReadFileToString(file), "second");
  EXPECT_FALSE(std::filesystem::exists(file + ".tmp"));

  // The temporary cannot be made (a directory sits at PATH.tmp): an error naming it, and the
  // last good file untouched.
  std::filesystem::create_directories(file + ".tmp");
  const absl::Status blocked = WriteFileAtomically(file, "third");
  EXPECT_EQ(blocked.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(blocked.message(), "cannot write '" + file + ".tmp': Is a directory");
  EXPECT_EQ(*ReadFileToString(file), "second");
  EXPECT_TRUE(std::filesystem::is_directory(file + ".tmp"));  // not this write's to remove

  const std::string orphan = dir + "/missing/plan.json";  // a parent that does not exist
  EXPECT_EQ(WriteFileAtomically(orphan, "x").message(),
            "'" + orphan + "': its directory '" + dir + "/missing' does not exist");
  EXPECT_EQ(CheckOutputPath(orphan).code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(CheckOutputPath(dir + "/new.json").ok());
  EXPECT_TRUE(CheckOutputPath("relative.json").ok());  // the working directory
  EXPECT_EQ(WriteFileAtomically("", "x").message(), "an empty output path");
  // A file that is not a regular one is written in place (-o /dev/null worked before and must),
  // and a symbolic link is written through: its target replaced, the link kept.
  EXPECT_TRUE(WriteFileAtomically("/dev/null", "discarded").ok());
  const std::string real = dir + "/real.json", link = dir + "/link.json";
  ASSERT_TRUE(WriteFileAtomically(real, "old").ok());
  std::filesystem::create_symlink(real, link);
  ASSERT_TRUE(WriteFileAtomically(link, "new").ok());
  EXPECT_TRUE(std::filesystem::is_symlink(link));
  EXPECT_EQ(*ReadFileToString(real), "new");
  // Replace::kEntry (a checkpoint's files): the link itself is replaced, the target left alone,
  // whatever it is; a temporary that is a link or a FIFO is replaced too, not written through or
  // blocked on.
  ASSERT_TRUE(WriteFileAtomically(link, "own", Replace::kEntry).ok());
  EXPECT_FALSE(std::filesystem::is_symlink(link));
  EXPECT_EQ(*ReadFileToString(link), "own");
  EXPECT_EQ(*ReadFileToString(real), "new");
  const std::string to_dir = dir + "/to_dir.json";
  std::filesystem::create_directory(dir + "/a_dir");
  std::filesystem::create_directory_symlink(dir + "/a_dir", to_dir);
  ASSERT_TRUE(WriteFileAtomically(to_dir, "file", Replace::kEntry).ok());
  EXPECT_EQ(*ReadFileToString(to_dir), "file");
  EXPECT_TRUE(std::filesystem::is_directory(dir + "/a_dir"));
  const std::string guarded = dir + "/guarded.json";
  std::filesystem::create_symlink(real, guarded + ".tmp");
  ASSERT_TRUE(WriteFileAtomically(guarded, "x", Replace::kEntry).ok());
  EXPECT_EQ(*ReadFileToString(guarded), "x");
  EXPECT_EQ(*ReadFileToString(real), "new");
  const std::string piped = dir + "/piped.json";
  ASSERT_EQ(::mkfifo((piped + ".tmp").c_str(), 0644), 0);
  ASSERT_TRUE(WriteFileAtomically(piped, "y", Replace::kEntry).ok());
  EXPECT_EQ(*ReadFileToString(piped), "y");
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace pdist::ir

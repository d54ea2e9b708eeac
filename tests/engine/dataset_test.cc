// TokenDataset: file formats (raw u16/u32, PDTOK, text), errors, window order, determinism.
#include "engine/dataset.h"

#include <cstdio>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/temp_path.h"

namespace pdist::engine {
namespace {

using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

std::string TempPath(const std::string& name) { return pdist::testing::UniqueTempPath(name); }

void WriteBytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// Little-endian fixed-width encoding, as nanoGPT's numpy .tofile() writes on x86.
std::string RawTokens(const std::vector<uint32_t>& tokens, int width) {
  std::string bytes;
  for (uint32_t t : tokens) {
    for (int i = 0; i < width; ++i) bytes.push_back(static_cast<char>((t >> (8 * i)) & 0xFF));
  }
  return bytes;
}

std::vector<uint32_t> Iota(int64_t n, uint32_t scale = 1) {
  std::vector<uint32_t> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = static_cast<uint32_t>(i) * scale;
  return v;
}

std::vector<int64_t> Row(const exec::Tensor& t, int64_t row) {
  const int64_t s = t.shape()[1];
  return std::vector<int64_t>(t.data<int64_t>() + row * s, t.data<int64_t>() + (row + 1) * s);
}

std::vector<int64_t> Flat(const exec::Tensor& t) {
  return std::vector<int64_t>(t.data<int64_t>(), t.data<int64_t>() + t.num_elements());
}

TokenDatasetOptions Opts(const std::string& path, TokenFormat format, int64_t batch, int64_t seq, int64_t vocab) {
  return {.path = path, .format = format, .batch = batch, .seq_len = seq, .vocab = vocab, .seed = 1, .shuffle = false};
}

TEST(DatasetTest, RawUint16WindowsAndNextTokenLabels) {
  const std::string path = TempPath("u16.bin");
  WriteBytes(path, RawTokens(Iota(41, 1000), 2));  // ids up to 40000: needs two bytes
  absl::StatusOr<TokenDataset> ds = TokenDataset::Open(Opts(path, TokenFormat::kUint16, 2, 4, 50000));
  ASSERT_TRUE(ds.ok()) << ds.status();
  EXPECT_EQ(ds->num_tokens(), 41);
  EXPECT_EQ(ds->num_windows(), 10);  // (41 - 1) / 4
  EXPECT_EQ(ds->batches_per_epoch(), 5);
  absl::StatusOr<Batch> b = ds->Next();
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->tokens.type(), (exec::TensorType{{2, 4}, ir::DataType::kInt64}));
  EXPECT_THAT(Row(b->tokens, 0), ElementsAreArray({0, 1000, 2000, 3000}));
  EXPECT_THAT(Row(b->labels, 0), ElementsAreArray({1000, 2000, 3000, 4000}));
  EXPECT_THAT(Row(b->tokens, 1), ElementsAreArray({4000, 5000, 6000, 7000}));
  EXPECT_THAT(Row(b->labels, 1), ElementsAreArray({5000, 6000, 7000, 8000}));
  std::remove(path.c_str());
}

TEST(DatasetTest, RawUint32AboveSixteenBits) {
  const std::string path = TempPath("u32.bin");
  WriteBytes(path, RawTokens(Iota(9, 70000), 4));
  absl::StatusOr<TokenDataset> ds = TokenDataset::Open(Opts(path, TokenFormat::kUint32, 1, 8, 1 << 20));
  ASSERT_TRUE(ds.ok()) << ds.status();
  absl::StatusOr<Batch> b = ds->Next();
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(Row(b->tokens, 0)[7], 7 * 70000);
  EXPECT_EQ(Row(b->labels, 0)[7], 8 * 70000);
  // The same bytes read as u16 are other tokens: the width is the caller's explicit choice.
  absl::StatusOr<TokenDataset> wrong = TokenDataset::Open(Opts(path, TokenFormat::kUint16, 1, 8, 1 << 20));
  ASSERT_TRUE(wrong.ok());
  EXPECT_EQ(wrong->num_tokens(), 18);
  std::remove(path.c_str());
}

TEST(DatasetTest, PdtokFilesCarryTheirWidth) {
  for (int width : {2, 4}) {
    const std::string path = TempPath("tokens.pdtok");
    const std::vector<uint32_t> tokens = Iota(33, width == 2 ? 3 : 100000);
    ASSERT_TRUE(WriteTokenFile(path, tokens, width).ok());
    absl::StatusOr<TokenDataset> ds = TokenDataset::Open(Opts(path, TokenFormat::kPdtok, 4, 8, 1 << 23));
    ASSERT_TRUE(ds.ok()) << ds.status();
    EXPECT_EQ(ds->num_tokens(), 33);
    absl::StatusOr<Batch> b = ds->Next();
    ASSERT_TRUE(b.ok());
    EXPECT_EQ(Row(b->labels, 3).back(), static_cast<int64_t>(tokens[32]));
    std::remove(path.c_str());
  }
  EXPECT_THAT(std::string(WriteTokenFile(TempPath("x.pdtok"), {70000}, 2).message()), HasSubstr("width 4"));
  EXPECT_EQ(WriteTokenFile(TempPath("x.pdtok"), {1}, 3).code(), absl::StatusCode::kInvalidArgument);
}

TEST(DatasetTest, TextFilesAreBytes) {
  const std::string path = TempPath("text.txt");
  WriteBytes(path, "hello, world\n\xff");
  absl::StatusOr<TokenDataset> ds = TokenDataset::Open(Opts(path, TokenFormat::kText, 1, 13, 256));
  ASSERT_TRUE(ds.ok()) << ds.status();
  absl::StatusOr<Batch> b = ds->Next();
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(Row(b->tokens, 0)[0], 'h');
  EXPECT_EQ(Row(b->labels, 0)[0], 'e');
  EXPECT_EQ(Row(b->labels, 0)[12], 255);  // bytes are unsigned
  std::remove(path.c_str());
}

TEST(DatasetTest, Errors) {
  absl::StatusOr<TokenDataset> missing = TokenDataset::Open(Opts("/no/such/dir/tokens.bin", TokenFormat::kUint16, 1, 4, 10));
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(missing.status().message()), HasSubstr("/no/such/dir/tokens.bin"));

  // batch · seq + 1 = 2·4 + 1 = 9 tokens are the minimum.
  EXPECT_TRUE(TokenDataset::FromTokens(Iota(9), Opts("", TokenFormat::kUint16, 2, 4, 10), "nine.bin").ok());
  absl::StatusOr<TokenDataset> shorter = TokenDataset::FromTokens(Iota(8), Opts("", TokenFormat::kUint16, 2, 4, 10), "eight.bin");
  EXPECT_EQ(shorter.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(shorter.status().message()),
              HasSubstr("dataset 'eight.bin' has 8 tokens; one batch of 2 x 4 needs at least 9"));

  absl::StatusOr<TokenDataset> big = TokenDataset::FromTokens({1, 2, 300, 4, 5}, Opts("", TokenFormat::kUint16, 1, 2, 256), "ids");
  EXPECT_EQ(big.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(big.status().message()), HasSubstr("token id 300 at position 2 is out of range for vocab 256"));

  const std::string odd = TempPath("odd.bin");
  WriteBytes(odd, "abc");
  EXPECT_THAT(std::string(TokenDataset::Open(Opts(odd, TokenFormat::kUint16, 1, 1, 1 << 16)).status().message()),
              HasSubstr("not a multiple of the token width 2"));
  EXPECT_THAT(std::string(TokenDataset::Open(Opts(odd, TokenFormat::kPdtok, 1, 1, 1 << 16)).status().message()),
              HasSubstr("PDTOK header"));
  std::remove(odd.c_str());

  EXPECT_THAT(std::string(TokenDataset::FromTokens(Iota(9), Opts("", TokenFormat::kText, 0, 4, 10)).status().message()),
              HasSubstr("TokenDatasetOptions.batch must be positive, got 0"));
}

TEST(DatasetTest, SequentialOrderWrapsAcrossTheEnd) {
  // 5 windows of 2 tokens, batch 2: steps see windows {0,1} {2,3} {4,0} {1,2} ...
  absl::StatusOr<TokenDataset> ds = TokenDataset::FromTokens(Iota(11), Opts("", TokenFormat::kUint16, 2, 2, 11));
  ASSERT_TRUE(ds.ok()) << ds.status();
  EXPECT_EQ(ds->num_windows(), 5);
  absl::StatusOr<Batch> b = ds->BatchAt(2);
  ASSERT_TRUE(b.ok());
  EXPECT_THAT(Flat(b->tokens), ElementsAreArray({8, 9, 0, 1}));
  EXPECT_THAT(Flat(b->labels), ElementsAreArray({9, 10, 1, 2}));
  EXPECT_EQ(ds->BatchAt(-1).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(DatasetTest, ShuffledOrderIsAPermutationPerEpochAndSeeded) {
  auto open = [](uint64_t seed) {
    TokenDatasetOptions o = Opts("", TokenFormat::kUint16, 4, 3, 1000);
    o.shuffle = true;
    o.seed = seed;
    absl::StatusOr<TokenDataset> ds = TokenDataset::FromTokens(Iota(3 * 40 + 1), o, "iota");
    EXPECT_TRUE(ds.ok()) << ds.status();
    return *std::move(ds);
  };
  TokenDataset a = open(7), again = open(7), other = open(8);
  ASSERT_EQ(a.num_windows(), 40);
  std::vector<int64_t> firsts_a, firsts_other;
  for (int64_t step = 0; step < 20; ++step) {  // two epochs of 10 batches
    absl::StatusOr<Batch> x = a.Next(), y = again.Next(), z = other.Next();
    ASSERT_TRUE(x.ok() && y.ok() && z.ok());
    EXPECT_EQ(Flat(x->tokens), Flat(y->tokens)) << "step " << step;
    EXPECT_EQ(Flat(x->labels), Flat(y->labels)) << "step " << step;
    for (int64_t r = 0; r < 4; ++r) {
      EXPECT_EQ(Row(x->labels, r)[0], Row(x->tokens, r)[0] + 1);
      firsts_a.push_back(Row(x->tokens, r)[0]);
      firsts_other.push_back(Row(z->tokens, r)[0]);
    }
  }
  // Every window exactly once per epoch, in a different order in the next epoch.
  const std::vector<int64_t> epoch0(firsts_a.begin(), firsts_a.begin() + 40), epoch1(firsts_a.begin() + 40, firsts_a.end());
  EXPECT_EQ(std::set<int64_t>(epoch0.begin(), epoch0.end()).size(), 40u);
  EXPECT_EQ(std::set<int64_t>(epoch1.begin(), epoch1.end()).size(), 40u);
  EXPECT_NE(epoch0, epoch1);
  EXPECT_NE(firsts_a, firsts_other);  // another seed, another order
}

TEST(DatasetTest, SeekResumesTheSameStream) {
  TokenDatasetOptions o = Opts("", TokenFormat::kUint16, 3, 5, 1000);
  o.shuffle = true;
  absl::StatusOr<TokenDataset> run = TokenDataset::FromTokens(Iota(5 * 13 + 1), o);
  absl::StatusOr<TokenDataset> resumed = TokenDataset::FromTokens(Iota(5 * 13 + 1), o);
  ASSERT_TRUE(run.ok() && resumed.ok());
  for (int i = 0; i < 9; ++i) ASSERT_TRUE(run->Next().ok());  // crosses two epoch boundaries (13 windows)
  resumed->Seek(9);
  for (int i = 0; i < 6; ++i) {
    absl::StatusOr<Batch> x = run->Next(), y = resumed->Next();
    ASSERT_TRUE(x.ok() && y.ok());
    EXPECT_EQ(Flat(x->tokens), Flat(y->tokens)) << "step " << 9 + i;
  }
  EXPECT_EQ(run->step(), 15);
}

TEST(DatasetTest, FormatNames) {
  for (TokenFormat f : {TokenFormat::kUint16, TokenFormat::kUint32, TokenFormat::kPdtok, TokenFormat::kText}) {
    absl::StatusOr<TokenFormat> parsed = ParseTokenFormat(TokenFormatName(f));
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, f);
  }
  EXPECT_THAT(std::string(ParseTokenFormat("u8").status().message()), HasSubstr("expected u16, u32, pdtok or text"));
}

}  // namespace
}  // namespace pdist::engine

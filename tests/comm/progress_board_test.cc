// The rendezvous store and the progress board an NCCL rank's watchdog reads on a deadline: the
// peers that never reached a collective are named, and a peer that started another collective
// under the same sequence number is a mismatch naming both.
#include "executor/comm/progress_board.h"

#include <filesystem>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"

namespace pdist::exec::comm {
namespace {

using ::testing::HasSubstr;

Fingerprint AllReduce(int64_t seq, int64_t count = 1024) {
  Fingerprint fp;
  fp.kind = CollectiveKind::kAllReduce;
  fp.reduce = ReduceOp::kSum;
  fp.dtype = ir::DataType::kFloat32;
  fp.count = count;
  fp.group = "world";
  fp.seq = seq;
  return fp;
}

TEST(InMemoryStoreTest, GetWaitsForTheKeyAndNamesItWhenNoRankSetsIt) {
  InMemoryStore store;
  std::thread setter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    ASSERT_TRUE(store.Set("nccl/world/id", "abc").ok());
  });
  absl::StatusOr<std::string> got = store.Get("nccl/world/id", absl::Seconds(10));
  setter.join();
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, "abc");
  absl::StatusOr<std::string> missing = store.Get("nccl/other/id", absl::Milliseconds(20));
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(std::string(missing.status().message()), HasSubstr("'nccl/other/id'"));
  absl::StatusOr<std::optional<std::string>> now = store.TryGet("nccl/other/id");
  ASSERT_TRUE(now.ok());
  EXPECT_FALSE(now->has_value());
}

// A directory store replaces a key atomically and waits for one that is not there yet.
TEST(DirectoryStoreTest, ReplacesKeysAndWaitsForMissingOnes) {
  const std::string dir = ::testing::TempDir() + "/directory_store";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  DirectoryStore a(dir, "job"), b(dir, "job"), other(dir, "another-job");
  ASSERT_TRUE(a.Set("progress/world/0", "one").ok());
  ASSERT_TRUE(a.Set("progress/world/0", "two").ok());
  absl::StatusOr<std::string> got = b.Get("progress/world/0", absl::Seconds(1));
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, "two");
  absl::StatusOr<std::optional<std::string>> elsewhere = other.TryGet("progress/world/0");
  ASSERT_TRUE(elsewhere.ok());
  EXPECT_FALSE(elsewhere->has_value());  // another job's namespace
  std::thread setter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    ASSERT_TRUE(a.Set("nccl/world/id", std::string("\0\1", 2)).ok());
  });
  got = b.Get("nccl/world/id", absl::Seconds(10));
  setter.join();
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, std::string("\0\1", 2));
  absl::StatusOr<std::string> missing = b.Get("nccl/tp/id", absl::Milliseconds(20));
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(std::string(missing.status().message()), HasSubstr("'nccl/tp/id'"));
  // A key longer than a file name may be (a sub-group of many ranks) is stored under its hash.
  std::string group = "nccl/world/{0";
  for (int r = 1; r < 128; ++r) group += absl::StrCat(",", r);
  const std::string long_key = group + "}/id";
  ASSERT_TRUE(a.Set(long_key, "id").ok());
  got = b.Get(long_key, absl::Seconds(1));
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, "id");
}

TEST(ProgressBoardTest, FingerprintsSurviveTheirTextForm) {
  Fingerprint fp = AllReduce(7);
  fp.kind = CollectiveKind::kBroadcast;
  fp.root = 2;
  fp.dtype = ir::DataType::kBFloat16;
  absl::StatusOr<Fingerprint> back = DecodeFingerprint(EncodeFingerprint(fp), "world");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(*back == fp) << back->ToString() << " vs " << fp.ToString();
  for (const char* bad : {"", "1,2,3", "9,0,0,1,0,0,0", "0,7,0,1,0,0,0", "a,0,0,1,0,0,0", "0,0,0,1,0,0,0,0"}) {
    EXPECT_FALSE(DecodeFingerprint(bad, "world").ok()) << bad;
  }
}

TEST(ProgressBoardTest, NamesThePeersThatNeverStartedTheStuckCollective) {
  auto store = std::make_shared<InMemoryStore>();
  std::vector<ProgressBoard> boards;
  for (int r = 0; r < 4; ++r) boards.emplace_back(store, "world", r, 4);
  ASSERT_TRUE(boards[0].Post(AllReduce(7)).ok());
  ASSERT_TRUE(boards[1].Post(AllReduce(7)).ok());
  ASSERT_TRUE(boards[2].Post(AllReduce(6)).ok());  // still in the previous collective; rank 3 posted nothing
  const absl::Status why = boards[0].Diagnose(AllReduce(7), absl::Seconds(300));
  EXPECT_EQ(why.code(), absl::StatusCode::kDeadlineExceeded);
  const std::string message(why.message());
  EXPECT_THAT(message, HasSubstr("ranks that did not arrive: 2, 3"));
  EXPECT_THAT(message, HasSubstr("rank 2 last started all_reduce(sum) f32 x1024 in world#6"));
  EXPECT_THAT(message, HasSubstr("rank 3 started nothing"));
}

TEST(ProgressBoardTest, APeerInAnotherCollectiveUnderTheSameNumberIsAMismatch) {
  auto store = std::make_shared<InMemoryStore>();
  ProgressBoard mine(store, "world", 0, 2), theirs(store, "world", 1, 2);
  ASSERT_TRUE(theirs.Post(AllReduce(3, /*count=*/512)).ok());
  const absl::Status why = mine.Diagnose(AllReduce(3), absl::Seconds(1));
  EXPECT_EQ(why.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(std::string(why.message()), HasSubstr("rank 0 called all_reduce(sum) f32 x1024 in world#3 but rank 1 "
                                                    "called all_reduce(sum) f32 x512 in world#3"));
}

TEST(ProgressBoardTest, EveryRankThereMeansTheTransferIsStuckAndAPeerMeansItsOtherSide) {
  auto store = std::make_shared<InMemoryStore>();
  ProgressBoard mine(store, "world", 0, 2), theirs(store, "world", 1, 2);
  ASSERT_TRUE(theirs.Post(AllReduce(5)).ok());
  EXPECT_THAT(std::string(mine.Diagnose(AllReduce(5), absl::Seconds(1)).message()), HasSubstr("every rank started it"));
  Fingerprint recv = AllReduce(0);
  recv.kind = CollectiveKind::kRecv;
  recv.root = 1;
  const absl::Status why = mine.Diagnose(recv, absl::Seconds(1), /*peer=*/1);
  EXPECT_THAT(std::string(why.message()), HasSubstr("ranks that did not arrive: 1 (its send never ran)"));
}

}  // namespace
}  // namespace pdist::exec::comm

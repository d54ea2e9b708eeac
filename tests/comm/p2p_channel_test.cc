// Point to point as NCCL does it, on the CPU: the inproc backend's rendezvous sends (a send
// waits for its receive; a pair's messages meet in issue order, tags checked, not matched), the
// channel per direction that keeps a held send from blocking anything else, and errors that name
// world ranks whichever sub-group or channel they happen in.
#include <atomic>
#include <chrono>
#include <thread>

#include "executor/comm/comm_groups.h"
#include "executor/comm/inproc/inproc_communicator.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ir/status.h"
#include "tests/comm/comm_test_util.h"

namespace pdist::exec::comm {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using testing::Filled;
using testing::RunRanks;

std::shared_ptr<InprocWorld> RendezvousWorld(int n) {
  return std::make_shared<InprocWorld>(n, InprocOptions{.rendezvous_sends = true});
}

CommConfig Timeout(absl::Duration timeout) {
  CommConfig config;
  config.timeout = timeout;
  return config;
}

TEST(RendezvousSendTest, ASendReturnsOnlyOnceItsReceiveHasTakenTheData) {
  auto world = RendezvousWorld(2);
  std::atomic<bool> receiving{false};
  auto status = RunRanks(2, [&](int r) -> absl::Status {
    PDIST_ASSIGN_OR_RETURN(auto c, CreateInprocCommunicator(world, r));
    if (r == 0) {
      PDIST_RETURN_IF_ERROR(c->Send(Filled({3}, [](int64_t i) { return i + 0.5; }), 1));
      EXPECT_TRUE(receiving.load()) << "the send returned before the receive was posted";
      return absl::OkStatus();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));  // the sender waits, however long
    receiving = true;
    Tensor got = Tensor::Zeros({{3}, ir::DataType::kFloat32});
    PDIST_RETURN_IF_ERROR(c->Recv(got, 0));
    for (int64_t i = 0; i < 3; ++i) EXPECT_EQ(got.At(i), i + 0.5);
    return absl::OkStatus();
  });
  for (int r = 0; r < 2; ++r) EXPECT_TRUE(status[r].ok()) << "rank " << r << ": " << status[r];
}

// The host backends hold a message for the receive of its tag; NCCL has no tags, so a receive
// issued out of order would take the wrong message. Rendezvous sends name the two calls.
TEST(RendezvousSendTest, MessagesMeetInIssueOrderAndADifferentTagIsAMismatch) {
  for (bool rendezvous : {false, true}) {
    auto world = std::make_shared<InprocWorld>(2, InprocOptions{.rendezvous_sends = rendezvous});
    auto status = RunRanks(2, [&](int r) -> absl::Status {
      PDIST_ASSIGN_OR_RETURN(auto c, CreateInprocCommunicator(world, r, Timeout(absl::Seconds(5))));
      if (r == 0) {
        PDIST_RETURN_IF_ERROR(c->Send(Filled({2}, [](int64_t) { return 1; }), 1, /*tag=*/1));
        return c->Send(Filled({2}, [](int64_t) { return 2; }), 1, /*tag=*/2);
      }
      Tensor two = Tensor::Zeros({{2}, ir::DataType::kFloat32});
      Tensor one = Tensor::Zeros({{2}, ir::DataType::kFloat32});
      PDIST_RETURN_IF_ERROR(c->Recv(two, 0, /*tag=*/2));
      PDIST_RETURN_IF_ERROR(c->Recv(one, 0, /*tag=*/1));
      EXPECT_EQ(two.At(0), 2);
      EXPECT_EQ(one.At(0), 1);
      return absl::OkStatus();
    });
    if (!rendezvous) {
      for (int r = 0; r < 2; ++r) EXPECT_TRUE(status[r].ok()) << "buffered, rank " << r << ": " << status[r];
      continue;
    }
    // The receiver's first receive (tag 2) meets the first send (tag 1): both ends say so.
    for (int r = 0; r < 2; ++r) {
      EXPECT_EQ(status[r].code(), absl::StatusCode::kInternal) << status[r];
      EXPECT_THAT(status[r].message(), AllOf(HasSubstr("mismatch"), HasSubstr("tag=1"), HasSubstr("tag=2")));
    }
  }
}

// Why the executor gives each direction its stream: two ranks that each send before they
// receive, on one thread each, wait for each other's receive. The error names the peer.
TEST(RendezvousSendTest, BothEndsSendingFirstOnOneThreadTimesOutNamingThePeer) {
  auto world = RendezvousWorld(2);
  auto status = RunRanks(2, [&](int r) -> absl::Status {
    PDIST_ASSIGN_OR_RETURN(auto c, CreateInprocCommunicator(world, r, Timeout(absl::Milliseconds(300))));
    PDIST_RETURN_IF_ERROR(c->Send(Filled({4}, [&](int64_t) { return r; }), 1 - r));
    Tensor got = Tensor::Zeros({{4}, ir::DataType::kFloat32});
    return c->Recv(got, 1 - r);
  });
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(status[r].code(), absl::StatusCode::kDeadlineExceeded) << status[r];
    EXPECT_THAT(status[r].message(), AllOf(HasSubstr("send"), HasSubstr(absl::StrCat("did not arrive: ", 1 - r))));
  }
}

TEST(RendezvousSendTest, AChannelPerDirectionLetsBothEndsSendFirst) {
  auto world = RendezvousWorld(2);
  auto status = RunRanks(2, [&](int r) -> absl::Status {
    PDIST_ASSIGN_OR_RETURN(auto c, CreateInprocCommunicator(world, r, Timeout(absl::Seconds(10))));
    PDIST_ASSIGN_OR_RETURN(auto groups, CommGroups::Create(c, {}, {{r, 1 - r}, {1 - r, r}}));
    PDIST_ASSIGN_OR_RETURN(Communicator * out, groups->Channel(r, 1 - r));
    PDIST_ASSIGN_OR_RETURN(Communicator * in, groups->Channel(1 - r, r));
    // Each channel on its own thread, as each gets its own stream.
    absl::Status sent;
    std::thread sender([&] {
      for (int k = 0; k < 3 && sent.ok(); ++k) sent = out->Send(Filled({4}, [&](int64_t i) { return 10 * r + k + i; }), 1);
    });
    Tensor got = Tensor::Zeros({{4}, ir::DataType::kFloat32});
    absl::Status received;
    for (int k = 0; k < 3 && received.ok(); ++k) {
      received = in->Recv(got, 0);
      if (received.ok()) EXPECT_EQ(got.At(1), 10 * (1 - r) + k + 1);
    }
    sender.join();
    return sent.ok() ? received : sent;
  });
  for (int r = 0; r < 2; ++r) EXPECT_TRUE(status[r].ok()) << "rank " << r << ": " << status[r];
}

TEST(ChannelTest, OnePerDirectionMadeOnceAndItsErrorsNameWorldRanks) {
  auto world = std::make_shared<InprocWorld>(3);
  auto status = RunRanks(3, [&](int r) -> absl::Status {
    PDIST_ASSIGN_OR_RETURN(auto c, CreateInprocCommunicator(world, r, Timeout(absl::Milliseconds(200))));
    if (r == 1) return absl::OkStatus();
    PDIST_ASSIGN_OR_RETURN(auto to0, c->Channel(2, 0));
    PDIST_ASSIGN_OR_RETURN(auto again, c->Channel(2, 0));
    PDIST_ASSIGN_OR_RETURN(auto to2, c->Channel(0, 2));
    EXPECT_EQ(to0, again);
    EXPECT_NE(to0, to2);
    EXPECT_EQ(to0->name(), "world/p2p{2>0}");
    EXPECT_EQ(to0->size(), 2);
    EXPECT_EQ(to0->rank(), r == 2 ? 0 : 1);
    if (r == 0) return absl::OkStatus();  // never receives
    absl::Status sent = absl::OkStatus();
    Tensor x = Tensor::Zeros({{4}, ir::DataType::kFloat32});
    Tensor y = Tensor::Zeros({{4}, ir::DataType::kFloat32});
    // A buffered send returns; the receive back from 0 waits for it, and names world rank 0.
    PDIST_RETURN_IF_ERROR(to0->Send(x, 1));
    return to2->Recv(y, 0);
  });
  EXPECT_TRUE(status[0].ok()) << status[0];
  EXPECT_EQ(status[2].code(), absl::StatusCode::kDeadlineExceeded) << status[2];
  EXPECT_THAT(status[2].message(), AllOf(HasSubstr("group 'world/p2p{0>2}'"), HasSubstr("recv(from=0)"),
                                         HasSubstr("ranks that did not arrive: 0")));
}

TEST(ChannelTest, OnlyItsTwoEndsMayMakeIt) {
  auto world = std::make_shared<InprocWorld>(3);
  auto c = CreateInprocCommunicator(world, 1).value();
  EXPECT_THAT(c->Channel(0, 2).status().message(), HasSubstr("cannot take part in a channel from 0 to 2"));
  EXPECT_FALSE(c->Channel(1, 1).ok());
  EXPECT_FALSE(c->Channel(1, 3).ok());
  EXPECT_THAT(CommGroups::Create(c, {}, {{0, 2}}).status().message(), HasSubstr("not an end of"));
  auto groups = CommGroups::Create(c, {}, {{1, 2}}).value();
  EXPECT_THAT(groups->Channel(2, 1).status().message(), HasSubstr("no channel for messages from rank 2 to rank 1"));
}

// A sub-group numbers its ranks from 0; its errors still say which process is missing.
TEST(ChannelTest, ASubgroupsTimeoutNamesTheWorldRankMissing) {
  auto world = std::make_shared<InprocWorld>(3);
  auto status = RunRanks(3, [&](int r) -> absl::Status {
    PDIST_ASSIGN_OR_RETURN(auto c, CreateInprocCommunicator(world, r, Timeout(absl::Milliseconds(200))));
    PDIST_ASSIGN_OR_RETURN(auto sub, c->Split(r == 0 ? -1 : 1, r));  // {1, 2}
    if (r != 1) return absl::OkStatus();                             // world rank 2 never reduces
    Tensor x = Tensor::Zeros({{4}, ir::DataType::kFloat32});
    return sub->AllReduce(x, x, ReduceOp::kSum);
  });
  EXPECT_EQ(status[1].code(), absl::StatusCode::kDeadlineExceeded) << status[1];
  EXPECT_THAT(status[1].message(), AllOf(HasSubstr("world/{1,2}"), HasSubstr("ranks that did not arrive: 2")));
}

}  // namespace
}  // namespace pdist::exec::comm

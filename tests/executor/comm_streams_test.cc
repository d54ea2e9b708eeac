// The executor's communication streams: the collectives on one, each point-to-point direction on
// its own (executor.h), and a value one stream makes read straight by an op of another — a
// reduced tensor sent on, a received one reduced, relu'd or sent back — over NCCL-like sends
// (held until the receive runs), on two in-process ranks.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <thread>

#include "executor/comm/comm_groups.h"
#include "executor/comm/inproc/inproc_communicator.h"
#include "executor/executor.h"
#include "ir/builder.h"
#include "ir/status.h"

namespace pdist::exec {
namespace {

using ir::DataType;

const ir::TensorType kType{{4}, DataType::kFloat64};

ir::AttributeMap Group() { return {{"reduce", std::string("sum")}, {"ranks", std::vector<int64_t>{0, 1}}}; }
ir::AttributeMap Peer(int64_t peer, int64_t tag) { return {{"peer", peer}, {"tag", tag}}; }
ir::AttributeMap FromPeer(int64_t peer, int64_t tag) {
  return {{"peer", peer}, {"tag", tag}, {"shape", std::vector<int64_t>{4}}, {"dtype", DataType::kFloat64}};
}

struct RankProgram {
  ir::Program program;
  std::vector<int64_t> fetch;  // value ids
};

// How the second half reads what came over the wire: another all-reduce (a stream op), or relu
// (a compute op, which frees the value while rank 1's send back may not have read it yet).
enum class Reader { kAllReduce, kRelu };

struct Case {
  Reader reader;
  bool fetch_everything;  // else only c: each value dies at its last reader
};

// rank 0: a = allreduce(x); send a → 1; b = recv ← 1; c = reader(b)
// rank 1: a = allreduce(x); r = recv ← 0; send r → 0; c = reader(r)
// Every op after the first reads what another stream made: the send reads the collectives'
// stream's a, rank 1's send the 0>1 channel's r, each reader a channel's value.
RankProgram Build(int rank, const Case& c) {
  RankProgram r;
  ir::Builder b(&r.program);
  ir::Value* x = b.Data("x", kType);
  ir::Value* a = b.Op1("c_allreduce", {x}, Group()).value();
  auto read = [&](ir::Value* v) {
    return c.reader == Reader::kAllReduce ? b.Op1("c_allreduce", {v}, Group()).value() : b.Op1("relu", {v}, {}).value();
  };
  ir::Value* got = nullptr;
  if (rank == 0) {
    EXPECT_TRUE(b.Create("c_send", {a}, Peer(1, 0)).ok());
    got = b.Create("c_recv", {}, FromPeer(1, 1)).value()[0];
  } else {
    got = b.Create("c_recv", {}, FromPeer(0, 0)).value()[0];
    EXPECT_TRUE(b.Create("c_send", {got}, Peer(0, 1)).ok());
  }
  ir::Value* out = read(got);
  r.fetch = c.fetch_everything ? std::vector<int64_t>{got->id(), out->id()} : std::vector<int64_t>{out->id()};
  return r;
}

class CommStreamsTest : public ::testing::TestWithParam<Case> {};

// Repeated: the streams are threads, and a value freed before its last reader ran shows only in
// some interleavings (before the slots, most runs of the relu and the unfetched cases failed).
TEST_P(CommStreamsTest, AValueOneStreamMakesIsReadByAnotherOnlyOnceMadeAndFreedOnlyOnceRead) {
  const Case& c = GetParam();
  for (int repeat = 0; repeat < 25; ++repeat) {
    auto world = std::make_shared<comm::InprocWorld>(2, comm::InprocOptions{.rendezvous_sends = true});
    std::vector<std::vector<double>> fetched(2);
    std::vector<absl::Status> status(2);
    std::vector<std::thread> ranks;
    for (int rank = 0; rank < 2; ++rank) {
      ranks.emplace_back([&, rank] {
        status[rank] = [&]() -> absl::Status {
          RankProgram p = Build(rank, c);
          comm::CommConfig config;
          config.timeout = absl::Seconds(20);
          PDIST_ASSIGN_OR_RETURN(auto comm, comm::CreateInprocCommunicator(world, rank, config));
          PDIST_ASSIGN_OR_RETURN(auto groups, comm::CommGroups::Create(comm, {ir::ProcessMesh::Range({2})},
                                                                       comm::ChannelsOf(p.program, rank)));
          PDIST_ASSIGN_OR_RETURN(Executor executor,
                                 Executor::Create(p.program, {.fetch_ids = p.fetch, .comm_groups = groups}));
          Workspace ws;
          const Tensor x = TensorFromDoubles(kType, {1.0 + rank, 2.0, 3.0 * rank, -4.0});
          PDIST_ASSIGN_OR_RETURN(RunResult run, executor.Run({{"x", x}}, ws));
          for (int64_t id : p.fetch) {
            for (double v : TensorToDoubles(run.fetched.at(id))) fetched[rank].push_back(v);
          }
          return absl::OkStatus();
        }();
      });
    }
    for (std::thread& t : ranks) t.join();
    for (int rank = 0; rank < 2; ++rank) ASSERT_TRUE(status[rank].ok()) << "rank " << rank << ": " << status[rank];
    const std::vector<double> sum = {3, 4, 3, -8};  // x0 + x1: what each rank receives
    for (int rank = 0; rank < 2; ++rank) {
      const size_t out = c.fetch_everything ? 4 : 0;
      for (size_t i = 0; i < 4; ++i) {
        if (c.fetch_everything) EXPECT_EQ(fetched[rank][i], sum[i]) << "rank " << rank << ": received, " << i;
        const double want = c.reader == Reader::kAllReduce ? 2 * sum[i] : std::max(0.0, sum[i]);
        EXPECT_EQ(fetched[rank][out + i], want) << "rank " << rank << ": read, " << i;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Readers, CommStreamsTest,
                         ::testing::Values(Case{Reader::kAllReduce, true}, Case{Reader::kAllReduce, false},
                                           Case{Reader::kRelu, false}),
                         [](const auto& info) {
                           return std::string(info.param.reader == Reader::kAllReduce ? "AllReduce" : "Relu") +
                                  (info.param.fetch_everything ? "FetchingAll" : "FetchingTheResult");
                         });

}  // namespace
}  // namespace pdist::exec

// The executor's communication streams: the collectives on one, each point-to-point direction on
// its own (executor.h), and a value one stream makes read straight by an op of another — a
// reduced tensor sent on, a received one reduced or sent back — over NCCL-like sends (held until
// the receive runs), on two in-process ranks.
#include <gtest/gtest.h>

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

// rank 0: a = allreduce(x); send a → 1; b = recv ← 1; c = allreduce(b)      fetch a, c
// rank 1: a = allreduce(x); r = recv ← 0; send r → 0; c = allreduce(r)      fetch r, c
// Every op after the first reads what another stream made: the send reads the collectives'
// stream's a, rank 1's send the 0>1 channel's r, each second all-reduce a channel's value.
RankProgram Build(int rank) {
  RankProgram r;
  ir::Builder b(&r.program);
  ir::Value* x = b.Data("x", kType);
  ir::Value* a = b.Op1("c_allreduce", {x}, Group()).value();
  if (rank == 0) {
    EXPECT_TRUE(b.Create("c_send", {a}, Peer(1, 0)).ok());
    ir::Value* got = b.Create("c_recv", {}, FromPeer(1, 1)).value()[0];
    ir::Value* c = b.Op1("c_allreduce", {got}, Group()).value();
    r.fetch = {a->id(), c->id()};
  } else {
    ir::Value* got = b.Create("c_recv", {}, FromPeer(0, 0)).value()[0];
    EXPECT_TRUE(b.Create("c_send", {got}, Peer(0, 1)).ok());
    ir::Value* c = b.Op1("c_allreduce", {got}, Group()).value();
    r.fetch = {got->id(), c->id()};
  }
  return r;
}

TEST(CommStreamsTest, AValueOneStreamMakesIsReadByAnotherOnlyOnceMade) {
  auto world = std::make_shared<comm::InprocWorld>(2, comm::InprocOptions{.rendezvous_sends = true});
  std::vector<std::vector<double>> fetched(2);
  std::vector<absl::Status> status(2);
  std::vector<std::thread> ranks;
  for (int rank = 0; rank < 2; ++rank) {
    ranks.emplace_back([&, rank] {
      status[rank] = [&]() -> absl::Status {
        RankProgram p = Build(rank);
        comm::CommConfig config;
        config.timeout = absl::Seconds(20);
        PDIST_ASSIGN_OR_RETURN(auto comm, comm::CreateInprocCommunicator(world, rank, config));
        PDIST_ASSIGN_OR_RETURN(auto groups, comm::CommGroups::Create(comm, {ir::ProcessMesh::Range({2})},
                                                                     comm::ChannelsOf(p.program, rank)));
        PDIST_ASSIGN_OR_RETURN(Executor executor, Executor::Create(p.program, {.fetch_ids = p.fetch, .comm_groups = groups}));
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
  const std::vector<double> sum = {3, 4, 3, -8};  // x0 + x1
  for (int rank = 0; rank < 2; ++rank) {
    for (size_t i = 0; i < 4; ++i) {
      EXPECT_EQ(fetched[rank][i], sum[i]) << "rank " << rank << ": the reduced (0) or received (1) value, " << i;
      EXPECT_EQ(fetched[rank][4 + i], 2 * sum[i]) << "rank " << rank << ": the second all-reduce, " << i;
    }
  }
}

}  // namespace
}  // namespace pdist::exec

// Inproc backend: ranks are threads of one process; collectives read each other's buffers.
//
//   auto world = std::make_shared<InprocWorld>(4);       // the "unique id" every rank shares
//   std::vector<std::thread> threads;
//   for (int r = 0; r < 4; ++r) threads.emplace_back([&, r] {
//     auto comm = CreateInprocCommunicator(world, r).value();
//     comm->AllReduce(x[r], x[r], ReduceOp::kSum).IgnoreError();
//   });
//
// Reductions are deterministic: each element is reduced in rank order 0..n-1 by exactly one
// rank and copied to the others, so results are bitwise equal on every rank and every run.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "executor/comm/communicator.h"

namespace pdist::exec::comm {

namespace inproc_internal {
class Group;
}

// How an in-process job's point-to-point calls behave.
struct InprocOptions {
  // NCCL's send/recv instead of buffered ones: a send returns only once its receive has taken
  // the data, and a pair's sends meet its receives in issue order whatever their tags (a tag
  // that differs is a fingerprint mismatch, not a message held for later). A job that runs
  // over this runs over NCCL's point to point without deadlock and with every message where it
  // belongs: the check the CPU machines can make of a pipeline for GPUs.
  bool rendezvous_sends = false;
};

// Shared state of one in-process job: the groups (by name) its communicators synchronise on.
class InprocWorld {
 public:
  explicit InprocWorld(int size, InprocOptions options = {}) : size_(size), options_(options) {}
  int size() const { return size_; }
  const InprocOptions& options() const { return options_; }

  // The state of group `name` with `size` ranks, created by the first rank that asks.
  std::shared_ptr<inproc_internal::Group> GetGroup(const std::string& name, int size);

 private:
  const int size_;
  const InprocOptions options_;
  std::mutex mu_;
  std::map<std::string, std::shared_ptr<inproc_internal::Group>> groups_;
};

// Rank `rank` of `world`'s top-level group, named config.name ("world").
absl::StatusOr<std::shared_ptr<Communicator>> CreateInprocCommunicator(
    std::shared_ptr<InprocWorld> world, int rank, CommConfig config = {});

}  // namespace pdist::exec::comm

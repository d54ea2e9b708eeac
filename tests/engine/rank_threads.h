// Runs the partitioned programs of a global program on in-process ranks (one thread each),
// for tests that check what the local programs compute.
#pragma once

#include <functional>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "executor/comm/comm_groups.h"
#include "executor/comm/inproc/inproc_communicator.h"
#include "executor/executor.h"
#include "ir/status.h"
#include "passes/partition.h"

namespace pdist::engine::testing {

// Rank r gets feeds(r); returns each rank's tensor of value `fetch_id` (ids survive partition).
inline std::vector<absl::StatusOr<exec::Tensor>> RunPartitioned(const ir::Program& global, int world,
                                                                 const std::function<exec::Feeds(int64_t)>& feeds,
                                                                 int64_t fetch_id) {
  std::vector<absl::StatusOr<exec::Tensor>> out(static_cast<size_t>(world), absl::UnknownError("not run"));
  passes::ReshardPlanCache plans;
  std::vector<ir::Program> locals;
  for (int r = 0; r < world; ++r) {
    absl::StatusOr<ir::Program> local = passes::PartitionProgram(global, r, plans);
    if (!local.ok()) {
      out.assign(static_cast<size_t>(world), local.status());
      return out;
    }
    locals.push_back(*std::move(local));
  }
  const std::vector<ir::ProcessMesh> meshes = passes::MeshesOf(global);
  auto inproc = std::make_shared<exec::comm::InprocWorld>(world);
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      out[static_cast<size_t>(r)] = [&]() -> absl::StatusOr<exec::Tensor> {
        exec::comm::CommConfig config;
        config.timeout = absl::Seconds(20);
        PDIST_ASSIGN_OR_RETURN(auto comm, exec::comm::CreateInprocCommunicator(inproc, r, config));
        PDIST_ASSIGN_OR_RETURN(auto groups, exec::comm::CommGroups::Create(
                                                comm, meshes, exec::comm::ChannelsOf(locals[static_cast<size_t>(r)], r)));
        exec::ExecutorOptions options;
        options.fetch_ids = {fetch_id};
        options.comm_groups = groups;
        PDIST_ASSIGN_OR_RETURN(exec::Executor executor, exec::Executor::Create(locals[static_cast<size_t>(r)], options));
        exec::Workspace ws;
        PDIST_RETURN_IF_ERROR(exec::InitializeLocalWorkspace(locals[static_cast<size_t>(r)], 1, r, ws));
        PDIST_ASSIGN_OR_RETURN(exec::RunResult run, executor.Run(feeds(r), ws));
        return run.fetched.at(fetch_id);  // undefined on a rank that does not hold the value
      }();
    });
  }
  for (std::thread& t : threads) t.join();
  return out;
}

}  // namespace pdist::engine::testing

// Gloo backend: ranks are processes (or threads) connected over TCP by Gloo (libgloo-dev).
//
// Rendezvous goes through a key-value store: a TCP store served by rank 0 at
// MASTER_ADDR:MASTER_PORT (as torchrun does), or a shared directory (Gloo's FileStore):
//
//   RANK=0 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=29500 ./train &
//   RANK=1 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=29500 ./train
//   // in ./train:
//   PDIST_ASSIGN_OR_RETURN(auto comm, CreateGlooCommunicatorFromEnv({}));
//
// Data moves with Gloo's legacy algorithm classes (AllreduceRingChunked, AllgatherRing,
// ReduceScatterHalvingDoubling, BroadcastOneToAll: see docs/communicators.md for why) and
// unbound buffers (all_to_all, send/recv, fingerprints). Gloo exceptions are caught here and
// become absl::Status.
#pragma once

#include <memory>
#include <string>

#include "executor/comm/communicator.h"
#include "executor/comm/kv_store.h"

namespace pdist::exec::comm {

// Where and how ranks find each other.
struct GlooRendezvous {
  // Shared directory for Gloo's FileStore. Use a fresh one (or a fresh prefix) per job: keys
  // left by an earlier job would be read as this job's addresses. Takes precedence.
  std::string file_store_dir;
  // Otherwise a TCP store that rank 0 serves on master_port (see tcp_store.h).
  std::string master_addr;
  int master_port = 0;
  // Namespace of this job's keys inside the store.
  std::string prefix = "pdist";
  // Address this rank listens on (a real interface address across hosts).
  std::string hostname = "127.0.0.1";
};

// Rank `rank` of `size`; blocks until every rank has arrived or config.timeout has passed
// (then DeadlineExceeded naming the ranks that did not arrive).
absl::StatusOr<std::shared_ptr<Communicator>> CreateGlooCommunicator(const GlooRendezvous& rendezvous,
                                                                     int rank, int size,
                                                                     CommConfig config = {});

// This process's rank of a launched job, and where the ranks meet.
struct LaunchedWorld {
  int rank = 0;
  int size = 1;
  GlooRendezvous rendezvous;
};

// The torchrun-style environment: RANK, WORLD_SIZE (or Slurm's, Open MPI's, PMI's), and either
// MASTER_ADDR + MASTER_PORT (TCP store on rank 0) or PDIST_RENDEZVOUS_DIR (shared directory,
// preferred when both are set); optional PDIST_RENDEZVOUS_PREFIX, PDIST_GLOO_HOSTNAME. `who`
// names the backend in errors.
absl::StatusOr<LaunchedWorld> LaunchedWorldFromEnv(const char* who);

absl::StatusOr<std::shared_ptr<Communicator>> CreateGlooCommunicatorFromEnv(CommConfig config = {});

// The rendezvous as a KeyValueStore (keys under the rendezvous prefix): what the NCCL backend
// exchanges its ids and progress through. A DirectoryStore on the shared directory, or the TCP
// store, which rank 0 serves.
absl::StatusOr<std::shared_ptr<KeyValueStore>> OpenKeyValueStore(const GlooRendezvous& rendezvous, int rank,
                                                                 absl::Duration timeout);

}  // namespace pdist::exec::comm

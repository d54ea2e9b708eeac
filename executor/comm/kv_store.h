// KeyValueStore: the small rendezvous store a job's ranks share — bytes by key, set once, read
// by any rank, waiting for a key that is not there yet. Communicators that cannot exchange
// anything before they exist (NCCL's unique id) or while they are stuck (which ranks never
// arrived) talk through it.
//
//   auto store = std::make_shared<InMemoryStore>();    // ranks that are threads of one process
//   PDIST_RETURN_IF_ERROR(store->Set("nccl/world/id", id));
//   PDIST_ASSIGN_OR_RETURN(std::string id, store->Get("nccl/world/id", absl::Seconds(300)));
//
// Between processes: a DirectoryStore on a directory every rank sees, or the TCP store rank 0
// serves at MASTER_ADDR:MASTER_PORT (executor/comm/gloo/gloo_communicator.h: OpenKeyValueStore).
#pragma once

#include <condition_variable>
#include <map>
#include <mutex>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace pdist::exec::comm {

class KeyValueStore {
 public:
  virtual ~KeyValueStore() = default;
  // Sets (or replaces) `key`.
  virtual absl::Status Set(const std::string& key, const std::string& value) = 0;
  // The value of `key`, waiting up to `timeout` for some rank to set it; DeadlineExceeded
  // naming the key after that.
  virtual absl::StatusOr<std::string> Get(const std::string& key, absl::Duration timeout) = 0;
  // The value of `key` if it is set now.
  virtual absl::StatusOr<std::optional<std::string>> TryGet(const std::string& key) = 0;
};

// A store in this process's memory: for ranks that are threads of one process, and for tests.
class InMemoryStore final : public KeyValueStore {
 public:
  absl::Status Set(const std::string& key, const std::string& value) override;
  absl::StatusOr<std::string> Get(const std::string& key, absl::Duration timeout) override;
  absl::StatusOr<std::optional<std::string>> TryGet(const std::string& key) override;

 private:
  std::mutex mu_;
  std::condition_variable changed_;
  std::map<std::string, std::string> values_;
};

// A store in a directory every rank can see (a shared file system): one file per key, replaced
// by an atomic rename, so a reader sees a whole value, old or new. Gloo's FileStore cannot
// replace a key, and a progress board posts the same key again and again.
class DirectoryStore final : public KeyValueStore {
 public:
  // Keys live under `prefix` (a job's namespace) in `dir`.
  explicit DirectoryStore(std::string dir, std::string prefix = "") : dir_(std::move(dir)), prefix_(std::move(prefix)) {}
  absl::Status Set(const std::string& key, const std::string& value) override;
  absl::StatusOr<std::string> Get(const std::string& key, absl::Duration timeout) override;
  absl::StatusOr<std::optional<std::string>> TryGet(const std::string& key) override;

 private:
  std::string PathOf(const std::string& key) const;
  std::string dir_;
  std::string prefix_;
};

}  // namespace pdist::exec::comm

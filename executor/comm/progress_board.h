// ProgressBoard: what each rank of a group last started, posted to the job's store, so that a
// rank whose collective passed its deadline can name the peers that never reached it.
//
// The host-side backends (inproc, gloo) learn this in the collective itself: every rank's
// fingerprint travels with its data. NCCL's collectives carry nothing but data, and one that
// waits for a missing rank simply never completes; so an NCCL rank's watchdog posts its latest
// fingerprint now and then (never on the hot path), and on a deadline reads the others':
//
//   ProgressBoard board(store, "world", rank, size);
//   board.Post(latest);                                   // the watchdog, about once a second
//   absl::Status why = board.Diagnose(stuck, timeout);    // past the deadline
//   // "timeout after 5m in group 'world' waiting for all_reduce(sum) f32 x1024 in world#7
//   //  (seq 7): ranks that did not arrive: 3 (rank 3 last started world#6)"
//
// or, when a peer started something else under the same sequence number, the mismatch naming
// both collectives — the desync a wrong program order causes.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "executor/comm/communicator.h"
#include "executor/comm/kv_store.h"

namespace pdist::exec::comm {

// A fingerprint as text and back (the group is the board's, not encoded).
std::string EncodeFingerprint(const Fingerprint& fp);
absl::StatusOr<Fingerprint> DecodeFingerprint(const std::string& text, const std::string& group);

class ProgressBoard {
 public:
  ProgressBoard(std::shared_ptr<KeyValueStore> store, std::string group, int rank, int size)
      : store_(std::move(store)), group_(std::move(group)), rank_(rank), size_(size) {}

  // Posts `fp` as this rank's latest started collective of the group.
  absl::Status Post(const Fingerprint& fp);
  // `rank`'s latest posted collective; nullopt before its first post.
  absl::StatusOr<std::optional<Fingerprint>> LatestOf(int rank) const;
  // Why this rank's `stuck` collective, past its deadline after `timeout`, has not completed:
  // the peers that have not started it (a send or receive: `peer`, its other side), or a peer
  // that started another collective under the same sequence number. DeadlineExceeded or
  // Internal (mismatch).
  absl::Status Diagnose(const Fingerprint& stuck, absl::Duration timeout, int peer = -1) const;

 private:
  std::string KeyOf(int rank) const;

  std::shared_ptr<KeyValueStore> store_;
  std::string group_;
  int rank_, size_;
};

}  // namespace pdist::exec::comm

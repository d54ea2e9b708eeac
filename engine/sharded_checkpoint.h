// Sharded checkpoints: every rank writes only the pieces of the persistent tensors it owns, and
// one index names each tensor's global shape and where its pieces are. Loading under another
// strategy (other dp, mp, pp, ZeRO stage, or one rank) reads, for each rank, only the pieces
// that overlap what the rank holds (the byte range of each, which the index records), and cuts
// its own pieces out of them: no rank ever gathers a whole model or reads a whole file.
//
//   DIR/rank0.ckpt, DIR/rank1.ckpt, ...   engine/checkpoint.h's format (a checksum per piece),
//       one record per piece the rank owns, named "<tensor>@<offsets>": "gpt.wte@128,0"
//   DIR/index.json                        written last:
//     {"format": "pdist-sharded-checkpoint", "version": 1, "step": 120,
//      "files": ["rank0.ckpt", "rank1.ckpt"],
//      "tensors": {"gpt.wte": {"dtype": "f32", "shape": [256, 64],
//                              "dist_attr": "{mesh: [2,2] [dp,mp], dims_mapping: [1,-1]}",
//                              "pieces": [{"file": 0, "offsets": [0, 0], "sizes": [128, 64],
//                                          "bytes": [36, 32812]}, ...]}}}
//
// A replicated piece is written once, by the lowest rank that holds it. Each file is written
// durably (PATH.tmp, fsync, rename) and the index only after every rank's file, the index's
// rename being the commit. A directory alternates between two sets of rank files (rank0.ckpt …
// and rank0.alt.ckpt …): a save writes the set the committed index does not name, and removes
// that index's files only after its own is in place. So a save that fails (a full disk, an
// unwritable file) or is killed leaves the last checkpoint as it was, loadable; one that
// succeeds leaves only its own files.
#pragma once

#include <cstdint>
#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "engine/checkpoint.h"
#include "ir/program.h"

namespace pdist::engine {

inline constexpr char kShardIndexFile[] = "index.json";

// Whether `path` is a directory with an index (a sharded checkpoint).
bool IsShardedCheckpoint(const std::string& path);
// Whether `path` is one rank's file in a sharded checkpoint's directory (rank3.ckpt beside an
// index.json): loaded as a checkpoint of its own, it lacked every tensor of the other ranks.
bool IsRankFileOfShardedCheckpoint(const std::string& path);

// The two sets of rank files (above): rank<k>.ckpt and rank<k>.alt.ckpt.
enum class RankFileSet : int8_t { kPlain = 0, kAlt = 1 };

// Held by rank 0 from choosing the set of files to the commit: a second save into the same
// directory meanwhile (another job, or another engine of this process) is refused, naming the
// directory, instead of writing over this save's files and committing a checkpoint mixed from
// two runs. An advisory lock (flock) on DIR/.pdist-save.lock, an empty file left there; the
// kernel drops it when the holder exits, however it exits, so a killed save leaves no stale lock.
class CheckpointSaveLock {
 public:
  // Makes `dir` if needed. FailedPrecondition while another holds it.
  static absl::StatusOr<CheckpointSaveLock> Take(const std::string& dir);
  CheckpointSaveLock(CheckpointSaveLock&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  CheckpointSaveLock& operator=(CheckpointSaveLock&&) = delete;
  ~CheckpointSaveLock();

 private:
  explicit CheckpointSaveLock(int fd) : fd_(fd) {}
  int fd_ = -1;
};

// What a save into `dir` would refuse, checked before hours of training whose end it is (made
// if missing): a file in the way, a directory that cannot be written, an index that cannot be
// read, or a rank file, its temporary or the index that is a directory or another non-file
// where a file goes.
absl::Status CheckSaveTarget(const std::string& dir);

// The set a save into `dir` writes: the one its committed index does not name (kPlain where
// there is none). Chosen once, by rank 0, for every rank: a rank reading the index itself could
// see an older one (a shared filesystem's cache) and overwrite the committed files.
// FailedPrecondition for an index that is there but cannot be read: a guess could overwrite the
// files of a good checkpoint.
absl::StatusOr<RankFileSet> RankFileSetToWrite(const std::string& dir);

// Rank `rank`'s file: the pieces it owns of the persistent tensors of `global` (the completed
// global training program; for a program without DistAttrs, rank 0 owns every tensor whole),
// taken from `local`, its workspace, into `set` (RankFileSetToWrite's, the same for every rank).
// Creates DIR if needed; leaves the committed checkpoint alone.
absl::Status WriteRankShards(const ir::Program& global, int64_t rank, const exec::Workspace& local, int64_t step,
                             const std::string& dir, RankFileSet set);

// The index, written after every rank's WriteRankShards has returned and before any rank saves
// again (it names the set they wrote); then the rank files it does not name are removed.
absl::Status WriteShardIndex(const ir::Program& global, int64_t world_size, int64_t step, const std::string& dir,
                             RankFileSet set);

// What rank `rank` holds of every persistent tensor of `local_program` (its local program; a
// program without DistAttrs holds everything whole), read from the files with overlapping pieces.
// Errors name the checkpoint and the tensor: missing from the checkpoint or from `global` (the
// run's whole training program), a global shape or dtype that differs, a piece the index
// promises that a file lacks. Only the blocks of the overlapping pieces are read (and each
// file's header, for its step), each checked against its checksum; `bytes_read`, when given,
// receives how many bytes that took.
absl::StatusOr<Checkpoint> ReadShardsFor(const std::string& dir, const ir::Program& local_program, int64_t rank,
                                         const ir::Program& global, int64_t* bytes_read = nullptr);

// Every tensor whole (tools and tests; LoadCheckpoint reads a directory through it).
absl::StatusOr<Checkpoint> ReadShardedWhole(const std::string& dir);

}  // namespace pdist::engine

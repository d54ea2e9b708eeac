// Sharded checkpoints: pieces per rank, an index, and reading back the pieces a rank needs.
#include "engine/sharded_checkpoint.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <limits>
#include <map>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "engine/checkpoint_format.h"
#include "engine/shard_index.h"
#include "engine/shard_io.h"
#include "ir/dist/local_slice.h"
#include "ir/input_file.h"
#include "ir/output_file.h"
#include "ir/status.h"

namespace pdist::engine {
namespace {

struct Piece {
  int64_t owner = 0;
  ir::LocalSlice box;
};

ir::LocalSlice WholeBox(const ir::Shape& shape) { return {ir::Shape(shape.size(), 0), shape}; }

// The distinct pieces of a global persistent tensor, each owned by the lowest rank holding it.
absl::StatusOr<std::vector<Piece>> PiecesOf(const ir::Value& v) {
  if (!v.dist_attr()) return std::vector<Piece>{{0, WholeBox(v.type().shape)}};
  const ir::DistAttr& attr = *v.dist_attr();
  std::vector<Piece> pieces;
  for (int64_t p : attr.mesh.process_ids()) {
    PDIST_ASSIGN_OR_RETURN(ir::LocalSlice box, ir::SliceOf(attr, v.type().shape, p));
    auto same = std::find_if(pieces.begin(), pieces.end(), [&](const Piece& x) { return x.box.offsets == box.offsets; });
    if (same == pieces.end()) {
      pieces.push_back({p, std::move(box)});
    } else {
      same->owner = std::min(same->owner, p);
    }
  }
  return pieces;
}

std::string RecordName(const std::string& tensor, const ir::Shape& offsets) {
  return absl::StrCat(tensor, "@", absl::StrJoin(offsets, ","));
}

std::string InDir(const std::string& dir, const std::string& file) { return (std::filesystem::path(dir) / file).string(); }

absl::StatusOr<ShardIndex> ReadIndex(const std::string& dir) {
  const std::string path = InDir(dir, kShardIndexFile);
  absl::StatusOr<std::string> text = ir::ReadFileToString(path, int64_t{256} << 20);
  if (!text.ok()) return WithContext(text.status(), "sharded checkpoint");
  return DecodeShardIndex(*text, absl::StrCat("checkpoint index '", path, "'"));
}

constexpr char kAltSuffix[] = ".alt.ckpt";

std::string RankFile(int64_t rank, RankFileSet set) {
  return absl::StrCat("rank", rank, set == RankFileSet::kAlt ? kAltSuffix : ".ckpt");
}

// Whether `name` is a rank file of either set, or one being written ("rank3.alt.ckpt.tmp").
bool IsRankFile(const std::string& name) {
  absl::string_view rest = name;
  if (!absl::ConsumePrefix(&rest, "rank")) return false;
  const size_t digits = rest.find_first_not_of("0123456789");
  if (digits == 0 || digits == absl::string_view::npos) return false;
  rest.remove_prefix(digits);
  absl::ConsumeSuffix(&rest, ".tmp");
  return rest == ".ckpt" || rest == kAltSuffix;
}

// After a commit: the rank files the new index does not name (the last checkpoint's, or an
// interrupted save's). A file that cannot be removed only takes space: the index names its own.
void RemoveUnlisted(const std::string& dir, const std::vector<std::string>& listed) {
  std::error_code ec;
  std::vector<std::filesystem::path> stale;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (IsRankFile(name) && std::find(listed.begin(), listed.end(), name) == listed.end()) stale.push_back(entry.path());
  }
  for (const auto& path : stale) std::filesystem::remove(path, ec);
}

// Files read once per load, each checked against the index's step.
class PieceReader {
 public:
  PieceReader(std::string dir, const ShardIndex& index) : dir_(std::move(dir)), index_(index) {}

  // Fills `out` (the box `box` of tensor `name`) from every overlapping piece.
  absl::Status Fill(const std::string& name, const ShardedTensor& entry, const ir::LocalSlice& box, exec::Tensor& out) {
    int64_t copied = 0;
    const int64_t esize = ir::DataTypeSize(entry.type.dtype);
    for (const ShardPiece& piece : entry.pieces) {
      if (!Overlaps(piece.box, box)) continue;
      const std::string record = RecordName(name, piece.box.offsets);
      const std::string path = InDir(dir_, index_.files[static_cast<size_t>(piece.file)]);
      const ir::TensorType type{piece.box.sizes, entry.type.dtype};
      if (piece.byte_offset >= 0) {  // the piece's block alone
        PDIST_ASSIGN_OR_RETURN(std::string block, ReadBlock(piece, path));
        PDIST_ASSIGN_OR_RETURN(CheckpointRecord read, DecodeCheckpointBlock(block, path));
        if (read.name != record || read.type != type) {
          return absl::InvalidArgumentError(absl::StrCat("checkpoint file '", path, "': bytes [", piece.byte_offset, ", ",
                                                         piece.byte_offset + piece.byte_size, ") hold '", read.name, "' ",
                                                         read.type.ToString(), ", its index says '", record, "' ",
                                                         type.ToString()));
        }
        copied += CopyOverlap(read.bytes.data(), piece.box, static_cast<char*>(out.raw()), box, esize);
        continue;
      }
      PDIST_ASSIGN_OR_RETURN(const Checkpoint* ckpt, File(piece.file));
      auto it = ckpt->tensors.find(record);
      if (it == ckpt->tensors.end()) {
        return absl::InvalidArgumentError(absl::StrCat("checkpoint file '", path, "' lacks the piece '", record,
                                                       "' its index lists"));
      }
      if (it->second.type() != type) {
        return absl::InvalidArgumentError(absl::StrCat("checkpoint file '", path, "': piece '", record, "' is ",
                                                       it->second.type().ToString(), ", its index says ",
                                                       ir::ShapeToString(piece.box.sizes)));
      }
      copied += CopyOverlap(static_cast<const char*>(it->second.raw()), piece.box, static_cast<char*>(out.raw()), box, esize);
    }
    if (copied != out.num_elements()) {
      return absl::InvalidArgumentError(absl::StrCat("sharded checkpoint '", dir_, "': the pieces of '", name, "' cover ",
                                                     copied, " of the ", out.num_elements(), " elements needed"));
    }
    return absl::OkStatus();
  }

  // Bytes read from files so far.
  int64_t bytes_read() const { return bytes_read_; }

 private:
  // The block of `piece`, after the file's header (read once per file) has shown the index's step.
  absl::StatusOr<std::string> ReadBlock(const ShardPiece& piece, const std::string& path) {
    if (!headers_checked_.count(piece.file)) {
      PDIST_ASSIGN_OR_RETURN(std::string header, ir::ReadFileRange(path, 0, kCheckpointHeaderBytes));
      bytes_read_ += kCheckpointHeaderBytes;
      PDIST_ASSIGN_OR_RETURN(int64_t step, DecodeCheckpointHeader(header, path));
      PDIST_RETURN_IF_ERROR(CheckStep(step, path));
      headers_checked_.insert(piece.file);
    }
    bytes_read_ += piece.byte_size;
    return ir::ReadFileRange(path, piece.byte_offset, piece.byte_size);
  }

  absl::Status CheckStep(int64_t step, const std::string& path) const {
    if (step == index_.step) return absl::OkStatus();
    return absl::InvalidArgumentError(absl::StrCat("checkpoint file '", path, "' is of step ", step,
                                                   ", its index of step ", index_.step,
                                                   " (a file left from another save?)"));
  }

  static bool Overlaps(const ir::LocalSlice& a, const ir::LocalSlice& b) {
    for (size_t d = 0; d < a.offsets.size(); ++d) {
      if (std::max(a.offsets[d], b.offsets[d]) >= std::min(a.offsets[d] + a.sizes[d], b.offsets[d] + b.sizes[d])) {
        return false;
      }
    }
    return true;
  }

  absl::StatusOr<const Checkpoint*> File(int64_t file) {
    auto it = files_.find(file);
    if (it != files_.end()) return &it->second;
    const std::string path = InDir(dir_, index_.files[static_cast<size_t>(file)]);
    PDIST_ASSIGN_OR_RETURN(Checkpoint ckpt, LoadCheckpoint(path));
    PDIST_RETURN_IF_ERROR(CheckStep(ckpt.step, path));
    std::error_code ec;
    bytes_read_ += static_cast<int64_t>(std::filesystem::file_size(path, ec));
    return &files_.emplace(file, std::move(ckpt)).first->second;
  }

  std::string dir_;
  const ShardIndex& index_;
  std::map<int64_t, Checkpoint> files_;  // read whole (an index without byte ranges)
  std::set<int64_t> headers_checked_;
  int64_t bytes_read_ = 0;
};

constexpr char kSaveLockFile[] = ".pdist-save.lock";

// Makes `dir` (and its parents) unless it is there; a file in the way is named.
absl::Status MakeCheckpointDirectory(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec || !std::filesystem::is_directory(dir, ec)) {
    return absl::UnavailableError(absl::StrCat("cannot make the checkpoint directory '", dir, "'",
                                               ec ? absl::StrCat(": ", ec.message()) : " (a file is in the way)"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<CheckpointSaveLock> CheckpointSaveLock::Take(const std::string& dir) {
  PDIST_RETURN_IF_ERROR(MakeCheckpointDirectory(dir));
  const std::string path = InDir(dir, kSaveLockFile);
  // The directory's own entry, as its other files are (ir::Replace::kEntry): a link (a `cp -rs`
  // copy of a checkpoint links its lock too) or a FIFO is replaced by a file of this directory's.
  ir::RemoveSpecialEntry(path);
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd < 0) {
    return absl::UnavailableError(absl::StrCat("cannot save into '", dir, "': cannot open its lock '", path,
                                               "': ", std::strerror(errno)));
  }
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    ::close(fd);
    if (err == EWOULDBLOCK) {
      return absl::FailedPreconditionError(absl::StrCat(
          "cannot save into '", dir, "': another save into it is running (it holds '", path,
          "'); two saves at once would mix their files: wait for it, or save elsewhere"));
    }
    return absl::UnavailableError(absl::StrCat("cannot save into '", dir, "': cannot lock '", path, "': ",
                                               std::strerror(err)));
  }
  return CheckpointSaveLock(fd);
}

CheckpointSaveLock::~CheckpointSaveLock() {
  if (fd_ >= 0) ::close(fd_);  // drops the lock
}

absl::Status CheckSaveTarget(const std::string& dir) {
  std::error_code ec;
  if (std::filesystem::exists(dir, ec) && !std::filesystem::is_directory(dir, ec)) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", dir, "' is a file: a checkpoint is a directory (each rank writes its pieces)"));
  }
  PDIST_RETURN_IF_ERROR(MakeCheckpointDirectory(dir));
  // One name per process: the ranks check at once, on nodes whose containers may share pids.
  char host[256] = "";
  ::gethostname(host, sizeof(host) - 1);
  const std::string probe = InDir(dir, absl::StrCat(".pdist-write-check-", host, "-", ::getpid()));
  absl::Status writable = ir::WriteFileAtomically(probe, "");
  std::filesystem::remove(probe, ec);
  PDIST_RETURN_IF_ERROR(WithContext(writable, absl::StrCat("'", dir, "' is not writable")));
  // The names a save writes (any rank's, either set, their temporaries): a directory there
  // fails only when the save comes. Anything else there is replaced.
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    const bool written = IsRankFile(name) || name == kShardIndexFile || name == absl::StrCat(kShardIndexFile, ".tmp") ||
                         name == kSaveLockFile;
    // A link is replaced, whatever it points to (ir::Replace::kEntry); a directory cannot be.
    if (written && std::filesystem::is_directory(std::filesystem::symlink_status(entry.path(), ec))) {
      return absl::InvalidArgumentError(absl::StrCat("cannot save into '", dir, "': '", entry.path().string(),
                                                     "' is a directory where the save writes a file"));
    }
  }
  return RankFileSetToWrite(dir).status();
}

absl::StatusOr<RankFileSet> RankFileSetToWrite(const std::string& dir) {
  std::error_code ec;
  if (!std::filesystem::exists(InDir(dir, kShardIndexFile), ec)) return RankFileSet::kPlain;
  absl::StatusOr<ShardIndex> committed = ReadIndex(dir);
  if (!committed.ok()) {
    // Guessing could pick the set it names and overwrite the files of a checkpoint that is fine.
    return absl::FailedPreconditionError(absl::StrCat("cannot save into '", dir, "': its ", kShardIndexFile,
                                                      " cannot be read (", committed.status().message(),
                                                      "); remove the directory or save elsewhere"));
  }
  return !committed->files.empty() && absl::EndsWith(committed->files.front(), kAltSuffix) ? RankFileSet::kPlain
                                                                                           : RankFileSet::kAlt;
}

bool IsRankFileOfShardedCheckpoint(const std::string& path) {
  const std::filesystem::path p(path);
  const std::filesystem::path dir = p.parent_path().empty() ? std::filesystem::path(".") : p.parent_path();
  return IsRankFile(p.filename().string()) && IsShardedCheckpoint(dir.string());
}

bool IsShardedCheckpoint(const std::string& path) {
  std::error_code ec;
  return std::filesystem::is_directory(path, ec) && std::filesystem::is_regular_file(InDir(path, kShardIndexFile), ec);
}

absl::Status WriteRankShards(const ir::Program& global, int64_t rank, const exec::Workspace& local, int64_t step,
                             const std::string& dir, RankFileSet set) {
  PDIST_RETURN_IF_ERROR(MakeCheckpointDirectory(dir));
  const int64_t me = std::max<int64_t>(rank, 0);
  Checkpoint mine{step, {}};
  for (const ir::Value* v : global.block().arguments()) {
    if (!v->is_persistent()) continue;
    PDIST_ASSIGN_OR_RETURN(std::vector<Piece> pieces, PiecesOf(*v));
    for (const Piece& p : pieces) {
      if (p.owner != me) continue;
      auto it = local.find(v->name());
      if (it == local.end() || it->second.shape() != p.box.sizes) {
        return absl::InternalError(absl::StrCat("rank ", me, " owns ", ir::ShapeToString(p.box.sizes), " of '",
                                                v->name(), "' but its workspace holds ",
                                                it == local.end() ? "nothing" : it->second.type().ToString()));
      }
      mine.tensors.emplace(RecordName(v->name(), p.box.offsets), it->second);
    }
  }
  if (mine.tensors.empty()) return absl::OkStatus();  // a replica: others own all it holds
  return SaveCheckpoint(mine, InDir(dir, RankFile(me, set)), ir::Replace::kEntry);
}

absl::Status WriteShardIndex(const ir::Program& global, int64_t world_size, int64_t step, const std::string& dir,
                             RankFileSet set) {
  std::map<int64_t, int64_t> file_of;  // owner rank → index in `files`
  std::vector<std::pair<const ir::Value*, std::vector<Piece>>> all;
  for (const ir::Value* v : global.block().arguments()) {
    if (!v->is_persistent()) continue;
    PDIST_ASSIGN_OR_RETURN(std::vector<Piece> pieces, PiecesOf(*v));
    for (const Piece& p : pieces) file_of.emplace(p.owner, 0);
    all.emplace_back(v, std::move(pieces));
  }
  ShardIndex index;
  index.step = step;
  for (auto& [owner, file] : file_of) {
    if (owner >= std::max<int64_t>(world_size, 1)) {
      return absl::InternalError(absl::StrCat("checkpoint: rank ", owner, " owns pieces but the world has ", world_size));
    }
    file = static_cast<int64_t>(index.files.size());
    index.files.push_back(RankFile(owner, set));
  }
  // Each file's blocks follow its header in record-name order (WriteRankShards saves a map).
  std::map<int64_t, std::map<std::string, ir::TensorType>> records;  // owner → record → type
  for (const auto& [v, pieces] : all) {
    for (const Piece& p : pieces) records[p.owner].emplace(RecordName(v->name(), p.box.offsets), ir::TensorType{p.box.sizes, v->type().dtype});
  }
  std::map<std::pair<int64_t, std::string>, std::pair<int64_t, int64_t>> bytes;  // (owner, record) → (offset, size)
  for (const auto& [owner, blocks] : records) {
    int64_t offset = kCheckpointHeaderBytes;
    for (const auto& [record, type] : blocks) {
      const int64_t size = CheckpointBlockBytes(record, type);
      bytes[{owner, record}] = {offset, size};
      offset += size;
    }
  }
  for (const auto& [v, pieces] : all) {
    ShardedTensor& t = index.tensors[v->name()];
    t.type = v->type();
    t.dist_attr = v->dist_attr() ? v->dist_attr()->ToString() : "whole";
    for (const Piece& p : pieces) {
      const auto [offset, size] = bytes.at({p.owner, RecordName(v->name(), p.box.offsets)});
      t.pieces.push_back({file_of.at(p.owner), p.box, offset, size});
    }
  }
  PDIST_RETURN_IF_ERROR(
      ir::WriteFileAtomically(InDir(dir, kShardIndexFile), EncodeShardIndex(index), ir::Replace::kEntry));
  RemoveUnlisted(dir, index.files);
  return absl::OkStatus();
}

absl::StatusOr<Checkpoint> ReadShardsFor(const std::string& dir, const ir::Program& local_program, int64_t rank,
                                         const ir::Program& global, int64_t* bytes_read) {
  PDIST_ASSIGN_OR_RETURN(ShardIndex index, ReadIndex(dir));
  PieceReader reader(dir, index);
  Checkpoint out{index.step, {}};
  const std::string source = absl::StrCat("sharded checkpoint '", dir, "'");
  for (const auto& [name, entry] : index.tensors) {
    const ir::Value* v = global.FindArgument(name);
    if (v == nullptr || !v->is_persistent()) {
      return UnknownCheckpointTensor(source, name, global);
    }
  }
  for (const ir::Value* v : local_program.block().arguments()) {
    if (!v->is_persistent()) continue;
    const bool pieced = rank >= 0 && v->dist_attr().has_value();
    const ir::Shape global = pieced ? ir::GlobalShapeOf(*v->dist_attr(), v->type().shape) : v->type().shape;
    auto it = index.tensors.find(v->name());
    if (it == index.tensors.end()) return absl::InvalidArgumentError(absl::StrCat(source, " has no tensor '", v->name(), "'"));
    const ir::TensorType whole{global, v->type().dtype};
    if (it->second.type != whole) return CheckpointTypeMismatch(source, v->name(), it->second.type, whole);
    ir::LocalSlice box = WholeBox(global);
    if (pieced) {
      PDIST_ASSIGN_OR_RETURN(box, ir::SliceOf(*v->dist_attr(), global, rank));
    }
    exec::Tensor t = exec::Tensor::Empty({box.sizes, v->type().dtype});
    PDIST_RETURN_IF_ERROR(reader.Fill(v->name(), it->second, box, t));
    out.tensors.emplace(v->name(), std::move(t));
  }
  if (bytes_read != nullptr) *bytes_read = reader.bytes_read();
  return out;
}

absl::StatusOr<Checkpoint> ReadShardedWhole(const std::string& dir) {
  PDIST_ASSIGN_OR_RETURN(ShardIndex index, ReadIndex(dir));
  PieceReader reader(dir, index);
  Checkpoint out{index.step, {}};
  for (const auto& [name, entry] : index.tensors) {
    exec::Tensor t = exec::Tensor::Empty(entry.type);
    PDIST_RETURN_IF_ERROR(reader.Fill(name, entry, WholeBox(entry.type.shape), t));
    out.tensors.emplace(name, std::move(t));
  }
  return out;
}

}  // namespace pdist::engine

// The checkpoint format: checksummed blocks, every field checked before use.
#include "engine/checkpoint_format.h"

#include <cstring>
#include <set>

#include "absl/strings/str_cat.h"
#include "ir/checksum.h"
#include "ir/status.h"
#include "ir/verifier.h"

namespace pdist::engine {
namespace {

constexpr char kMagic[8] = {'P', 'D', 'I', 'S', 'T', 'C', 'K', 'P'};
constexpr uint32_t kVersion = 2;
constexpr uint32_t kMaxNameBytes = 4096;
constexpr uint32_t kMaxRank = 16;

template <typename T>
void Put(std::string& out, T value) {
  out.append(reinterpret_cast<const char*>(&value), sizeof(T));
}

// Appends the checksum of out[from, end).
void Seal(std::string& out, size_t from) { Put<uint64_t>(out, ir::Fnv1a64(std::string_view(out).substr(from))); }

class Reader {
 public:
  Reader(std::string_view bytes, const std::string& path) : bytes_(bytes), path_(path) {}
  template <typename T>
  absl::Status Get(T& value) {
    return Bytes(&value, sizeof(T));
  }
  absl::Status Bytes(void* dst, size_t n) {
    if (n > remaining()) return Error(absl::StrCat("is truncated at byte ", pos_, " (needs ", n, " more)"));
    std::memcpy(dst, bytes_.data() + pos_, n);
    pos_ += n;
    return absl::OkStatus();
  }
  // Reads a stored checksum and compares it with that of bytes [from, here before the read).
  absl::Status Check(size_t from, const std::string& what) {
    const uint64_t want = ir::Fnv1a64(bytes_.substr(from, pos_ - from));
    uint64_t stored = 0;
    PDIST_RETURN_IF_ERROR(Get(stored));
    if (stored != want) return Error(absl::StrCat("is corrupted: the checksum of ", what, " does not match"));
    return absl::OkStatus();
  }
  absl::Status Error(const std::string& what) const {
    return absl::InvalidArgumentError(absl::StrCat("checkpoint '", path_, "' ", what));
  }
  // The next `n` bytes, consumed (the caller checked that they are there).
  std::string_view Take(size_t n) {
    std::string_view view = bytes_.substr(pos_, n);
    pos_ += n;
    return view;
  }
  size_t pos() const { return pos_; }
  size_t remaining() const { return bytes_.size() - pos_; }

 private:
  std::string_view bytes_;
  const std::string& path_;
  size_t pos_ = 0;
};

// One tensor block; `checked` (version 2) reads and verifies its checksum.
absl::Status ReadBlock(Reader& r, bool checked, std::set<std::string>& names, CheckpointContents& out) {
  const size_t start = r.pos();
  uint32_t name_len = 0, rank = 0;
  uint8_t dtype = 0;
  PDIST_RETURN_IF_ERROR(r.Get(name_len));
  if (name_len == 0 || name_len > kMaxNameBytes) {
    return r.Error(absl::StrCat("has a tensor name of ", name_len, " bytes at byte ", start, " (1 to ", kMaxNameBytes,
                                " allowed)"));
  }
  std::string name(name_len, '\0');
  PDIST_RETURN_IF_ERROR(r.Bytes(name.data(), name_len));
  PDIST_RETURN_IF_ERROR(r.Get(dtype));
  PDIST_RETURN_IF_ERROR(r.Get(rank));
  if (dtype > static_cast<uint8_t>(ir::DataType::kBool) || rank > kMaxRank) {
    return r.Error(absl::StrCat("has a bad header for tensor '", name, "' (dtype code ", dtype, ", rank ", rank, ")"));
  }
  ir::TensorType type{ir::Shape(rank), static_cast<ir::DataType>(dtype)};
  for (uint32_t d = 0; d < rank; ++d) PDIST_RETURN_IF_ERROR(r.Get(type.shape[d]));
  if (absl::Status valid = ir::CheckTensorType(type); !valid.ok()) {
    return r.Error(absl::StrCat("has a bad shape for tensor '", name, "': ", valid.message()));
  }
  if (static_cast<uint64_t>(type.num_bytes()) > r.remaining()) {
    return r.Error(absl::StrCat("is truncated in tensor '", name, "' (", type.ToString(), " needs ", type.num_bytes(),
                                " bytes, ", r.remaining(), " are left)"));
  }
  const std::string_view data = r.Take(static_cast<size_t>(type.num_bytes()));
  if (checked) PDIST_RETURN_IF_ERROR(r.Check(start, absl::StrCat("tensor '", name, "'")));
  if (!names.insert(name).second) return r.Error(absl::StrCat("holds tensor '", name, "' twice"));
  out.records.push_back({std::move(name), std::move(type), data});
  return absl::OkStatus();
}

// Magic, version, step and count (and the header's checksum from version 2).
struct Header {
  bool checked = false;
  uint64_t step = 0, count = 0;
};

absl::StatusOr<Header> ReadHeader(Reader& r, const std::string& path) {
  char magic[8];
  if (!r.Bytes(magic, sizeof(magic)).ok() || std::memcmp(magic, kMagic, sizeof(kMagic)) != 0) {
    return absl::InvalidArgumentError(absl::StrCat("'", path, "' is not a pdist checkpoint"));
  }
  uint32_t version = 0;
  Header h;
  PDIST_RETURN_IF_ERROR(r.Get(version));
  if (version != 1 && version != kVersion) {
    return r.Error(absl::StrCat("has version ", version, "; this build reads versions 1 and ", kVersion));
  }
  h.checked = version >= 2;
  PDIST_RETURN_IF_ERROR(r.Get(h.step));
  PDIST_RETURN_IF_ERROR(r.Get(h.count));
  if (h.checked) PDIST_RETURN_IF_ERROR(r.Check(0, "the header"));
  if (h.step > static_cast<uint64_t>(kMaxCheckpointStep)) {
    return r.Error(absl::StrCat("has step ", h.step, ", beyond the limit of ", kMaxCheckpointStep));
  }
  return h;
}

}  // namespace

int64_t CheckpointBlockBytes(const std::string& name, const ir::TensorType& type) {
  return 4 + static_cast<int64_t>(name.size()) + 1 + 4 + 8 * static_cast<int64_t>(type.shape.size()) +
         type.num_bytes() + 8;
}

absl::StatusOr<int64_t> DecodeCheckpointHeader(std::string_view bytes, const std::string& path) {
  Reader r(bytes, path);
  PDIST_ASSIGN_OR_RETURN(Header h, ReadHeader(r, path));
  if (!h.checked) return r.Error("is version 1 (no checksums): read it whole");
  return static_cast<int64_t>(h.step);
}

absl::StatusOr<CheckpointRecord> DecodeCheckpointBlock(std::string_view bytes, const std::string& path) {
  Reader r(bytes, path);
  std::set<std::string> names;
  CheckpointContents one;
  PDIST_RETURN_IF_ERROR(ReadBlock(r, /*checked=*/true, names, one));
  if (r.remaining() != 0) return r.Error(absl::StrCat("has ", r.remaining(), " bytes after the block it was asked for"));
  return std::move(one.records.front());
}

absl::StatusOr<std::string> EncodeCheckpoint(int64_t step, const std::vector<CheckpointRecord>& records) {
  if (step < 0 || step > kMaxCheckpointStep) {
    return absl::InvalidArgumentError(absl::StrCat("checkpoint step ", step, " is outside [0, ", kMaxCheckpointStep, "]"));
  }
  std::string out(kMagic, sizeof(kMagic));
  Put<uint32_t>(out, kVersion);
  Put<uint64_t>(out, static_cast<uint64_t>(step));
  Put<uint64_t>(out, records.size());
  Seal(out, 0);
  for (const CheckpointRecord& record : records) {
    const size_t start = out.size();
    Put<uint32_t>(out, static_cast<uint32_t>(record.name.size()));
    out += record.name;
    Put<uint8_t>(out, static_cast<uint8_t>(record.type.dtype));
    Put<uint32_t>(out, static_cast<uint32_t>(record.type.shape.size()));
    for (int64_t d : record.type.shape) Put<int64_t>(out, d);
    out.append(record.bytes);
    Seal(out, start);
  }
  return out;
}

absl::StatusOr<CheckpointContents> DecodeCheckpoint(std::string_view bytes, const std::string& path) {
  Reader r(bytes, path);
  PDIST_ASSIGN_OR_RETURN(const Header h, ReadHeader(r, path));
  const uint64_t count = h.count;
  // Each block takes at least 4 + 1 + 1 + 4 bytes (+ 8 checked): more than that is a lie.
  if (count > r.remaining() / 10) return r.Error(absl::StrCat("claims ", count, " tensors in ", r.remaining(), " bytes"));
  CheckpointContents out;
  out.step = static_cast<int64_t>(h.step);
  std::set<std::string> names;
  for (uint64_t i = 0; i < count; ++i) PDIST_RETURN_IF_ERROR(ReadBlock(r, h.checked, names, out));
  if (r.remaining() != 0) return r.Error(absl::StrCat("has ", r.remaining(), " bytes after its last tensor"));
  return out;
}

}  // namespace pdist::engine

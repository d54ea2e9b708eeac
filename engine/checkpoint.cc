// Checkpoint (de)serialisation.
#include "engine/checkpoint.h"

#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "ir/input_file.h"
#include "ir/status.h"

namespace pdist::engine {

namespace {

constexpr char kMagic[8] = {'P', 'D', 'I', 'S', 'T', 'C', 'K', 'P'};
constexpr uint32_t kVersion = 1;

template <typename T>
void Put(std::string& out, T value) {
  out.append(reinterpret_cast<const char*>(&value), sizeof(T));
}

class Reader {
 public:
  Reader(const std::string& bytes, const std::string& path) : bytes_(bytes), path_(path) {}
  template <typename T>
  absl::Status Get(T& value) {
    return Bytes(&value, sizeof(T));
  }
  absl::Status Bytes(void* dst, size_t n) {
    if (n > bytes_.size() - pos_) {
      return absl::InvalidArgumentError(
          absl::StrCat("checkpoint '", path_, "' is truncated at byte ", pos_, " (needs ", n, " more)"));
    }
    std::memcpy(dst, bytes_.data() + pos_, n);
    pos_ += n;
    return absl::OkStatus();
  }
  size_t remaining() const { return bytes_.size() - pos_; }

 private:
  const std::string& bytes_;
  const std::string& path_;
  size_t pos_ = 0;
};

#define PDIST_CKPT_READ(reader, value)                \
  do {                                                \
    absl::Status s_ = (reader).Get(value);            \
    if (!s_.ok()) return s_;                          \
  } while (false)

}  // namespace

absl::Status SaveCheckpoint(const Checkpoint& checkpoint, const std::string& path) {
  std::string out(kMagic, sizeof(kMagic));
  Put<uint32_t>(out, kVersion);
  Put<uint64_t>(out, static_cast<uint64_t>(checkpoint.step));
  Put<uint64_t>(out, checkpoint.tensors.size());
  for (const auto& [name, t] : checkpoint.tensors) {
    Put<uint32_t>(out, static_cast<uint32_t>(name.size()));
    out += name;
    Put<uint8_t>(out, static_cast<uint8_t>(t.dtype()));
    Put<uint32_t>(out, static_cast<uint32_t>(t.shape().size()));
    for (int64_t d : t.shape()) Put<int64_t>(out, d);
    out.append(static_cast<const char*>(t.raw()), static_cast<size_t>(t.num_bytes()));
  }
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!f) return absl::InvalidArgumentError(absl::StrCat("cannot write checkpoint '", tmp, "'"));
    f.write(out.data(), static_cast<std::streamsize>(out.size()));
    if (!f) return absl::InternalError(absl::StrCat("write to '", tmp, "' failed (disk full?)"));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    return absl::InternalError(absl::StrCat("cannot rename '", tmp, "' to '", path, "'"));
  }
  return absl::OkStatus();
}

absl::StatusOr<Checkpoint> LoadCheckpoint(const std::string& path) {
  PDIST_RETURN_IF_ERROR(WithContext(ir::CheckReadableFile(path), "checkpoint"));
  std::ifstream f(path, std::ios::binary);
  if (!f) return absl::NotFoundError(absl::StrCat("checkpoint '", path, "' cannot be opened"));
  std::stringstream buffer;
  buffer << f.rdbuf();
  const std::string bytes = buffer.str();
  Reader r(bytes, path);
  char magic[8];
  if (!r.Bytes(magic, sizeof(magic)).ok() || std::memcmp(magic, kMagic, sizeof(kMagic)) != 0) {
    return absl::InvalidArgumentError(absl::StrCat("'", path, "' is not a pdist checkpoint"));
  }
  uint32_t version = 0;
  uint64_t step = 0, count = 0;
  PDIST_CKPT_READ(r, version);
  if (version != kVersion) {
    return absl::InvalidArgumentError(absl::StrCat("checkpoint '", path, "' has version ", version, ", expected ", kVersion));
  }
  PDIST_CKPT_READ(r, step);
  PDIST_CKPT_READ(r, count);
  Checkpoint ckpt;
  ckpt.step = static_cast<int64_t>(step);
  for (uint64_t i = 0; i < count; ++i) {
    uint32_t name_len = 0, rank = 0;
    uint8_t dtype = 0;
    PDIST_CKPT_READ(r, name_len);
    if (name_len > r.remaining()) return absl::InvalidArgumentError(absl::StrCat("checkpoint '", path, "' is truncated"));
    std::string name(name_len, '\0');
    if (absl::Status s = r.Bytes(name.data(), name_len); !s.ok()) return s;
    PDIST_CKPT_READ(r, dtype);
    PDIST_CKPT_READ(r, rank);
    if (dtype > static_cast<uint8_t>(ir::DataType::kBool) || rank > 16) {
      return absl::InvalidArgumentError(absl::StrCat("checkpoint '", path, "': tensor '", name, "' has a bad header"));
    }
    ir::TensorType type{ir::Shape(rank), static_cast<ir::DataType>(dtype)};
    for (uint32_t d = 0; d < rank; ++d) {
      PDIST_CKPT_READ(r, type.shape[d]);
      if (type.shape[d] < 0) return absl::InvalidArgumentError(absl::StrCat("checkpoint '", path, "': bad shape"));
    }
    if (static_cast<uint64_t>(type.num_bytes()) > r.remaining()) {
      return absl::InvalidArgumentError(absl::StrCat("checkpoint '", path, "' is truncated in tensor '", name, "'"));
    }
    exec::Tensor t = exec::Tensor::Empty(type);
    absl::Status s = r.Bytes(t.raw(), static_cast<size_t>(type.num_bytes()));
    if (!s.ok()) return s;
    ckpt.tensors.emplace(std::move(name), std::move(t));
  }
  return ckpt;
}

}  // namespace pdist::engine

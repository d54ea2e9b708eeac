// InMemoryStore: a map under a mutex, with waiting readers.
#include "executor/comm/kv_store.h"

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

#include <unistd.h>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace pdist::exec::comm {

absl::Status InMemoryStore::Set(const std::string& key, const std::string& value) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    values_[key] = value;
  }
  changed_.notify_all();
  return absl::OkStatus();
}

absl::StatusOr<std::string> InMemoryStore::Get(const std::string& key, absl::Duration timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  // An infinite timeout waits without a deadline (its nanoseconds would overflow).
  const auto present = [&] { return values_.count(key) > 0; };
  bool found = true;
  if (timeout == absl::InfiniteDuration()) {
    changed_.wait(lock, present);
  } else {
    found = changed_.wait_for(lock, absl::ToChronoNanoseconds(timeout), present);
  }
  if (!found) {
    return absl::DeadlineExceededError(absl::StrCat("store: no rank set '", key, "' within ", absl::FormatDuration(timeout)));
  }
  return values_.at(key);
}

absl::StatusOr<std::optional<std::string>> InMemoryStore::TryGet(const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = values_.find(key);
  if (it == values_.end()) return std::nullopt;
  return it->second;
}

std::string DirectoryStore::PathOf(const std::string& key) const {
  // Hex keeps any key ("nccl/world/{0,2}/id") a single file name; a key too long for one (file
  // names stop at 255 bytes) is named by its 64-bit FNV-1a hash, and the file holds the key too
  // (Set, TryGet), so a collision is an error rather than another key's value.
  const std::string full = absl::StrCat(prefix_, "/", key);
  if (full.size() <= 100) return absl::StrCat(dir_, "/", absl::BytesToHexString(full));
  uint64_t hash = 14695981039346656037ull;
  for (unsigned char c : full) hash = (hash ^ c) * 1099511628211ull;
  return absl::StrCat(dir_, "/h", absl::Hex(hash, absl::kZeroPad16), "-", full.size());
}

absl::Status DirectoryStore::Set(const std::string& key, const std::string& value) {
  static std::atomic<int64_t> serial{0};
  char host[64] = {};
  gethostname(host, sizeof(host) - 1);
  const std::string path = PathOf(key);
  // Unique across processes and nodes sharing the directory.
  const std::string temporary = absl::StrCat(path, ".tmp.", host, ".", getpid(), ".", serial++);
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    const std::string header = absl::StrCat(key.size(), ":", key);
    out.write(header.data(), static_cast<std::streamsize>(header.size()));
    out.write(value.data(), static_cast<std::streamsize>(value.size()));
    if (!out.good()) {
      std::remove(temporary.c_str());
      return absl::UnavailableError(absl::StrCat("store: cannot write '", temporary, "' for key '", key, "'"));
    }
  }
  if (std::rename(temporary.c_str(), path.c_str()) != 0) {
    const int error = errno;
    std::remove(temporary.c_str());
    return absl::UnavailableError(absl::StrCat("store: cannot rename '", temporary, "' to '", path, "' for key '", key,
                                               "': ", std::strerror(error)));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::optional<std::string>> DirectoryStore::TryGet(const std::string& key) {
  const std::string path = PathOf(key);
  errno = 0;
  std::ifstream in(path, std::ios::binary);
  if (!in.is_open()) {
    if (errno == ENOENT || errno == 0) return std::nullopt;  // not set yet
    return absl::UnavailableError(absl::StrCat("store: cannot open '", path, "' for key '", key, "': ",
                                               std::strerror(errno)));
  }
  std::ostringstream contents;
  contents << in.rdbuf();
  if (in.bad()) return absl::UnavailableError(absl::StrCat("store: cannot read '", path, "' for key '", key, "'"));
  const std::string text = contents.str();
  const std::string header = absl::StrCat(key.size(), ":", key);
  if (text.compare(0, header.size(), header) != 0) {
    return absl::InternalError(absl::StrCat("store: '", path, "' holds another key than '", key, "'"));
  }
  return text.substr(header.size());
}

absl::StatusOr<std::string> DirectoryStore::Get(const std::string& key, absl::Duration timeout) {
  const absl::Time deadline = timeout == absl::InfiniteDuration() ? absl::InfiniteFuture() : absl::Now() + timeout;
  while (true) {
    absl::StatusOr<std::optional<std::string>> value = TryGet(key);
    if (!value.ok()) return value.status();
    if (value->has_value()) return **value;
    if (absl::Now() > deadline) {
      return absl::DeadlineExceededError(absl::StrCat("store: no rank set '", key, "' within ",
                                                      absl::FormatDuration(timeout), " (directory ", dir_, ")"));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

}  // namespace pdist::exec::comm

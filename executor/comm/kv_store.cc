// InMemoryStore: a map under a mutex, with waiting readers.
#include "executor/comm/kv_store.h"

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

#include <unistd.h>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

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
  // Hex keeps any key ("nccl/world/{0,2}/id") a single file name.
  return absl::StrCat(dir_, "/", absl::BytesToHexString(absl::StrCat(prefix_, "/", key)));
}

absl::Status DirectoryStore::Set(const std::string& key, const std::string& value) {
  static std::atomic<int64_t> serial{0};
  const std::string path = PathOf(key);
  const std::string temporary = absl::StrCat(path, ".tmp.", getpid(), ".", serial++);
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    out.write(value.data(), static_cast<std::streamsize>(value.size()));
    if (!out.good()) {
      return absl::UnavailableError(absl::StrCat("store: cannot write '", temporary, "' for key '", key, "'"));
    }
  }
  if (std::rename(temporary.c_str(), path.c_str()) != 0) {
    return absl::UnavailableError(absl::StrCat("store: cannot rename '", temporary, "' to '", path, "' for key '", key,
                                               "': ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::optional<std::string>> DirectoryStore::TryGet(const std::string& key) {
  std::ifstream in(PathOf(key), std::ios::binary);
  if (!in.is_open()) return std::nullopt;
  std::ostringstream value;
  value << in.rdbuf();
  return value.str();
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

// InMemoryStore: a map under a mutex, with waiting readers.
#include "executor/comm/kv_store.h"

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
  const bool found = changed_.wait_for(lock, absl::ToChronoNanoseconds(timeout), [&] { return values_.count(key) > 0; });
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

}  // namespace pdist::exec::comm

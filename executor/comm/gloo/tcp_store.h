// TcpStore: a small key-value store over TCP, for Gloo rendezvous at MASTER_ADDR:MASTER_PORT.
//
// This Gloo has no TCP store (FileStore, HashStore, RedisStore only). Rank 0 serves the keys
// from a thread; every rank, rank 0 included, is a client on one connection.
//
//   auto store = TcpStore::Create("10.0.0.1", 29500, /*serve=*/rank == 0, absl::Seconds(300));
//   (*store)->set("rank/0", bytes);  (*store)->wait({"rank/1"});  auto v = (*store)->get("rank/1");
//
// Store methods throw gloo::IoException on failure (Gloo's convention; the backend catches it).
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <gloo/rendezvous/store.h>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace pdist::exec::comm {

class TcpStore : public gloo::rendezvous::Store {
 public:
  // Connects to host:port (retrying until `timeout`); with `serve`, first listens on `port`.
  static absl::StatusOr<std::shared_ptr<TcpStore>> Create(const std::string& host, int port, bool serve,
                                                          absl::Duration timeout);
  ~TcpStore() override;

  void set(const std::string& key, const std::vector<char>& data) override;
  // Waits (up to the store's timeout) for `key`, then returns its value.
  std::vector<char> get(const std::string& key) override;
  void wait(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) override;

 private:
  explicit TcpStore(absl::Duration timeout) : timeout_(timeout) {}
  // One request/reply on the client connection; returns whether the key was found (get).
  bool Request(char op, const std::string& key, const std::vector<char>& value, std::vector<char>* reply);
  void Serve();
  void Handle(int fd);

  absl::Duration timeout_;
  std::string where_;  // host:port, for errors
  int fd_ = -1;        // client connection
  std::mutex client_mu_;
  // Server side (rank 0 only).
  int listen_fd_ = -1;
  std::atomic<bool> stop_{false};
  std::thread accept_thread_;
  std::mutex server_mu_;
  std::vector<std::thread> handlers_;
  std::vector<int> handler_fds_;
  std::map<std::string, std::vector<char>> data_;
};

}  // namespace pdist::exec::comm

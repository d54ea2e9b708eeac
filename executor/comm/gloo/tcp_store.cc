// TcpStore: length-prefixed set/get requests over one TCP connection per rank; rank 0 serves.
#include "executor/comm/gloo/tcp_store.h"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>

#include <gloo/common/error.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace pdist::exec::comm {
namespace {

// Wire format: request = op (1 byte: 'S' set, 'G' get) · key length (u32) · key · value length
// (u32) · value; reply = found (1 byte) · value length (u32) · value.
bool SendAll(int fd, const void* data, size_t n) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t k = ::send(fd, p, n, MSG_NOSIGNAL);
    if (k <= 0) return false;
    p += k;
    n -= k;
  }
  return true;
}
bool RecvAll(int fd, void* data, size_t n) {
  char* p = static_cast<char*>(data);
  while (n > 0) {
    const ssize_t k = ::recv(fd, p, n, 0);
    if (k <= 0) return false;
    p += k;
    n -= k;
  }
  return true;
}
bool SendBlob(int fd, const char* data, uint32_t n) { return SendAll(fd, &n, 4) && SendAll(fd, data, n); }
bool RecvBlob(int fd, std::string* out) {
  uint32_t n = 0;
  if (!RecvAll(fd, &n, 4)) return false;
  out->resize(n);
  return RecvAll(fd, out->data(), n);
}

}  // namespace

absl::StatusOr<std::shared_ptr<TcpStore>> TcpStore::Create(const std::string& host, int port, bool serve,
                                                          absl::Duration timeout) {
  std::shared_ptr<TcpStore> store(new TcpStore(timeout));
  store->where_ = absl::StrCat(host, ":", port);
  if (serve) {
    store->listen_fd_ = ::socket(AF_INET6, SOCK_STREAM, 0);
    int one = 1, zero = 0;
    ::setsockopt(store->listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    ::setsockopt(store->listen_fd_, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);  // v4 too
    sockaddr_in6 addr{};
    addr.sin6_family = AF_INET6;
    addr.sin6_addr = in6addr_any;
    addr.sin6_port = htons(port);
    if (::bind(store->listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
        ::listen(store->listen_fd_, 128) != 0) {
      return absl::UnavailableError(absl::StrCat("TCP store: cannot listen on port ", port, ": ",
                                                 std::strerror(errno), " (is MASTER_PORT in use?)"));
    }
    store->accept_thread_ = std::thread([s = store.get()] { s->Serve(); });
  }
  // Connect, retrying: the server (rank 0) may start after us.
  const absl::Time deadline = absl::Now() + timeout;
  addrinfo hints{}, *found = nullptr;
  hints.ai_socktype = SOCK_STREAM;
  if (::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found) != 0 || found == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("TCP store: cannot resolve MASTER_ADDR '", host, "'"));
  }
  std::unique_ptr<addrinfo, void (*)(addrinfo*)> guard(found, ::freeaddrinfo);
  for (;;) {
    const int fd = ::socket(found->ai_family, SOCK_STREAM, 0);
    if (::connect(fd, found->ai_addr, found->ai_addrlen) == 0) {
      int one = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      store->fd_ = fd;
      return store;
    }
    ::close(fd);
    if (absl::Now() > deadline) {
      return absl::DeadlineExceededError(absl::StrCat("TCP store: no server at ", store->where_, " after ",
                                                      absl::FormatDuration(timeout), " (rank 0 serves it)"));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

TcpStore::~TcpStore() {
  if (fd_ >= 0) ::close(fd_);
  stop_ = true;
  if (accept_thread_.joinable()) accept_thread_.join();
  {
    std::lock_guard<std::mutex> lock(server_mu_);
    for (int fd : handler_fds_) ::shutdown(fd, SHUT_RDWR);  // wakes the handlers' recv
  }
  for (auto& t : handlers_) t.join();
  for (int fd : handler_fds_) ::close(fd);
  if (listen_fd_ >= 0) ::close(listen_fd_);
}

void TcpStore::Serve() {
  while (!stop_) {
    pollfd p{listen_fd_, POLLIN, 0};
    if (::poll(&p, 1, 50) <= 0) continue;  // wake up now and then to see stop_
    const int fd = ::accept(listen_fd_, nullptr, nullptr);
    if (fd < 0) continue;
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    std::lock_guard<std::mutex> lock(server_mu_);
    handler_fds_.push_back(fd);
    handlers_.emplace_back([this, fd] { Handle(fd); });
  }
}

void TcpStore::Handle(int fd) {
  for (;;) {
    char op = 0;
    std::string key, value;
    if (!RecvAll(fd, &op, 1) || !RecvBlob(fd, &key) || !RecvBlob(fd, &value)) return;
    char found = 1;
    {
      std::lock_guard<std::mutex> lock(server_mu_);
      if (op == 'S') {
        data_[key].assign(value.begin(), value.end());
        value.clear();
      } else {
        auto it = data_.find(key);
        found = it != data_.end();
        value = found ? std::string(it->second.begin(), it->second.end()) : "";
      }
    }
    if (!SendAll(fd, &found, 1) || !SendBlob(fd, value.data(), value.size())) return;
  }
}

bool TcpStore::Request(char op, const std::string& key, const std::vector<char>& value, std::vector<char>* reply) {
  std::lock_guard<std::mutex> lock(client_mu_);
  char found = 0;
  std::string data;
  if (!SendAll(fd_, &op, 1) || !SendBlob(fd_, key.data(), key.size()) ||
      !SendBlob(fd_, value.data(), value.size()) || !RecvAll(fd_, &found, 1) || !RecvBlob(fd_, &data)) {
    throw gloo::IoException(absl::StrCat("TCP store at ", where_, ": connection lost"));
  }
  if (reply != nullptr) reply->assign(data.begin(), data.end());
  return found != 0;
}

void TcpStore::set(const std::string& key, const std::vector<char>& data) { Request('S', key, data, nullptr); }

std::vector<char> TcpStore::get(const std::string& key) {
  wait({key});
  std::vector<char> value;
  Request('G', key, {}, &value);
  return value;
}

void TcpStore::wait(const std::vector<std::string>& keys) {
  wait(keys, std::chrono::milliseconds(absl::ToInt64Milliseconds(timeout_)));
}

void TcpStore::wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) {
  // Polling keeps the server a plain map; rendezvous waits are few and short.
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (const auto& key : keys) {
    while (!Request('G', key, {}, nullptr)) {
      if (std::chrono::steady_clock::now() > deadline) {
        throw gloo::IoException(absl::StrCat("TCP store at ", where_, ": timed out waiting for key(s) ",
                                             absl::StrJoin(keys, ", ")));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
}

}  // namespace pdist::exec::comm

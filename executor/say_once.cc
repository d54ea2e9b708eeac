#include "executor/say_once.h"

#include <cstdio>
#include <mutex>
#include <set>

namespace pdist::exec {

void SayOnce(const std::string& message) {
  static std::mutex mu;
  static auto* said = new std::set<std::string>();  // for the process's life
  std::lock_guard<std::mutex> lock(mu);
  if (said->insert(message).second) std::fprintf(stderr, "pdist: %s\n", message.c_str());
}

}  // namespace pdist::exec

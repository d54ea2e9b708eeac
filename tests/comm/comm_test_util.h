// Test helpers for communicators: run one function per rank on its own thread.
#pragma once

#include <functional>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "executor/tensor.h"

namespace pdist::exec::comm::testing {

// Runs fn(rank) on `n` threads and returns each rank's status.
inline std::vector<absl::Status> RunRanks(int n, const std::function<absl::Status(int)>& fn) {
  std::vector<absl::Status> status(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) threads.emplace_back([&, r] { status[r] = fn(r); });
  for (auto& t : threads) t.join();
  return status;
}

// f32 (or another dtype) tensor of shape `shape` with element i = f(i).
template <typename F>
Tensor Filled(const ir::Shape& shape, F f, ir::DataType dtype = ir::DataType::kFloat32) {
  std::vector<double> v(ir::NumElements(shape));
  for (size_t i = 0; i < v.size(); ++i) v[i] = f(static_cast<int64_t>(i));
  return TensorFromDoubles({shape, dtype}, v);
}

}  // namespace pdist::exec::comm::testing

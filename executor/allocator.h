// Allocator: where a device's tensor bytes come from, with the numbers a user tuning memory
// needs (bytes in use and their peak; bytes held from the system, cache included, and theirs).
//
// Every Tensor buffer is allocated and freed through its device's allocator
// (KernelContext::AllocateOutput uses the context's). An allocation that cannot be served throws
// OutOfMemory — a std::bad_alloc whose message names the device, the size and the allocator's
// state — and the executor turns it into a ResourceExhausted error naming the op.
//
// Backends: HostAllocator (below: 64-byte aligned heap blocks) and executor/cuda's
// stream-ordered caching allocator. `stream` is the stream whose work the block is ordered
// after (nullptr: the host's order); the host ignores it. A device backend's streams live as
// long as the process, so a block may outlive the run that allocated it.
#pragma once

#include <atomic>
#include <cstdint>
#include <new>
#include <string>

#include "executor/device.h"

namespace pdist::exec {

class Stream;  // executor/stream.h

struct AllocatorStats {
  int64_t in_use = 0;         // bytes of live tensors
  int64_t peak_in_use = 0;
  int64_t reserved = 0;       // bytes held from the system (in use + cached)
  int64_t peak_reserved = 0;
  int64_t allocations = 0;    // calls to Allocate
  int64_t cache_hits = 0;     // of those, served from the allocator's own cache

  // The share of reserved bytes no live tensor uses (0 when nothing is reserved).
  double fragmentation() const { return reserved > 0 ? 1.0 - static_cast<double>(in_use) / static_cast<double>(reserved) : 0; }
  // "in use 1.2 GB (peak 3.4 GB), reserved 4.0 GB (peak 4.0 GB), 120 allocations, 95% from the cache".
  std::string ToString() const;
};

class OutOfMemory : public std::bad_alloc {
 public:
  explicit OutOfMemory(std::string message) : message_(std::move(message)) {}
  const char* what() const noexcept override { return message_.c_str(); }

 private:
  std::string message_;
};

class Allocator {
 public:
  virtual ~Allocator() = default;
  virtual Device device() const = 0;
  // At least `bytes` bytes (a block of 0 bytes is still a distinct address), aligned to 64.
  // Throws OutOfMemory.
  virtual void* Allocate(int64_t bytes, Stream* stream) = 0;
  // Returns a block from Allocate of the same size; reusable by work ordered after `stream`'s.
  virtual void Free(void* block, int64_t bytes, Stream* stream) = 0;
  virtual AllocatorStats stats() const = 0;
};

// The host's allocator: the C heap, tuned so that a training step reuses the last step's pages.
// Each host device (executor/device.h: "cpu:N") has its own, so its statistics are its own.
class HostAllocator final : public Allocator {
 public:
  static HostAllocator& Instance();  // the host's (Of(cpu), looked up once)
  // The allocator of host device `device` (created on first use, never destroyed).
  static HostAllocator& Of(const Device& device);
  Device device() const override { return device_; }
  void* Allocate(int64_t bytes, Stream* stream) override;
  void Free(void* block, int64_t bytes, Stream* stream) override;
  AllocatorStats stats() const override;

 private:
  explicit HostAllocator(Device device);
  const Device device_;
  std::atomic<int64_t> in_use_{0}, peak_in_use_{0}, allocations_{0};
};

}  // namespace pdist::exec

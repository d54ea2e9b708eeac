// HostAllocator and the allocator statistics' text.
#include "executor/allocator.h"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <mutex>

#include "absl/strings/str_format.h"

#ifdef __GLIBC__
#include <malloc.h>
#endif

namespace pdist::exec {

std::string AllocatorStats::ToString() const {
  auto gb = [](int64_t bytes) { return static_cast<double>(bytes) / 1e9; };
  std::string out = absl::StrFormat("in use %.3g GB (peak %.3g GB), reserved %.3g GB (peak %.3g GB), %d allocations",
                                    gb(in_use), gb(peak_in_use), gb(reserved), gb(peak_reserved), allocations);
  if (allocations > 0 && cache_hits > 0) {
    absl::StrAppendFormat(&out, ", %.0f%% from the cache", 100.0 * static_cast<double>(cache_hits) / allocations);
  }
  return out;
}

HostAllocator& HostAllocator::Instance() {
  static HostAllocator& host = Of(Device::Cpu());  // every host tensor asks: no lock, no lookup
  return host;
}

HostAllocator& HostAllocator::Of(const Device& device) {
  // Never destroyed: tensors may outlive main.
  static auto* mu = new std::mutex();
  static auto* allocators = new std::map<int, HostAllocator*>();
  std::lock_guard<std::mutex> lock(*mu);
  HostAllocator*& allocator = (*allocators)[device.index];
  if (allocator == nullptr) allocator = new HostAllocator(device);
  return *allocator;
}

HostAllocator::HostAllocator(Device device) : device_(device) {
#ifdef __GLIBC__
  // glibc serves blocks above M_MMAP_THRESHOLD with a fresh mmap, and returns freed memory at
  // the heap's top to the kernel above M_TRIM_THRESHOLD: every step then faults in its
  // activations page by page again (measured: 7% of a dp2 step in page faults, 17% once frees
  // also come from the communication thread). Keeping tensors on the heap makes a step reuse
  // the last step's pages.
  mallopt(M_MMAP_THRESHOLD, 32 << 20);  // glibc's largest allowed value on 64-bit
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
#endif
}

void* HostAllocator::Allocate(int64_t bytes, Stream* /*stream*/) {
  const size_t size = static_cast<size_t>((std::max<int64_t>(bytes, 1) + 63) / 64 * 64);
  void* block = std::aligned_alloc(64, size);
  if (block == nullptr) {
    throw OutOfMemory(absl::StrFormat("out of host memory allocating %d bytes on %s (%s)", bytes, device_.ToString(),
                                      stats().ToString()));
  }
  allocations_.fetch_add(1, std::memory_order_relaxed);
  const int64_t now = in_use_.fetch_add(bytes, std::memory_order_relaxed) + bytes;
  int64_t peak = peak_in_use_.load(std::memory_order_relaxed);
  while (now > peak && !peak_in_use_.compare_exchange_weak(peak, now, std::memory_order_relaxed)) {
  }
  return block;
}

void HostAllocator::Free(void* block, int64_t bytes, Stream* /*stream*/) {
  std::free(block);
  in_use_.fetch_sub(bytes, std::memory_order_relaxed);
}

AllocatorStats HostAllocator::stats() const {
  AllocatorStats s;
  s.in_use = in_use_.load(std::memory_order_relaxed);
  s.peak_in_use = peak_in_use_.load(std::memory_order_relaxed);
  // The heap keeps freed blocks for reuse, which it does not report: what it holds is at least
  // what is in use.
  s.reserved = s.in_use;
  s.peak_reserved = s.peak_in_use;
  s.allocations = allocations_.load(std::memory_order_relaxed);
  return s;
}

}  // namespace pdist::exec

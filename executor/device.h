// Device: where a tensor lives and a kernel runs — the host ("cpu") or one GPU ("cuda:N").
//
// "cpu:N" (N >= 1) are further host devices: the same memory and kernels as "cpu", but tensors
// on them are separate from the host's and must be moved there and back (ToDevice) exactly as
// for a GPU. They exist so that the CPU test suite checks the engine's device discipline —
// every feed, state and result moved where it belongs — without a GPU (JAX offers host devices
// for the same reason).
//
//   PDIST_ASSIGN_OR_RETURN(Device d, ParseDevice("cuda:1"));   // {kCUDA, 1}
//   d.ToString()                                                // "cuda:1"
//
// A Device names a place; whether this build and this machine can run it is the backend's
// answer (executor/backend.h: BackendFor).
#pragma once

#include <compare>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace pdist::exec {

enum class DeviceType : int8_t { kCPU = 0, kCUDA = 1 };

// "cpu", "cuda".
const char* DeviceTypeName(DeviceType type);

struct Device {
  DeviceType type = DeviceType::kCPU;
  int index = 0;  // which GPU; for the host 0, or N of a host device "cpu:N"

  static constexpr Device Cpu() { return {}; }
  static constexpr Device Cuda(int index) { return {DeviceType::kCUDA, index}; }
  bool is_cpu() const { return type == DeviceType::kCPU; }
  // "cpu", "cpu:1", "cuda:0".
  std::string ToString() const;

  friend auto operator<=>(const Device&, const Device&) = default;
};

// "cpu", "cpu:N" (a host device), "cuda" (GPU 0) or "cuda:N"; anything else is an error that
// lists the accepted forms.
absl::StatusOr<Device> ParseDevice(const std::string& text);

}  // namespace pdist::exec

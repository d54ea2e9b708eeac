// Device: where a tensor lives and a kernel runs — the host ("cpu") or one GPU ("cuda:N").
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
  int index = 0;  // which GPU; always 0 for the host

  static constexpr Device Cpu() { return {}; }
  static constexpr Device Cuda(int index) { return {DeviceType::kCUDA, index}; }
  bool is_cpu() const { return type == DeviceType::kCPU; }
  // "cpu", "cuda:0".
  std::string ToString() const;

  friend auto operator<=>(const Device&, const Device&) = default;
};

// "cpu", "cuda" (GPU 0) or "cuda:N"; anything else is an error that lists the accepted forms.
absl::StatusOr<Device> ParseDevice(const std::string& text);

}  // namespace pdist::exec

// Device names: printing and parsing.
#include "executor/device.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace pdist::exec {

const char* DeviceTypeName(DeviceType type) {
  switch (type) {
    case DeviceType::kCPU: return "cpu";
    case DeviceType::kCUDA: return "cuda";
  }
  return "?";
}

std::string Device::ToString() const {
  if (is_cpu() && index == 0) return "cpu";
  return absl::StrCat(DeviceTypeName(type), ":", index);
}

absl::StatusOr<Device> ParseDevice(const std::string& text) {
  // GPUs per node are counted in the tens; anything past this is a typo, not a machine.
  constexpr int kMaxDeviceIndex = 1023;
  if (text == "cpu") return Device::Cpu();
  if (text == "cuda") return Device::Cuda(0);
  for (const DeviceType type : {DeviceType::kCPU, DeviceType::kCUDA}) {
    const std::string prefix = absl::StrCat(DeviceTypeName(type), ":");
    int index = -1;
    if (text.starts_with(prefix) && text.size() > prefix.size() &&
        text.find_first_not_of("0123456789", prefix.size()) == std::string::npos &&
        absl::SimpleAtoi(text.substr(prefix.size()), &index) && index <= kMaxDeviceIndex) {
      return Device{type, index};
    }
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown device '", text,
                                                 "': expected 'cpu', 'cpu:N', 'cuda' or 'cuda:N' with 0 <= N <= ",
                                                 kMaxDeviceIndex));
}

}  // namespace pdist::exec

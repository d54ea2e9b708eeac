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
  if (is_cpu()) return "cpu";
  return absl::StrCat(DeviceTypeName(type), ":", index);
}

absl::StatusOr<Device> ParseDevice(const std::string& text) {
  // GPUs per node are counted in the tens; anything past this is a typo, not a machine.
  constexpr int kMaxDeviceIndex = 1023;
  if (text == "cpu") return Device::Cpu();
  if (text == "cuda") return Device::Cuda(0);
  int index = -1;
  if (text.starts_with("cuda:") && text.size() > 5 && text.find_first_not_of("0123456789", 5) == std::string::npos &&
      absl::SimpleAtoi(text.substr(5), &index) && index <= kMaxDeviceIndex) {
    return Device::Cuda(index);
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown device '", text, "': expected 'cpu', 'cuda' or 'cuda:N' with 0 <= N <= ", kMaxDeviceIndex));
}

}  // namespace pdist::exec

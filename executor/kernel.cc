// KernelRegistry: lookup of kernels by device and op type.
#include "executor/kernel.h"

#include "executor/cpu/cpu_kernels.h"

namespace pdist::exec {

void KernelRegistry::Register(Device device, const std::string& op_type, KernelFn fn) {
  kernels_[{device, op_type}] = std::move(fn);
}

const KernelFn* KernelRegistry::Find(Device device, const std::string& op_type) const {
  auto it = kernels_.find({device, op_type});
  return it == kernels_.end() ? nullptr : &it->second;
}

std::vector<std::string> KernelRegistry::OpTypes(Device device) const {
  std::vector<std::string> out;
  for (const auto& [key, fn] : kernels_) {
    if (key.first == device) out.push_back(key.second);
  }
  return out;
}

const KernelRegistry& KernelRegistry::Global() {
  static const KernelRegistry* registry = [] {
    auto* r = new KernelRegistry();
    cpu::RegisterCpuKernels(*r);
    return r;
  }();
  return *registry;
}

}  // namespace pdist::exec

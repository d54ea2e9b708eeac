// KernelRegistry: lookup of kernels by device type and op type; KernelContext's aliasing.
#include "executor/kernel.h"

#include "executor/backend.h"
#include "ir/op_def.h"

namespace pdist::exec {

bool KernelContext::AliasOperand(size_t i) {
  const std::optional<size_t> k = ir::AliasedOperand(op_, i);
  const Tensor* operand = k ? input(*k) : nullptr;
  if (operand == nullptr || !operand->defined() || operand->type() != output_type(i)) return false;
  SetOutput(i, *operand);
  return true;
}

void KernelRegistry::Register(DeviceType device, const std::string& op_type, KernelFn fn) {
  kernels_[{device, op_type}] = std::move(fn);
}

const KernelFn* KernelRegistry::Find(DeviceType device, const std::string& op_type) const {
  auto it = kernels_.find({device, op_type});
  return it == kernels_.end() ? nullptr : &it->second;
}

std::vector<std::string> KernelRegistry::OpTypes(DeviceType device) const {
  std::vector<std::string> out;
  for (const auto& [key, fn] : kernels_) {
    if (key.first == device) out.push_back(key.second);
  }
  return out;
}

const KernelRegistry& KernelRegistry::Global() {
  static const KernelRegistry* registry = [] {
    auto* r = new KernelRegistry();
    for (const Backend* backend : Backends()) backend->RegisterKernels(*r);
    return r;
  }();
  return *registry;
}

}  // namespace pdist::exec

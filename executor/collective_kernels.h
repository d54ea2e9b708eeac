// The collective ops' kernels, one implementation for every backend (executor/collective_kernels.cc):
// each backend registers them for its device type.
#pragma once

#include "executor/device.h"

namespace pdist::exec {

class KernelRegistry;

void RegisterCollectiveKernels(KernelRegistry& registry, DeviceType device);

}  // namespace pdist::exec

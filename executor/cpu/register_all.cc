// RegisterCpuKernels: the single list of CPU kernel families.
#include "executor/collective_kernels.h"
#include "executor/cpu/cpu_kernels.h"
#include "executor/cpu/float_math.h"
#include "executor/kernel.h"

namespace pdist::exec::cpu {

void RegisterCpuKernels(KernelRegistry& registry) {
  RegisterElementwiseKernels(registry);
  RegisterActivationKernels(registry);
  RegisterMatmulKernels(registry);
  RegisterReductionKernels(registry);
  RegisterShapeKernels(registry);
  RegisterGatherKernels(registry);
  RegisterNormKernels(registry);
  RegisterNnKernels(registry);
  RegisterOptimizerKernels(registry);
  RegisterLossScalingKernels(registry);
  RegisterReshardKernels(registry);
  RegisterCollectiveKernels(registry, DeviceType::kCPU);  // executor/collective_kernels.h: shared
  RegisterVocabParallelKernels(registry);
  UseFloatMathForLowPrecision(registry);  // bf16/f16: f32 math, rounded results
  RegisterFusedKernels(registry);         // after: runs the kernels above as they are wrapped
}

}  // namespace pdist::exec::cpu

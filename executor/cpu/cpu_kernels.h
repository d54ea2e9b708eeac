// CPU kernel families (one file each in executor/cpu/), mirroring ir/ops/.
#pragma once

namespace pdist::exec {
class KernelRegistry;
}

namespace pdist::exec::cpu {

void RegisterCpuKernels(KernelRegistry& registry);

void RegisterElementwiseKernels(KernelRegistry& registry);
void RegisterActivationKernels(KernelRegistry& registry);
void RegisterMatmulKernels(KernelRegistry& registry);
void RegisterReductionKernels(KernelRegistry& registry);
void RegisterShapeKernels(KernelRegistry& registry);
void RegisterGatherKernels(KernelRegistry& registry);
void RegisterNormKernels(KernelRegistry& registry);
void RegisterNnKernels(KernelRegistry& registry);
void RegisterOptimizerKernels(KernelRegistry& registry);
void RegisterLossScalingKernels(KernelRegistry& registry);
void RegisterReshardKernels(KernelRegistry& registry);
void RegisterVocabParallelKernels(KernelRegistry& registry);
// fused_gemm_epilogue(_grad): the registered (float-math) kernels of what they fuse; register them last.
void RegisterFusedKernels(KernelRegistry& registry);

}  // namespace pdist::exec::cpu

// CUDA kernel families (host side in executor/cuda/*_kernels.cc, device side in *.cu), as
// executor/cpu/cpu_kernels.h lists the CPU's. An op without a CUDA kernel is refused by
// Executor::Create on a GPU, by name.
#pragma once

namespace pdist::exec {
class KernelRegistry;
}

namespace pdist::exec::cuda {

void RegisterCudaKernels(KernelRegistry& registry);

void RegisterElementwiseKernels(KernelRegistry& registry);
void RegisterActivationKernels(KernelRegistry& registry);
void RegisterShapeKernels(KernelRegistry& registry);  // and full
void RegisterMatmulKernels(KernelRegistry& registry);
void RegisterNormKernels(KernelRegistry& registry);
void RegisterOptimizerKernels(KernelRegistry& registry);
void RegisterReductionKernels(KernelRegistry& registry);
void RegisterEmbeddingKernels(KernelRegistry& registry);
void RegisterSoftmaxKernels(KernelRegistry& registry);  // and cross entropy
void RegisterAttentionKernels(KernelRegistry& registry);
void RegisterRopeKernels(KernelRegistry& registry);
void RegisterLossScalingKernels(KernelRegistry& registry);  // count_nonfinite, update_loss_scaling
void RegisterCompareKernels(KernelRegistry& registry);      // greater_than, less_than, equal, where
void RegisterGatherKernels(KernelRegistry& registry);       // gather, gather_grad
void RegisterVocabParallelKernels(KernelRegistry& registry);  // c_embedding(_grad), c_softmax_..._grad

}  // namespace pdist::exec::cuda

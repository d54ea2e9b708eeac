// RegisterCudaKernels: the single list of CUDA kernel families.
#include "executor/collective_kernels.h"
#include "executor/cuda/cuda_kernels.h"
#include "executor/kernel.h"

namespace pdist::exec::cuda {

void RegisterCudaKernels(KernelRegistry& registry) {
  RegisterElementwiseKernels(registry);
  RegisterActivationKernels(registry);
  RegisterShapeKernels(registry);
  RegisterMatmulKernels(registry);
  RegisterNormKernels(registry);
  RegisterOptimizerKernels(registry);
  RegisterReductionKernels(registry);
  RegisterEmbeddingKernels(registry);
  RegisterSoftmaxKernels(registry);
  RegisterAttentionKernels(registry);
  RegisterRopeKernels(registry);
  RegisterLossScalingKernels(registry);
  RegisterCompareKernels(registry);
  RegisterGatherKernels(registry);
  RegisterVocabParallelKernels(registry);
  RegisterCollectiveKernels(registry, DeviceType::kCUDA);  // executor/collective_kernels.h: shared
}

}  // namespace pdist::exec::cuda

// PDIST_HOST_DEVICE: marks per-element math that both the CPU kernels and the CUDA kernels
// compile (`__host__ __device__` under nvcc, nothing under the host compiler). The math is then
// written once: what the CPU tests check is what a GPU runs.
#pragma once

#if defined(__CUDACC__)
#define PDIST_HOST_DEVICE __host__ __device__
#else
#define PDIST_HOST_DEVICE
#endif

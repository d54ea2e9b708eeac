// The kernel-thread settings of the CPU backend.
#include "executor/cpu/cpu_common.h"

#include <algorithm>

#include "executor/executor.h"

namespace pdist::exec {

void SetKernelThreadsOfThisThread(int threads) {
#ifdef _OPENMP
  omp_set_num_threads(std::max(1, threads));
#else
  (void)threads;
#endif
}

int KernelThreadsOfThisThread() { return static_cast<int>(cpu::MaxThreads()); }

}  // namespace pdist::exec

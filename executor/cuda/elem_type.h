// A tensor's dtype as the storage type the CUDA launchers take (executor/cuda/launch.h), or an
// error naming the op and the dtype it cannot take.
#pragma once

#include "absl/status/statusor.h"
#include "executor/cuda/launch.h"
#include "ir/types.h"

namespace pdist::exec::cuda {

absl::StatusOr<ElemType> ElemTypeOf(const char* op, ir::DataType dtype);

}  // namespace pdist::exec::cuda

// A tensor's dtype as the storage type the CUDA launchers take (executor/cuda/launch.h), or an
// error naming the op and the dtype it cannot take; and back.
#pragma once

#include "absl/status/statusor.h"
#include "executor/cuda/launch.h"
#include "ir/types.h"

namespace pdist::exec::cuda {

absl::StatusOr<ElemType> ElemTypeOf(const char* op, ir::DataType dtype);
// The inverse, and the bytes of one element.
ir::DataType DataTypeOf(ElemType type);
int64_t ElemTypeSize(ElemType type);

}  // namespace pdist::exec::cuda

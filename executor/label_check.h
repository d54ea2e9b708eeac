// Hard labels of cross_entropy_with_softmax, checked on the host for every backend: each is
// ignore_index or a class in [0, classes); the error names the first offender.
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "executor/tensor.h"

namespace pdist::exec {

absl::Status CheckLabels(const Tensor& label, int64_t classes, int64_t ignore_index);

}  // namespace pdist::exec

// SayOnce: a line on stderr, once per process per distinct message — which form a kernel runs in
// (cuDNN's attention or GEMMs, a cuBLASLt epilogue or its fallback), or that a step's timeline
// could not be read, is worth knowing beside a timing, not worth repeating every step.
#pragma once

#include <string>

namespace pdist::exec {

void SayOnce(const std::string& message);

}  // namespace pdist::exec

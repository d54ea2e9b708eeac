// Which device an engine's ranks run on: EngineOptions::device ("cpu", "cpu:N", "cuda", "cuda:N") made a
// Device this build and machine can run, or an error saying what is missing.
//
// "cuda" without an index is the rank's own GPU: LOCAL_RANK under a launcher (pdist-run,
// torchrun and Slurm set it), else GPU 0 — one rank per GPU.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "executor/device.h"

namespace pdist::engine {

absl::StatusOr<exec::Device> ChooseDevice(const std::string& name);

}  // namespace pdist::engine

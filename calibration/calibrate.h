// Calibration: this machine measured as a cluster of CPU ranks that run as threads of one
// process (pdist-train --ranks N, the engine's inproc backend), so the planner can predict
// what pdist does here. `pdist-plan --calibrate` writes the result as a cluster file;
// `--cluster cpu-local` measures and plans in one go.
//
// Compute is measured through pdist's own executor on as many rank threads as the cores run at
// once (each with the kernel threads the engine gives a rank: cores / N, at least 1), together,
// so the rates are those of a loaded machine; that more ranks than that share the cores is left
// to the estimate (shared_cores = the machine's cores). Links are measured with all N ranks
// through the inproc communicator:
//   GEMM      a matmul of 512² and of 48² (f32, f64) → peak rate and the size curve
//             (device.peak_tflops, efficiency.gemm = 1, efficiency.gemm_half_gflop)
//   stream    an add of 256 Ki elements (1 MiB, activation-sized): memory_bandwidth
//   overhead  200 adds of 4 elements: efficiency.op_overhead_us
//   links     inproc all-reduce of 16 MiB (bus bandwidth) and of one element (latency)
//   op_scale  a reference training step (GPT 2 × 128, s 64, b 8) run with kernel timing: per op
//             type, measured over the roofline's time where they differ by more than 10%; then
//             the same step through amp o2 in bf16 and in f16: "type@bf16" / "type@f16" where
//             the low-precision kernels (f32 math on converted copies) scale apart from f32
// Memory is the machine's physical memory divided among the ranks.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "strategy/cluster.h"

namespace pdist::calibration {

// InvalidArgument for ranks < 1; `progress` (optional) hears each measurement's name.
absl::StatusOr<strategy::Cluster> CalibrateCpu(int64_t ranks,
                                               const std::function<void(const std::string&)>& progress = {});

}  // namespace pdist::calibration

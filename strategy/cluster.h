// Cluster: the machines a plan is for — nodes of identical devices, the device's memory and peak
// rates, and the links inside a node and between nodes — read from JSON or taken from a preset.
//
//   {"name": "2x dgx-a100", "nodes": 2, "devices_per_node": 8,
//    "device": {"name": "A100-SXM4-80GB", "memory_gb": 80, "memory_bandwidth_gbps": 2039,
//               "peak_tflops": {"bf16": 312, "f16": 312, "f32": 19.5, "f64": 9.7},
//               "efficiency": {"gemm": 0.5, "gemm_half_gflop": 0.5, "memory": 0.8, "op_overhead_us": 5,
//                              "op_scale": {"add_grad": 2.5, "add@bf16": 4.1}}},
//    "intra_node": {"bandwidth_gbps": 300, "latency_us": 3.4},
//    "inter_node": {"bandwidth_gbps": 25, "latency_us": 9.6}}
//
// Units in the file are the ones data sheets use: GB (10^9 bytes), GB/s per device and direction,
// TFLOP/s dense, µs. The struct holds SI units. docs/cluster.md lists the presets and sources.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "ir/types.h"

namespace pdist::strategy {

struct Link {
  double bandwidth = 0;  // bytes/s per device, one direction
  double latency = 0;    // seconds per message
  friend bool operator==(const Link&, const Link&) = default;
};

// How close to its peak rates a device runs an op (planner/compute_cost.h): a matmul of f FLOPs
// reaches gemm · f / (f + gemm_half_flops) of peak; streaming ops reach `memory` of the memory
// bandwidth; every op pays `op_overhead` (a kernel launch, a dispatch). The defaults of `gemm` and
// `memory` are fitted to 19 published A100 runs (scripts/bench-plan-accuracy.sh: out of sample,
// mean |error| 3.1%, max 8.2%; docs/benchmarks.md); the Hopper presets carry their own, fitted to
// 52 H100 runs (2.6%, 19.2%); `gemm_half_flops` and `op_overhead` are assumptions.
struct Efficiency {
  double gemm = 0.75;
  double gemm_half_flops = 5e8;
  // A matmul's efficiency also falls with its arithmetic intensity I = flops / bytes (for a
  // 2-byte m×k·k×n product with m large, about k·n / (k + n): the narrow dimensions; half that
  // in f32): it is scaled by
  // I / (I + gemm_half_intensity), so a GEMM pays its bytes at an extra rate besides its FLOPs.
  // 0 (the default) leaves it out; fused attention kernels keep their own rate. Fitted on
  // published runs (docs/cost_model.md, "Compute").
  double gemm_half_intensity = 0;
  double memory = 0.7;
  double op_overhead = 5e-6;  // seconds
  // How the attention core runs: fused (FlashAttention, what pdist's flash_attn is) or unfused
  // (Megatron-LM's CoreAttention before FlashAttention: the full b·heads·s² scores written,
  // scale-mask-softmaxed, dropped out and read back, in both passes). Published runs of 2021–22
  // ran unfused; pricing them needs it (docs/cost_model.md, "Attention").
  enum class Attention : int8_t { kFused, kUnfused };
  Attention attention = Attention::kFused;
  // The fraction of peak a fused attention kernel reaches at scale, in place of `gemm` (the same
  // size factor applies). Attention kernels run further below peak than GEMMs, and how far is the
  // kernel's, not the device's alone: FlashAttention-2 reaches about 0.7 of an A100 in its
  // forward but about 0.35 of an H100 (Shah et al. 2024, arXiv 2407.08608), FlashAttention-3
  // about 0.75 there. The default prices it as a GEMM.
  double fused_attention = 0.75;
  // The fused attention backward's rate as a fraction of its forward's (the forward runs at
  // `fused_attention`, the backward at this times that): the backward's five GEMMs per tile (S
  // and P again, dV, dP, dS·K and dSᵀ·Q) interleave with more non-matmul work and atomics or a
  // second pass for dQ. FlashAttention-2 measured: 0.66–0.68 causal and 0.72–0.74 not on its
  // Ampere kernels (sequence 2,048, head dims 32–128; apache/tvm tl_doc/flash_perf.md, an RTX
  // 4090), 0.80–0.89 on an H100 (not causal, 2k–16k, head dims 64 and 128; Shah et al. 2024).
  // The presets carry their GPU's; 1 (the backward as fast as the forward) elsewhere.
  double fused_attention_backward = 1;
  // Per op type, measured time over the roofline's on a reference step (calibration only):
  // kernels the roofline misjudges (a bias gradient's reduction, tanh) are priced as measured.
  // "type@bf16" / "type@f16" hold the factor of the type computing in that dtype, when it
  // differs (the CPU's low-precision kernels convert to f32 and back; planner::OpScaleOf).
  std::map<std::string, double> op_scale;
  friend bool operator==(const Efficiency&, const Efficiency&) = default;
};

struct Device {
  std::string name;
  double memory = 0;            // bytes
  double memory_bandwidth = 0;  // bytes/s
  std::map<std::string, double> peak_flops;  // FLOP/s, dense, by dtype name ("bf16", "f32", ...)
  Efficiency efficiency;
  friend bool operator==(const Device&, const Device&) = default;
};

struct Cluster {
  std::string name;
  int64_t nodes = 1;
  int64_t devices_per_node = 1;
  Device device;
  Link intra_node;
  Link inter_node;
  // > 0: the node's devices are threads of one machine sharing this many cores (pdist's CPU
  // ranks); ranks that wait leave their cores to the others. 0: each device computes alone.
  int64_t shared_cores = 0;
  // Of the time those cores are time-sliced among more ranks than they run at once, the fraction
  // that does the ranks' work (the rest: scheduler gaps, caches refilled after each switch).
  // Measured by `pdist-plan --calibrate`; 1 = perfect sharing.
  double shared_cores_efficiency = 1;

  int64_t num_devices() const { return nodes * devices_per_node; }
  // Peak FLOP/s for `dtype` (PeakFlopsOf).
  absl::StatusOr<double> PeakFlops(ir::DataType dtype) const;
  friend bool operator==(const Cluster&, const Cluster&) = default;
};

// A device's peak FLOP/s for `dtype`; InvalidArgument naming the dtypes it lists and how to add
// the missing one (a cluster file's device.peak_tflops, or a calibrated file, which lists every
// floating dtype).
absl::StatusOr<double> PeakFlopsOf(const Device& device, ir::DataType dtype);

// Parses and validates; an unknown key, a wrong type or a value out of range is InvalidArgument
// naming the key path ("device.peak_tflops.bf16").
absl::StatusOr<Cluster> ParseCluster(const std::string& json_text);
std::string ClusterToJson(const Cluster& cluster);

// "dgx-a100", "dgx-a100-40gb", "dgx-h100", "hgx-h200": `devices` devices filled node by node (8 per node; a last
// node with fewer devices is not allowed: InvalidArgument naming the count).
absl::StatusOr<Cluster> ClusterPreset(std::string_view name, int64_t devices);
std::vector<std::string> ClusterPresetNames();

// What `--cluster X --gpus N` means to every front end (pdist-plan, the C API, Python): a
// cluster file when X names an existing path (N, when not 0, must be its device count), else the
// preset X with N devices. Errors name X, the file's bad key, or the presets there are.
absl::StatusOr<Cluster> ClusterFromFileOrPreset(const std::string& file_or_preset, int64_t devices);

}  // namespace pdist::strategy

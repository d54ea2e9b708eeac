// Cluster JSON: a strict reader (every key known, every number in range), the writer, presets.
#include "strategy/cluster.h"

#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "ir/checked_math.h"
#include "ir/dist/process_mesh.h"
#include "ir/input_file.h"
#include "ir/json_reader.h"
#include "ir/types.h"
#include "ir/op_def.h"
#include "ir/status.h"

namespace pdist::strategy {
namespace {

using Json = nlohmann::json;

constexpr double kGiga = 1e9;
constexpr double kTera = 1e12;
constexpr double kMicro = 1e-6;

// Reads the keys of one JSON object, each by its handler; unknown keys and missing required ones
// are errors naming their path.
absl::Status ReadObject(const Json& j, const std::string& path,
                        const std::map<std::string, std::function<absl::Status(const Json&, const std::string&)>>& keys,
                        const std::vector<std::string>& required) {
  const std::string where = path.empty() ? "cluster" : absl::StrCat("cluster key '", path, "'");
  if (!j.is_object()) return absl::InvalidArgumentError(absl::StrCat(where, " must be a JSON object"));
  for (const auto& [key, value] : j.items()) {
    const std::string full = path.empty() ? key : absl::StrCat(path, ".", key);
    auto it = keys.find(key);
    if (it == keys.end()) {
      std::vector<std::string> known;
      for (const auto& [k, unused] : keys) known.push_back(k);
      return absl::InvalidArgumentError(absl::StrCat("unknown cluster key '", full, "' (known: ", absl::StrJoin(known, ", "), ")"));
    }
    PDIST_RETURN_IF_ERROR(it->second(value, full));
  }
  for (const std::string& key : required) {
    if (!j.contains(key)) {
      return absl::InvalidArgumentError(absl::StrCat("cluster key '", path.empty() ? key : absl::StrCat(path, ".", key),
                                                     "' is missing"));
    }
  }
  return absl::OkStatus();
}

// A positive number, times `scale`.
// A positive number in the key's unit (GB/s, µs, TFLOP/s, ...), within [1e-12, 1e12] of it: a
// rate or a time outside that range is a typo, and a subnormal one would make every time the
// planner computes with it infinite.
auto Positive(double& field, double scale) {
  return [&field, scale](const Json& v, const std::string& path) -> absl::Status {
    if (!v.is_number() || !(v.get<double>() >= 1e-12 && v.get<double>() <= 1e12)) {
      return absl::InvalidArgumentError(
          absl::StrCat("cluster key '", path, "' must be a positive number in [1e-12, 1e12], got ", v.dump()));
    }
    field = v.get<double>() * scale;
    return absl::OkStatus();
  };
}

// 0 (off) or a positive number within [1e-12, 1e12] (FLOPs per byte).
auto NonNegative(double& field) {
  return [&field](const Json& v, const std::string& path) -> absl::Status {
    if (!v.is_number() || !(v.get<double>() == 0 || (v.get<double>() >= 1e-12 && v.get<double>() <= 1e12))) {
      return absl::InvalidArgumentError(
          absl::StrCat("cluster key '", path, "' must be 0 or a positive number in [1e-12, 1e12], got ", v.dump()));
    }
    field = v.get<double>();
    return absl::OkStatus();
  };
}

auto Count(int64_t& field) {
  return [&field](const Json& v, const std::string& path) -> absl::Status {
    const int64_t max = ir::ProcessMesh::kMaxProcesses;
    // An unsigned value past int64's range reads as negative: rejected too.
    if (!v.is_number_integer() || v.get<int64_t>() < 1 || v.get<int64_t>() > max) {
      return absl::InvalidArgumentError(
          absl::StrCat("cluster key '", path, "' must be an integer in [1, ", max, "], got ", v.dump()));
    }
    field = v.get<int64_t>();
    return absl::OkStatus();
  };
}

auto Text(std::string& field) {
  return [&field](const Json& v, const std::string& path) -> absl::Status {
    if (!v.is_string()) return absl::InvalidArgumentError(absl::StrCat("cluster key '", path, "' must be a string"));
    field = v.get<std::string>();
    return absl::OkStatus();
  };
}

auto LinkOf(Link& link) {
  return [&link](const Json& v, const std::string& path) {
    return ReadObject(v, path, {{"bandwidth_gbps", Positive(link.bandwidth, kGiga)}, {"latency_us", Positive(link.latency, kMicro)}},
                      {"bandwidth_gbps", "latency_us"});
  };
}

// A number in (0, 1].
auto Fraction(double& field) {
  return [&field](const Json& v, const std::string& path) -> absl::Status {
    if (!v.is_number() || !(v.get<double>() > 0 && v.get<double>() <= 1)) {
      return absl::InvalidArgumentError(absl::StrCat("cluster key '", path, "' must be a number in (0, 1], got ", v.dump()));
    }
    field = v.get<double>();
    return absl::OkStatus();
  };
}

auto EfficiencyOf(Efficiency& e) {
  return [&e](const Json& v, const std::string& path) {
    return ReadObject(v, path,
                      {{"gemm", Fraction(e.gemm)},
                       {"gemm_half_gflop", Positive(e.gemm_half_flops, kGiga)},
                       {"gemm_half_intensity", NonNegative(e.gemm_half_intensity)},
                       {"memory", Fraction(e.memory)},
                       {"fused_attention", Fraction(e.fused_attention)},
                       {"fused_attention_backward", Fraction(e.fused_attention_backward)},
                       {"op_overhead_us", Positive(e.op_overhead, kMicro)},
                       {"attention", [&e](const Json& kind, const std::string& at) -> absl::Status {
                          if (kind == "fused" || kind == "unfused") {
                            e.attention = kind == "fused" ? Efficiency::Attention::kFused : Efficiency::Attention::kUnfused;
                            return absl::OkStatus();
                          }
                          return absl::InvalidArgumentError(
                              absl::StrCat("cluster key '", at, "' must be \"fused\" or \"unfused\", got ", kind.dump()));
                        }},
                       {"op_scale", [&e](const Json& scales, const std::string& at) -> absl::Status {
                          if (!scales.is_object()) {
                            return absl::InvalidArgumentError(absl::StrCat("cluster key '", at, "' must map op types to factors"));
                          }
                          for (const auto& [op, factor] : scales.items()) {
                            // "type" or "type@dtype" (a low-precision dtype's own factor).
                            const size_t at_sign = op.find('@');
                            const std::string type = op.substr(0, at_sign);
                            if (ir::OpRegistry::Global().Find(type) == nullptr) {
                              return absl::InvalidArgumentError(absl::StrCat("cluster key '", at, ".", op, "': no op '", type, "'"));
                            }
                            if (at_sign != std::string::npos) {
                              const std::string dtype = op.substr(at_sign + 1);
                              // Its short name, as the planner looks it up (planner::OpScaleKey).
                              const absl::StatusOr<ir::DataType> parsed = ir::ParseDataType(dtype);
                              const bool low = parsed.ok() && dtype == ir::DataTypeName(*parsed) &&
                                               (*parsed == ir::DataType::kBFloat16 || *parsed == ir::DataType::kFloat16);
                              if (!low) {
                                return absl::InvalidArgumentError(absl::StrCat("cluster key '", at, ".", op, "': '", dtype,
                                                                               "' is not bf16 or f16 (f32 and f64 take the plain '",
                                                                               type, "')"));
                              }
                            }
                            PDIST_RETURN_IF_ERROR(Positive(e.op_scale[op], 1)(factor, absl::StrCat(at, ".", op)));
                          }
                          return absl::OkStatus();
                        }}},
                      {});
  };
}

absl::Status ReadPeaks(Device& device, const Json& v, const std::string& path) {
  if (!v.is_object() || v.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("cluster key '", path, "' must map dtypes to TFLOP/s"));
  }
  for (const auto& [dtype, value] : v.items()) {
    if (!ir::ParseDataType(dtype).ok()) {
      return absl::InvalidArgumentError(absl::StrCat("cluster key '", path, ".", dtype, "': not a dtype (f32, bf16, ...)"));
    }
    PDIST_RETURN_IF_ERROR(Positive(device.peak_flops[dtype], kTera)(value, absl::StrCat(path, ".", dtype)));
  }
  return absl::OkStatus();
}

Cluster Dgx(const std::string& name, Device device, Link nvlink, Link network, int64_t nodes) {
  return Cluster{absl::StrCat(nodes, "x ", name), nodes, 8, std::move(device), nvlink, network};
}

}  // namespace

absl::StatusOr<double> PeakFlopsOf(const Device& device, ir::DataType dtype) {
  auto it = device.peak_flops.find(ir::DataTypeName(dtype));
  if (it != device.peak_flops.end()) return it->second;
  std::vector<std::string> listed;
  for (const auto& [name, unused] : device.peak_flops) listed.push_back(name);
  return absl::InvalidArgumentError(absl::StrCat(
      "device ", device.name, " lists no peak rate for ", ir::DataTypeName(dtype), " (it lists ",
      absl::StrJoin(listed, ", "), "): add \"", ir::DataTypeName(dtype),
      "\" to the cluster file's device.peak_tflops, or measure this machine with pdist-plan --calibrate, whose file "
      "lists every floating dtype (docs/cluster.md)"));
}

absl::StatusOr<double> Cluster::PeakFlops(ir::DataType dtype) const { return PeakFlopsOf(device, dtype); }

absl::StatusOr<Cluster> ParseCluster(const std::string& json_text) {
  PDIST_ASSIGN_OR_RETURN(const Json j, ir::ParseJson(json_text, "cluster"));
  Cluster c;
  auto device = [&c](const Json& v, const std::string& path) {
    return ReadObject(v, path,
                      {{"name", Text(c.device.name)},
                       {"memory_gb", Positive(c.device.memory, kGiga)},
                       {"memory_bandwidth_gbps", Positive(c.device.memory_bandwidth, kGiga)},
                       {"peak_tflops", [&c](const Json& p, const std::string& at) { return ReadPeaks(c.device, p, at); }},
                       {"efficiency", EfficiencyOf(c.device.efficiency)}},
                      {"name", "memory_gb", "memory_bandwidth_gbps", "peak_tflops"});
  };
  PDIST_RETURN_IF_ERROR(ReadObject(j, "",
                                   {{"name", Text(c.name)},
                                    {"nodes", Count(c.nodes)},
                                    {"devices_per_node", Count(c.devices_per_node)},
                                    {"device", device},
                                    {"intra_node", LinkOf(c.intra_node)},
                                    {"inter_node", LinkOf(c.inter_node)},
                                    {"shared_cores", Count(c.shared_cores)},
                                    {"shared_cores_efficiency", Fraction(c.shared_cores_efficiency)}},
                                   {"nodes", "devices_per_node", "device", "intra_node", "inter_node"}));
  PDIST_RETURN_IF_ERROR(ir::CheckedProduct({c.nodes, c.devices_per_node}, ir::ProcessMesh::kMaxProcesses,
                                           "cluster devices nodes × devices_per_node")
                            .status());
  return c;
}

std::string ClusterToJson(const Cluster& c) {
  Json peaks = Json::object();
  for (const auto& [dtype, flops] : c.device.peak_flops) peaks[dtype] = flops / kTera;
  auto link = [](const Link& l) { return Json{{"bandwidth_gbps", l.bandwidth / kGiga}, {"latency_us", l.latency / kMicro}}; };
  Json j = {{"name", c.name},
                  {"nodes", c.nodes},
                  {"devices_per_node", c.devices_per_node},
                  {"device",
                   {{"name", c.device.name},
                    {"memory_gb", c.device.memory / kGiga},
                    {"memory_bandwidth_gbps", c.device.memory_bandwidth / kGiga},
                    {"peak_tflops", peaks},
                    {"efficiency",
                     {{"gemm", c.device.efficiency.gemm},
                      {"gemm_half_gflop", c.device.efficiency.gemm_half_flops / kGiga},
                      {"gemm_half_intensity", c.device.efficiency.gemm_half_intensity},
                      {"memory", c.device.efficiency.memory},
                      {"fused_attention", c.device.efficiency.fused_attention},
                      {"fused_attention_backward", c.device.efficiency.fused_attention_backward},
                      {"op_overhead_us", c.device.efficiency.op_overhead / kMicro},
                      {"attention", c.device.efficiency.attention == Efficiency::Attention::kFused ? "fused" : "unfused"},
                      {"op_scale", c.device.efficiency.op_scale}}}}},
                  {"intra_node", link(c.intra_node)},
                  {"inter_node", link(c.inter_node)}};
  if (c.shared_cores > 0) j["shared_cores"] = c.shared_cores;
  if (c.shared_cores_efficiency != 1) j["shared_cores_efficiency"] = c.shared_cores_efficiency;
  return j.dump(2);
}

std::vector<std::string> ClusterPresetNames() { return {"dgx-a100", "dgx-a100-40gb", "dgx-h100", "hgx-h200"}; }

// Rates are dense (no 2:4 sparsity). Links are the bus bandwidths nccl-tests measures for large
// messages, not the wire rates (docs/cluster.md cites each): NVLink's ring collectives inside a
// node, and one NIC per GPU between nodes (a node's all-reduce busbw over 8). Latencies are
// Paddle's alpha–beta defaults.
absl::StatusOr<Cluster> ClusterPreset(std::string_view name_view, int64_t devices) {
  const std::string name(name_view);  // absl::StrCat takes absl::string_view, not std::string_view
  if (devices < 1 || (devices % 8 != 0 && devices > 8)) {
    return absl::InvalidArgumentError(absl::StrCat("cluster preset '", name, "': ", devices,
                                                   " devices do not fill 8-device nodes (use 1-8 or a multiple of 8)"));
  }
  // A strategy's ranks are bounded so (2^40 devices searched for minutes, uninterruptibly from Python).
  if (devices > ir::ProcessMesh::kMaxProcesses) {
    return absl::InvalidArgumentError(absl::StrCat("cluster preset '", name, "': ", devices, " devices: at most ",
                                                   ir::ProcessMesh::kMaxProcesses, ", the largest job pdist plans"));
  }
  const int64_t nodes = devices <= 8 ? 1 : devices / 8;
  // A100: 600 GB/s bidirectional NVLink3, measured 230 GB/s all-reduce busbw; 8×200 Gb/s HDR,
  // 188 GB/s for two nodes. H100/H200: 900 GB/s NVLink4, 365 GB/s with the ring (NVLS's 480 is
  // not modelled); 8×400 Gb/s NDR, 47 GB/s per NIC.
  const Link nvlink_a100{230 * kGiga, 3.4 * kMicro}, nvlink_h100{365 * kGiga, 3.4 * kMicro};
  const Link hdr{23.5 * kGiga, 9.6 * kMicro}, ndr{47 * kGiga, 9.6 * kMicro};
  // Hopper's efficiencies, fitted to 52 published H100 runs (MosaicML's FSDP benchmarks; out of
  // sample 2.5% mean, docs/benchmarks.md): the FlashAttention kernels of those runs reach 0.175
  // of the H100's peak, where its GEMMs reach 0.825 less a toll on narrow ones (FLOPs per byte
  // I: a factor I / (I + 64), session 27; 0.8 and no toll before) — in both passes: a backward
  // at 0.85 of the forward's rate (FlashAttention-2's on an H100, Shah et al. 2024) fits these
  // runs worse (2.6% → 3.2% mean). Checked on another stack's rows (NeMo's GPT-3 175B on H100s,
  // not fitted): 5.3% mean, 9.5% max (6.0% / 10.2% with the old pair).
  Efficiency hopper;
  hopper.gemm = 0.825;
  hopper.gemm_half_intensity = 64;
  hopper.fused_attention = 0.175;
  hopper.memory = 0.5;
  // Ampere keeps the Megatron-LM fit (its fused attention priced as a GEMM); FlashAttention-2's
  // causal backward runs at 0.67 of its forward's rate there (strategy::Efficiency).
  Efficiency ampere;
  ampere.fused_attention_backward = 0.67;
  Cluster c;
  const std::map<std::string, double> a100_peaks = {
      {"bf16", 312 * kTera}, {"f16", 312 * kTera}, {"f32", 19.5 * kTera}, {"f64", 9.7 * kTera}};
  if (name == "dgx-a100") {
    c = Dgx("dgx-a100", {"A100-SXM4-80GB", 80 * kGiga, 2039 * kGiga, a100_peaks, ampere}, nvlink_a100, hdr, nodes);
  } else if (name == "dgx-a100-40gb") {
    // The first DGX A100 (320 GB): the 40 GB A100 has HBM2 at 1,555 GB/s, not HBM2e at 2,039.
    c = Dgx("dgx-a100-40gb", {"A100-SXM4-40GB", 40 * kGiga, 1555 * kGiga, a100_peaks, ampere}, nvlink_a100, hdr,
            nodes);
  } else if (name == "dgx-h100") {
    c = Dgx("dgx-h100", {"H100-SXM5-80GB", 80 * kGiga, 3350 * kGiga, {{"bf16", 989 * kTera}, {"f16", 989 * kTera},
                                                                     {"f32", 67 * kTera}, {"f64", 34 * kTera}},
                           hopper},
            nvlink_h100, ndr, nodes);
  } else if (name == "hgx-h200") {
    c = Dgx("hgx-h200", {"H200-SXM-141GB", 141 * kGiga, 4800 * kGiga, {{"bf16", 989 * kTera}, {"f16", 989 * kTera},
                                                                      {"f32", 67 * kTera}, {"f64", 34 * kTera}},
                           hopper},
            nvlink_h100, ndr, nodes);
  } else {
    return absl::NotFoundError(absl::StrCat("no cluster preset '", name, "' (presets: ",
                                            absl::StrJoin(ClusterPresetNames(), ", "), ")"));
  }
  if (devices < 8) {
    c.devices_per_node = devices;
    c.name = absl::StrCat(devices, " of ", name);
  }
  return c;
}

absl::StatusOr<Cluster> ClusterFromFileOrPreset(const std::string& file_or_preset, int64_t devices) {
  if (std::filesystem::exists(file_or_preset)) {
    PDIST_ASSIGN_OR_RETURN(std::string text, ir::ReadFileToString(file_or_preset));
    absl::StatusOr<Cluster> c = ParseCluster(text);
    if (!c.ok()) return WithContext(c.status(), absl::StrCat("cluster file ", file_or_preset));
    if (devices != 0 && devices != c->num_devices()) {
      return absl::InvalidArgumentError(absl::StrCat(devices, " devices asked for, but cluster file ", file_or_preset,
                                                     " has ", c->num_devices(), " (nodes × devices_per_node)"));
    }
    return c;
  }
  // A name no preset has that reads as a path is a missing file, not a preset without its count.
  if (file_or_preset.find('/') != std::string::npos || absl::EndsWith(file_or_preset, ".json")) {
    return absl::NotFoundError(absl::StrCat("cluster file '", file_or_preset, "' does not exist (presets: ",
                                            absl::StrJoin(ClusterPresetNames(), ", "), ")"));
  }
  if (devices < 1) {
    return absl::InvalidArgumentError(absl::StrCat("the number of devices is needed with the preset '", file_or_preset,
                                                   "' (or name a cluster file)"));
  }
  absl::StatusOr<Cluster> c = ClusterPreset(file_or_preset, devices);
  if (!c.ok() && c.status().code() == absl::StatusCode::kNotFound) {
    return absl::NotFoundError(absl::StrCat("cluster '", file_or_preset, "' is neither a file nor a preset (",
                                            absl::StrJoin(ClusterPresetNames(), ", "), ")"));
  }
  return c;
}

}  // namespace pdist::strategy

#include "planner/compute_cost.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "ir/status.h"

namespace pdist::planner {
namespace {

bool IsFloat(ir::DataType dtype) {
  return dtype == ir::DataType::kFloat32 || dtype == ir::DataType::kFloat64 || dtype == ir::DataType::kBFloat16 ||
         dtype == ir::DataType::kFloat16;
}

// Matmul-like: enough arithmetic per byte that the size of the op, not memory, limits it.
constexpr double kMatmulIntensity = 4;

}  // namespace

bool IsMatmulLike(const ir::OpCost& cost) { return cost.flops > 0 && cost.flops >= kMatmulIntensity * cost.bytes; }

absl::StatusOr<double> ComputeSeconds(const strategy::Device& device, ir::DataType dtype, const ir::OpCost& cost,
                                      FusedAttention attention) {
  PDIST_ASSIGN_OR_RETURN(const double peak_flops, strategy::PeakFlopsOf(device, dtype));
  const strategy::Efficiency& e = device.efficiency;
  const bool gemm_rate = attention == FusedAttention::kNone || attention == FusedAttention::kUnfusedCore;
  const double at_scale = gemm_rate                                 ? e.gemm
                          : attention == FusedAttention::kForward ? e.fused_attention
                                                                  : e.fused_attention * e.fused_attention_backward;
  double efficiency = at_scale;
  if (IsMatmulLike(cost)) {
    efficiency = at_scale * cost.flops / (cost.flops + e.gemm_half_flops);
    // The narrow dimensions' toll, a GEMM's: an attention core's rate is its own (fused_attention,
    // or, unfused, its s² bytes under the memory roof).
    if (e.gemm_half_intensity > 0 && cost.bytes > 0 && attention == FusedAttention::kNone) {
      const double intensity = cost.flops / cost.bytes;
      efficiency *= intensity / (intensity + e.gemm_half_intensity);
    }
  }
  const double compute = cost.flops > 0 ? cost.flops / (peak_flops * efficiency) : 0;
  const double memory = cost.bytes / (device.memory_bandwidth * e.memory);
  return e.op_overhead + std::max(compute, memory);
}

absl::StatusOr<ir::OpCost> CostOf(const ir::Operation& op) {
  PDIST_ASSIGN_OR_RETURN(const ir::OpDef* def, ir::OpRegistry::Global().Lookup(op.type()));
  ir::InputTypes inputs;
  for (const ir::Value* v : op.operands()) inputs.push_back(v != nullptr ? &v->type() : nullptr);
  std::vector<ir::TensorType> outputs;
  for (const ir::Value* v : op.results()) outputs.push_back(v->type());
  return def->cost(inputs, outputs, op.attrs());
}

namespace {

// batch · heads · s_q · s_k of an attention op's q [batch, s_q, heads, d] and k, and q's element size.
std::pair<double, double> ScoresAndWidth(const ir::Operation& op) {
  const ir::TensorType& q = op.operand(0)->type();
  const ir::TensorType& k = op.operand(1)->type();
  return {static_cast<double>(q.shape[0]) * static_cast<double>(q.shape[2]) * static_cast<double>(q.shape[1]) *
              static_cast<double>(k.shape[1]),
          static_cast<double>(ir::DataTypeSize(q.dtype))};
}

bool IsAttentionForward(const ir::Operation& op) { return op.type() == "flash_attn" || op.type() == "flash_attention"; }
bool IsAttentionCore(const ir::Operation& op) { return IsAttentionForward(op) || op.type() == "flash_attn_grad"; }

}  // namespace

FusedAttention FusedAttentionOf(const ir::Operation& op, const strategy::Efficiency& efficiency) {
  if (!IsAttentionCore(op)) return FusedAttention::kNone;
  if (efficiency.attention != strategy::Efficiency::Attention::kFused) return FusedAttention::kUnfusedCore;
  return IsAttentionForward(op) ? FusedAttention::kForward : FusedAttention::kBackward;
}

ir::OpCost AsTheDeviceRunsIt(const ir::Operation& op, ir::OpCost cost, const strategy::Efficiency& efficiency) {
  if (efficiency.attention != strategy::Efficiency::Attention::kUnfused || !IsAttentionCore(op)) return cost;
  const bool forward = IsAttentionForward(op);
  const auto [scores, width] = ScoresAndWidth(op);
  cost.flops = cost.ModelFlops();  // no causal skipping, no recompute of q·kᵀ in the backward
  cost.bytes += (forward ? 6 : 9) * scores * width + scores;
  return cost;
}

double UnfusedAttentionSavedBytes(const ir::Operation& op) {
  const auto [scores, width] = ScoresAndWidth(op);
  return scores * (2 * width + 1);
}

ir::DataType ComputeDtype(const ir::Operation& op) {
  for (const ir::Value* v : op.operands()) {
    if (v != nullptr && IsFloat(v->type().dtype)) return v->type().dtype;
  }
  for (const ir::Value* v : op.results()) {
    if (IsFloat(v->type().dtype)) return v->type().dtype;
  }
  return ir::DataType::kFloat32;
}

std::string OpScaleKey(const std::string& type, ir::DataType dtype) {
  const bool low = ir::IsLowPrecisionFloat(dtype);
  return low ? absl::StrCat(type, "@", ir::DataTypeName(dtype)) : type;
}

double OpScaleOf(const std::map<std::string, double>& op_scale, const std::string& type, ir::DataType dtype) {
  for (const std::string& key : {OpScaleKey(type, dtype), type}) {
    if (auto it = op_scale.find(key); it != op_scale.end()) return it->second;
  }
  return 1;
}

}  // namespace pdist::planner

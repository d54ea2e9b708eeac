// Compute cost: the seconds one op of a local program takes on a device, as a roofline whose
// compute roof depends on the op's size.
//
//   t = op_overhead + max(flops / (peak(dtype) · e(flops)),  bytes / (memory_bandwidth · memory))
//   e(f) = gemm · f / (f + gemm_half_flops)       for matmul-like ops (flops ≥ 4 · bytes),
//          · I / (I + gemm_half_intensity)        I = flops / bytes (where gemm_half_intensity > 0;
//                                                 not for an attention core: its own rate prices it)
//   e(f) = gemm                                   otherwise (they are memory-bound anyway)
//
// so a 4096³ matmul on an A100 (137 GFLOP) runs at 0.8 · 312 TFLOP/s, a 256³ one (34 MFLOP) at a
// twentieth of that. FLOPs and bytes come from the op's registered cost (OpDef::cost) on its
// local types. The efficiencies are the cluster's (strategy::Efficiency; docs/cost_model.md).
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "ir/op_def.h"
#include "ir/program.h"
#include "strategy/cluster.h"

namespace pdist::planner {

// Enough arithmetic per byte (flops ≥ 4 · bytes) that the op's size, not memory, limits it: a
// matmul, a fused attention. Selective recompute keeps these ops' results and redoes the rest.
bool IsMatmulLike(const ir::OpCost& cost);

// Which fused attention kernel an op is, if any: its forward or its backward; kUnfusedCore: an
// attention core on a device that runs it unfused (priced at `gemm` like any op, but its s²
// bytes are the memory roof's, not a narrow GEMM's toll).
enum class FusedAttention : int8_t { kNone, kForward, kBackward, kUnfusedCore };

// Seconds of an op with `cost`, computing in `dtype`; a fused attention core reaches
// Efficiency::fused_attention of peak in its forward (times fused_attention_backward in its
// backward) where a GEMM reaches `gemm`. NotFound when the device lists no peak for the dtype.
absl::StatusOr<double> ComputeSeconds(const strategy::Device& device, ir::DataType dtype, const ir::OpCost& cost,
                                      FusedAttention attention = FusedAttention::kNone);
// The fused attention kernel `op` is (flash_attn, its gradient) on a device that runs attention
// fused; kUnfusedCore for those ops on an unfused device; kNone for any other op.
FusedAttention FusedAttentionOf(const ir::Operation& op, const strategy::Efficiency& efficiency);

// The registered cost of `op` on its (local) operand and result types. NotFound for an op the
// registry does not know.
absl::StatusOr<ir::OpCost> CostOf(const ir::Operation& op);

// The cost of `op` as the device's kernels run it: the registered cost, except for the
// attention core on a device whose attention is unfused (strategy::Efficiency::attention), which
// performs the full (unmasked) products and moves its b·heads·s² scores through memory:
//   forward   written by q·kᵀ, read and written by scale-mask-softmax and by dropout (+ a byte
//             of mask each), read by p·v:                  6 · E · w + E bytes
//   backward  written by dO·vᵀ, read by pᵀ·dO, read and written by dropout's and softmax's
//             gradients (+ the mask, + softmax's output), read by the two products: 9 · E · w + E
// where E = batch · heads · s_q · s_k of the local shapes and w the element size.
ir::OpCost AsTheDeviceRunsIt(const ir::Operation& op, ir::OpCost cost, const strategy::Efficiency& efficiency);
// What an unfused attention core (flash_attn's operands) keeps for its backward: the softmax
// output and the dropout output (w bytes each) and the dropout mask (a byte) per score.
double UnfusedAttentionSavedBytes(const ir::Operation& op);

// The dtype an op computes in: that of its first floating-point operand or result (f32 when it
// has none, e.g. an embedding lookup of integer ids reading no float).
ir::DataType ComputeDtype(const ir::Operation& op);

// The key of the device's op_scale (strategy::Efficiency) for an op type computing in `dtype`:
// "matmul" for f32 and f64, "matmul@bf16" / "matmul@f16" for the low-precision types, whose CPU
// kernels run f32 math on converted copies (executor/cpu/float_math.h) and so scale apart.
std::string OpScaleKey(const std::string& type, ir::DataType dtype);
// The factor op_scale gives that op: its dtype's key, else its type's, else 1.
double OpScaleOf(const std::map<std::string, double>& op_scale, const std::string& type, ir::DataType dtype);

}  // namespace pdist::planner

// Merged (multi-tensor) optimizer ops: merged_sgd, merged_momentum, merged_adamw update many
// parameters at once, each exactly as its own sgd / momentum / adamw would (Paddle's
// merged_momentum and merged_adam). Their operands are the shared learning rate and skip_update
// (or none), then each parameter's own operands of the base op; their results are each
// parameter's base results in turn:
//
//   merged_adamw(%lr, none, %w0, %g0, %m0, %v0, %b0, %c0, %w1, %g1, ...)  → %w0', %m0', %v0', %b0', %c0', %w1', ...
//
// With `multi_precision = true` (Paddle's attribute of the same name) every parameter is an f32
// master weight updated from a bf16/f16 gradient, and brings one more result after its base
// results: its new master rounded to the gradient's dtype — the low-precision parameter that a
// separate `cast` would otherwise make, reading the master back from memory in a launch of its own:
//
//   merged_adamw(%lr, none, %w0, %g0, ...) {multi_precision = true}  → %w0', %m0', %v0', %b0', %c0', %w0_bf16', %w1', ...
//
// The table below is what the ops' registration (ir/ops/optimizer.cc), the fuse-optimizer pass
// and the kernels read the layout from.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "ir/attribute.h"

namespace pdist::ir {

struct MergedUpdate {
  std::string base;                    // "adamw"
  std::string merged;                  // "merged_adamw"
  size_t learning_rate;                // the base op's operand index of the learning rate
  size_t skip_update;                  // and of its optional skip_update (the last operand)
  size_t grad;                         // and of the gradient (the parameter is operand 0)
  std::vector<size_t> per_parameter;   // the base operands each parameter brings, in merged order
  size_t results;                      // the base op's results, per parameter
};

// The merged ops' shared operands come first: learning_rate, skip_update (or none).
inline constexpr size_t kMergedSharedOperands = 2;

const std::vector<MergedUpdate>& MergedUpdates();
// The entry whose base (or merged op) is `type`; null for another op.
const MergedUpdate* MergedUpdateOfBase(const std::string& type);
const MergedUpdate* MergedUpdateOfMerged(const std::string& type);

// Operand `k` of parameter `p`'s group in a merged op.
inline size_t MergedOperand(const MergedUpdate& m, size_t p, size_t k) {
  return kMergedSharedOperands + p * m.per_parameter.size() + k;
}

// The merged ops' attribute that adds each parameter's rounded copy (above).
inline constexpr char kMultiPrecision[] = "multi_precision";

// Whether a merged op's attributes ask for the rounded copies (absent: no).
inline bool IsMultiPrecision(const AttributeMap& attrs) {
  auto it = attrs.find(kMultiPrecision);
  return it != attrs.end() && std::holds_alternative<bool>(it->second) && std::get<bool>(it->second);
}

// A merged op's results per parameter: the base op's, and the rounded copy under multi_precision.
inline size_t MergedResults(const MergedUpdate& m, const AttributeMap& attrs) {
  return m.results + (IsMultiPrecision(attrs) ? 1 : 0);
}

// How many parameters a merged op of `operands` operands updates.
inline size_t MergedParameters(const MergedUpdate& m, size_t operands) {
  return operands < kMergedSharedOperands ? 0 : (operands - kMergedSharedOperands) / m.per_parameter.size();
}

// Parameter p's operands of a merged op — the shared learning rate and skip_update, and its
// group — laid out as the base op takes them; operand(i) gives the merged op's operand i (its
// type for shape inference, its tensor for a kernel).
template <typename T, typename Operand>
std::vector<T> BaseOperands(const MergedUpdate& m, size_t p, Operand operand) {
  std::vector<T> base(m.skip_update + 1, nullptr);
  base[m.learning_rate] = operand(0);
  base[m.skip_update] = operand(1);
  for (size_t k = 0; k < m.per_parameter.size(); ++k) base[m.per_parameter[k]] = operand(MergedOperand(m, p, k));
  return base;
}

}  // namespace pdist::ir

// NnRule: an EinsumRule (ir/spmd/einsum_rule.h) plus the two things the nn ops need beyond it —
// results that are never Partial, and letters sharded only when their mesh dim divides a size.
//
//   adamw, param f32[64,32]:
//     NnRule{.einsum = {inputs {"ab","ab","1","ab","ab","1","1"}, outputs {"ab","ab","ab","1","1"}},
//            .whole_outputs = {3, 4}}     // beta pow outputs lack a, b but sum over nothing
//   flash_attn, q heads 8, k heads 2:  .must_divide = {{'h', 2}}   // GQA: mesh ∤ 2 → h replicated
//
// An EinsumRule makes a result Partial on every mesh dim sharding a letter it lacks: right for a
// reduction, wrong for a result computed from other inputs (beta1_pow_out, seed_offset), for an
// empty f[0] placeholder ("_"), or for a reduction the kernel performs itself (vocab-parallel
// cross entropy's loss). Those are `whole_outputs`; "_" results are whole without being listed.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "ir/spmd/einsum_rule.h"

namespace pdist::ir::spmd {

struct NnRule {
  EinsumRule einsum;
  std::vector<int> whole_outputs;       // result indices that are never Partial
  std::map<char, int64_t> must_divide;  // letter → a size its mesh dim must divide, else replicated
  std::string note;                     // appended to the printed form ("loss: k→reduced in kernel")
};

// Builds the rule of one op from its input shapes (absent optional input: [0]) and attributes.
using NnRuleBuilder =
    std::function<absl::StatusOr<NnRule>(const std::vector<Shape>& inputs, const AttributeMap& attrs)>;

// The three OpDef slots. Forward and reverse run the EinsumRule, replicate every letter whose
// mesh dim does not divide its `must_divide` size (and run again), and clear the Partial of
// whole results. Builder errors come back prefixed with `op`.
SpmdRuleFns NnRuleFns(const std::string& op, NnRuleBuilder build);
// DescribeEinsum without Partial segments for whole results, plus must_divide and `note`.
std::string DescribeNnRule(const NnRule& rule);

// --- helpers for builders ------------------------------------------------------------------

// True for an absent optional input (shape [0]).
bool IsAbsentShape(const Shape& shape);
// The shape of input `index` when present with `rank` (-1: any) axes; else InvalidArgument
// naming the input and its shape.
absl::StatusOr<Shape> RequireShape(const std::vector<Shape>& inputs, size_t index, const char* name,
                                   int64_t rank = -1);
// `axis` in [-rank, rank) mapped into [0, rank); InvalidArgument naming `attr` otherwise.
absl::StatusOr<int64_t> NormalizeAxis(int64_t axis, int64_t rank, const char* attr);
// `letters` without '1', '_' and repeats (a valid EinsumRule::replicated).
std::string UniqueLetters(const std::string& letters);

}  // namespace pdist::ir::spmd

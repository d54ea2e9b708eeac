// OpDef: everything the registry knows of one op type, defined in one place (ir/ops/*.cc).
//
// Every op has: a signature (inputs, outputs, attributes with defaults), shape/dtype inference,
// a gradient builder (or an explicit statement that it has none), a cost, and — from the SPMD
// issue on — forward and reverse SPMD rules. Registration checks that every piece is present, so
// a missing piece fails at start-up (OpRegistry::Global()), not deep inside a model.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "ir/attribute.h"
#include "ir/program.h"
#include "ir/spmd/spmd_rule.h"
#include "ir/types.h"

namespace pdist::ir {

class Builder;

struct OperandSpec {
  std::string name;
  bool optional = false;  // may be absent (nullptr operand)
  bool variadic = false;  // last spec only: zero or more operands (concat's x)
};

struct ResultSpec {
  std::string name;
  bool variadic = false;  // last spec only: count decided by InferMeta (split's out)
};

struct AttrSpec {
  std::string name;
  Attribute default_value;  // also fixes the attribute's kind
};

// Input types in operand order; nullptr for an absent optional operand.
using InputTypes = std::vector<const TensorType*>;

using InferMetaFn = std::function<absl::StatusOr<std::vector<TensorType>>(const InputTypes&, const AttributeMap&)>;

// Given the forward op and the gradients of its results (nullptr where none flows), builds the
// backward ops with `b` and returns one gradient per operand (nullptr where none).
using GradFn = std::function<absl::StatusOr<std::vector<Value*>>(Builder& b, const Operation& op,
                                                                  const std::vector<Value*>& out_grads)>;

struct OpCost {
  double flops = 0;  // floating-point operations the kernel performs (a multiply-add is 2)
  double bytes = 0;  // bytes read and written, assuming each operand and result moves once
  // The FLOPs that model-FLOPs utilisation credits, where they differ from `flops`: the
  // convention of Megatron-LM and PaLM counts attention without its causal mask and a backward
  // as twice its forward, whatever the kernel skips or recomputes (flash_attn).
  std::optional<double> model_flops;

  double ModelFlops() const { return model_flops.value_or(flops); }
};
using CostFn = std::function<OpCost(const InputTypes&, const std::vector<TensorType>& outputs, const AttributeMap&)>;

enum class GradKind : int8_t {
  kDifferentiable,  // grad must be set
  kNotDifferentiable,  // outputs are integer/boolean or constant: no gradient flows (equal, full)
  kGradientOp,      // the op is itself a gradient (matmul_grad); higher orders are not supported
};

// The collective a communicating op performs, for the cost model (planner/comm_cost.h).
enum class CollectiveKind : int8_t { kNone, kAllReduce, kAllGather, kReduceScatter, kAllToAll };

// A point-to-point op's side (c_send, c_recv): its `peer` attribute names the world rank at the
// other end. The executor gives each direction between two ranks its own channel and stream.
enum class PointToPoint : int8_t { kNone, kSend, kRecv };

struct OpDef {
  std::string name;
  std::vector<OperandSpec> inputs;
  std::vector<ResultSpec> outputs;
  std::vector<AttrSpec> attrs;
  InferMetaFn infer_meta;
  GradKind grad_kind = GradKind::kDifferentiable;
  GradFn grad;
  CostFn cost;
  // SPMD rules (ir/spmd/spmd_rule.h): forward, reverse, and the einsum-style description.
  InferSpmdFn infer_spmd;
  InferSpmdReverseFn infer_spmd_reverse;
  DescribeSpmdFn describe_spmd;
  // The kernel talks to other ranks (collectives, the vocab-parallel cross entropy): the
  // executor runs such ops on the rank's communication stream, in program order.
  bool communicates = false;
  // The collective the op performs (kNone for every other op). It is priced on the bytes of the
  // whole tensor the group shares: an all-gather's result, every other collective's operands.
  CollectiveKind collective = CollectiveKind::kNone;
  PointToPoint point_to_point = PointToPoint::kNone;
  // A local form's base op (c_embedding: embedding; ir/ops/local_forms.cc); empty otherwise.
  std::string local_form_of;
  // The op exists only in programs past completion (a rank's, or a single rank's): collectives,
  // local forms, merged_adamw. Its SPMD rule refuses (ops::MarkLocalOnly).
  bool local_only = false;
  // The attribute that spells the result's whole shape (reshape's and full's `shape`), empty
  // when none does. Passes that give values other shapes (partition: a rank's piece; micro-batch:
  // a micro-batch's) rewrite it from the op's new result type.
  std::string result_shape_attr;
  // Arithmetic dominates its cost (matmul, attention): selective recompute keeps its results
  // and replays the cheap ops around it (passes/recompute.h); the planner prices the same split.
  bool compute_bound = false;
  // Its result aliases operand 0's storage on every backend (reshape, squeeze, unsqueeze): no
  // bytes are made or moved, and the operand lives as long as the result (the executor's
  // ViewKernel; the planner's memory walks count the storage once).
  bool view = false;
  // Operands whose values its kernels never read, only their types, which the op's operands carry
  // (add_grad's x and y: a sum's gradient is the output gradient summed back to each operand's
  // shape). Liveness ignores such a use: the executor frees the value after its last other reader
  // and hands the kernel no tensor for it, the planner does not count it as saved for the
  // backward, and recompute neither keeps nor replays it. Paddle's no_need_buffer inputs.
  std::vector<size_t> type_only_operands;
  // (result, operand) pairs where the result is the operand itself whenever their types are
  // equal: add_grad's x_grad is out_grad when x was not broadcast (the sum's derivative in x is
  // 1). The kernels hand back the operand's tensor — no bytes made or moved — and the planner's
  // memory walks count the storage once, as for a view.
  std::vector<std::pair<size_t, size_t>> aliases_if_same_type;
  // (result, operand) pairs where the kernels may write the result over the operand: every
  // element of the operand they need is read before the result's element at the same position
  // is written (cross entropy's gradient from the logits: each row's max and sum first, then
  // each element read and overwritten by the same thread). Where the operand's value dies at
  // this op and nothing else holds its storage, the executor hands the kernel that storage as
  // the result (KernelContext::Donate) and the planner's walks count one buffer: the logits and
  // their gradient, the head's two largest tensors, are never held at once. flash-attn's fused
  // cross entropy does the same (inplace_backward).
  std::vector<std::pair<size_t, size_t>> overwrites_dying_operand;
  // Operands that hold indices into a dim of another operand: embedding's ids into its table's
  // rows, cross entropy's labels into the classes, gather's index into x's `axis`. The engine
  // checks a batch input read there against the whole operand's dim before a step: a rank's
  // piece of a vocab-parallel table or logits masks the ids outside it, so its kernel cannot
  // tell an id of another rank's piece from one of no piece (an id out of range trained
  // silently under mp, where one rank's kernel refuses it).
  struct IndexOperand {
    size_t operand = 0;
    size_t into = 0;                // the operand indexed
    int64_t dim = 0;                // its dim (negative: from the end), unless dim_attr names one
    std::string dim_attr;           // the attribute holding the dim (gather's and cross entropy's "axis")
    std::string also_allowed_attr;  // an attribute whose value is allowed too (cross entropy's "ignore_index")
    bool from_end = false;          // -size … -1 count from the end (gather's, as ONNX's and numpy's)
  };
  std::vector<IndexOperand> index_operands;

  const AttrSpec* FindAttr(const std::string& attr) const;
};

// Whether op's kernels read operand i's values: false where its OpDef lists i among
// type_only_operands (and for a null operand), true otherwise (an unregistered op included).
bool ReadsOperand(const Operation& op, size_t i);

// The operand whose storage result r of op is: operand 0 for a view's result 0, the operand of
// an aliases_if_same_type pair whose types match; nullopt for a result with storage of its own.
std::optional<size_t> AliasedOperand(const Operation& op, size_t r);

// The (result, operand) pairs of op's overwrites_dying_operand whose types match: results its
// kernels may write over that operand where the operand dies at op.
std::vector<std::pair<size_t, size_t>> OverwritableOperands(const Operation& op);

class OpRegistry {
 public:
  // The registry with every op of ir/ops registered (built once, thread-safe).
  static const OpRegistry& Global();

  // Checks completeness (infer_meta, cost, grad unless declared otherwise).
  absl::Status Register(OpDef def);
  const OpDef* Find(const std::string& name) const;
  // Like Find, but an error that names the op and suggests close names.
  absl::StatusOr<const OpDef*> Lookup(const std::string& name) const;
  std::vector<std::string> Names() const;

 private:
  std::map<std::string, OpDef> defs_;
};

// Fills in defaults for missing attributes and checks kinds and unknown names.
absl::StatusOr<AttributeMap> NormalizeAttributes(const OpDef& def, const AttributeMap& attrs);

// Checks operand count against the signature; error names the op.
absl::Status CheckOperandCount(const OpDef& def, size_t num_operands);

}  // namespace pdist::ir

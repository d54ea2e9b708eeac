// DistState: the DistAttr of every value while the completion pass works, with the reason each
// one was chosen, and the merge policy that decides between competing proposals.
//
//   DistState state(program);            // annotations fixed, other existing DistAttrs kept
//   MeshId mesh = state.OpMesh(*op);
//   PDIST_ASSIGN_OR_RETURN(const ir::SpmdResult* r, state.RunRule(*op, mesh, SpmdDirection::kForward));
//   state.Propose(op->result(0), mesh, r->outputs[0].dims_mapping, r->outputs[0].partial,
//                 DistOrigin::Forward(op, 0));   // true when the result changed
//
// docs/completion.md describes the policy; in short: a fixed value (annotated, or the target of
// a reshard) never changes; otherwise the per-dim union of the two mappings when they agree,
// else the more sharded one, else (a tie) the value keeps what it has. Partial is decided by a
// value's producer alone.
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "ir/dist/dist_attr.h"
#include "ir/op_def.h"
#include "ir/printer.h"
#include "ir/program.h"
#include "passes/spmd_call.h"

namespace pdist::passes {

// Why a value has its DistAttr (for `pdist-opt --explain`).
struct DistOrigin {
  enum class Kind : int8_t {
    kUnset,
    kAnnotation,       // the user's (shard_tensor, strategy, `dist!` in text)
    kInput,            // present in the input program and not annotated: the starting point
    kReshardTarget,    // the result of a reshard op that was already in the program
    kForward,          // result `index` of `op`, by op's forward rule
    kReverse,          // operand `index` of `op`, by op's reverse rule
    kUpdate,           // a state takes the DistAttr of its `update` value
    kDefault,          // reached from no annotation: Replicate on the first mesh in use
    kReshardInserted,  // made by the completion for operand `index` of `op` (or an update when op is null)
    kReshardChosen,    // a reshard without a target takes what operand `index` of `op`, its first use, needs
  };
  Kind kind = Kind::kUnset;
  const ir::Operation* op = nullptr;
  int index = -1;

  static DistOrigin Forward(const ir::Operation* op, int result) { return {Kind::kForward, op, result}; }
  static DistOrigin Reverse(const ir::Operation* op, int operand) { return {Kind::kReverse, op, operand}; }
};

// Index of a mesh in DistState::mesh(): values and rule calls name meshes by index, so that the
// hot loops neither copy nor compare ProcessMesh objects.
using MeshId = int;

// A value's distribution while completion works: DistAttr's fields, with the mesh by index.
struct ValueDist {
  MeshId mesh = -1;  // -1: not known yet
  ir::DimsMapping dims_mapping;
  ir::PartialDims partial;
  bool fixed = false;  // never changed by a proposal
  DistOrigin origin;

  bool known() const { return mesh >= 0; }
};

// How many pieces a mapping cuts a tensor into: the product of the sizes of the mesh dims it
// uses (Partial does not count). [0,1] on a [2,4] mesh → 8.
int64_t Shardedness(const ir::ProcessMesh& mesh, const ir::DimsMapping& mapping);

class DistState {
 public:
  // Values annotated in `program` are fixed, and so are the results of reshard ops that already
  // carry a DistAttr (their target). Other DistAttrs present are kept as a starting point.
  explicit DistState(const ir::Program& program);

  const ValueDist& at(const ir::Value* v) const { return values_.at(static_cast<size_t>(v->id())); }
  ValueDist& at(const ir::Value* v);  // grows for values created after construction

  const ir::ProcessMesh& mesh(MeshId id) const { return meshes_.at(static_cast<size_t>(id)); }
  // -1 when no value has a DistAttr.
  MeshId first_mesh() const { return meshes_.empty() ? -1 : 0; }
  // v's distribution as a DistAttr (v must be known).
  ir::DistAttr AttrOf(const ir::Value* v) const;
  // Whether v is `spec` (mapping and Partial) on `mesh`.
  bool Matches(const ir::Value* v, MeshId mesh, const ir::TensorDistSpec& spec) const;
  // Sets v to `spec` on `mesh`, whatever it was.
  void Set(const ir::Value* v, MeshId mesh, const ir::TensorDistSpec& spec, const DistOrigin& origin);

  // Merges a proposal (`mapping` and `partial` on `mesh`) into v's distribution (see the
  // banner); returns whether it changed. A forward proposal comes from v's producer and decides
  // v's mesh and Partial; a reverse proposal (origin kReverse or kUpdate) comes from a consumer,
  // only shapes the mapping (its `partial` is ignored), and is ignored on another mesh.
  bool Propose(const ir::Value* v, MeshId mesh, const ir::DimsMapping& mapping, const ir::PartialDims& partial,
               const DistOrigin& origin);

  // The mesh `op` runs on: for a backward op its first known operand's that is not a gradient,
  // else its first known operand's, else its first result's; -1 when
  // neither is known yet.
  MeshId OpMesh(const ir::Operation& op) const;

  // How the op's rule sees operand or result `v` on `mesh`: unknown → every dim -1; on another
  // mesh of the same shape → its mapping without Partial (a mesh-to-mesh reshard will move it);
  // on a mesh of another shape → every dim -1; nullptr → absent (shape [0]).
  ir::TensorDistSpec SpecOf(const ir::Value* v, MeshId mesh) const;

  // Runs op's forward rule (or reverse, which also sees the results) with the current state,
  // on `mesh`; remembers the last answer per op and direction and gives it again while the
  // specs are unchanged. The answer stays valid until the next call for the same op. Errors
  // name the op as printed.
  absl::StatusOr<const ir::SpmdResult*> RunRule(const ir::Operation& op, MeshId mesh, SpmdDirection direction);

  // Points every origin naming `from` at `to` (an op replaced by a copy of itself).
  void RetargetOrigins(const ir::Operation* from, const ir::Operation* to);

  // Canonical names of the input program's values, for error messages.
  const ir::ValueNumbering& numbering() const { return numbering_; }

 private:
  // The mapping and Partial through which a rule sees a value (SpecOf without the copies):
  // nullptr mapping = every dim -1, nullptr partial = none.
  struct View {
    const ir::DimsMapping* mapping = nullptr;
    const ir::PartialDims* partial = nullptr;
  };
  View ViewOf(const ir::Value* v, MeshId mesh) const;
  // Appends SpecOf(v, mesh), flattened and without the shape (a value's never changes), to `key`.
  void AppendKey(const ir::Value* v, MeshId mesh, std::vector<int64_t>& key) const;
  MeshId Intern(const ir::ProcessMesh& mesh);

  // The last call of one op's rule in one direction: the key of what it saw (the mesh, then
  // AppendKey of each operand, and of each result in reverse) and its answer.
  struct RuleMemo {
    std::vector<int64_t> key;
    std::optional<ir::SpmdResult> result;
  };

  std::vector<ir::ProcessMesh> meshes_;  // every mesh the program's DistAttrs use
  std::vector<ValueDist> values_;        // by value id
  ir::ValueNumbering numbering_;
  absl::flat_hash_map<const ir::Operation*, size_t> memo_index_;
  std::deque<std::array<RuleMemo, 2>> memo_;  // [forward, reverse]; a deque keeps answers in place
  std::vector<int64_t> key_;                  // scratch for RunRule
};

// The op that redistributes a value (ir/ops/reshard.cc).
inline bool IsReshard(const ir::Operation& op) { return op.type() == "reshard"; }

// "%5 = matmul(%3, %4)" with canonical value numbers.
std::string DescribeOp(const ir::Operation& op, const ir::ValueNumbering& numbering);

}  // namespace pdist::passes

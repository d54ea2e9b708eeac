#include "passes/fuse_gemm_epilogue.h"

#include <memory>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "ir/attribute.h"
#include "ir/op_def.h"

namespace pdist::passes {
namespace {

struct Use {
  ir::Operation* op;
  size_t operand;
};
using Uses = std::unordered_map<const ir::Value*, std::vector<Use>>;

Uses UsesOf(const ir::Program& program) {
  Uses uses;
  for (const auto& op : program.block().ops()) {
    for (size_t i = 0; i < op->num_operands(); ++i) {
      if (op->operand(i) != nullptr) uses[op->operand(i)].push_back({op.get(), i});
    }
  }
  return uses;
}

// Values the program hands out or binds: outputs, updated states' new values, gradients.
std::unordered_set<const ir::Value*> BoundValues(const ir::Program& program) {
  std::unordered_set<const ir::Value*> bound;
  for (const ir::ProgramOutput& o : program.outputs()) bound.insert(o.value);
  for (const ir::StateUpdate& u : program.updates()) bound.insert(u.new_value);
  for (const ir::StateUpdate& g : program.gradients()) bound.insert(g.new_value);
  return bound;
}

// The matmul whose product `add` adds a bias to — `add`'s operand `product` (0 or 1), the other
// one the bias — when the pair fuses (the header's conditions, and every other reader of the
// product after the add, where the sum it will read is defined); null otherwise.
const ir::Operation* FusableMatmul(const ir::Operation& add, size_t product, const Uses& uses,
                                   const std::unordered_set<const ir::Value*>& bound,
                                   const std::unordered_map<const ir::Operation*, size_t>& position) {
  const ir::Value* p = add.operand(product);
  const ir::Value* bias = add.operand(1 - product);
  const ir::Operation* matmul = p->producer();
  if (matmul == nullptr || matmul->type() != "matmul" || bound.count(p)) return nullptr;
  if (matmul->role() != add.role() || matmul->chunk() != add.chunk()) return nullptr;
  const ir::TensorType& out = p->type();
  if (add.result(0)->type() != out || out.rank() < 2) return nullptr;
  if (bias->type() != ir::TensorType{{out.shape.back()}, out.dtype}) return nullptr;
  const ir::TensorType& x = matmul->operand(0)->type();
  const ir::TensorType& w = matmul->operand(1)->type();
  const absl::StatusOr<bool> trans_x = ir::GetBool(matmul->attrs(), "trans_x");
  if (x.rank() < 2 || w.rank() != 2 || !trans_x.ok() || *trans_x) return nullptr;
  int64_t reads = 0;
  for (const Use& use : uses.at(p)) {
    if (use.op == &add) {
      ++reads;
    } else if (ir::ReadsOperand(*use.op, use.operand) || position.at(use.op) < position.at(&add)) {
      return nullptr;
    }
  }
  return reads == 1 ? matmul : nullptr;
}

}  // namespace

FuseGemmEpilogueReport FuseGemmEpilogues(ir::Program& program) {
  FuseGemmEpilogueReport report;
  const Uses uses = UsesOf(program);
  const std::unordered_set<const ir::Value*> bound = BoundValues(program);
  std::unordered_map<const ir::Operation*, size_t> position;
  for (size_t i = 0; i < program.block().ops().size(); ++i) position[program.block().ops()[i].get()] = i;
  // Each fusable add's fused op, and the matmuls they replace.
  std::unordered_map<const ir::Operation*, std::unique_ptr<ir::Operation>> fused_for;
  std::unordered_set<const ir::Operation*> replaced;
  for (const auto& op : program.block().ops()) {
    if (op->type() != "add" || op->num_operands() != 2 || op->num_results() != 1) continue;
    for (size_t product = 0; product < 2; ++product) {
      const ir::Operation* matmul = FusableMatmul(*op, product, uses, bound, position);
      if (matmul == nullptr) continue;
      ir::Value* p = op->operand(product);
      ir::Value* sum = op->result(0);
      auto fused = std::make_unique<ir::Operation>(
          "fused_gemm_epilogue", std::vector<ir::Value*>{matmul->operand(0), matmul->operand(1), op->operand(1 - product)},
          matmul->attrs());
      fused->CopyRoleAndChunk(*op);
      fused->add_result(sum);
      for (const Use& use : uses.at(p)) {
        if (use.op != op.get()) use.op->set_operand(use.operand, sum);  // a type-only reader: the same type
      }
      replaced.insert(matmul);
      fused_for[op.get()] = std::move(fused);
      ++report.fused;
      break;
    }
  }
  if (report.fused == 0) return report;
  std::vector<std::unique_ptr<ir::Operation>> old = std::move(program.block().mutable_ops());
  program.block().mutable_ops().clear();
  for (auto& op : old) {
    if (replaced.count(op.get())) {
      // The product stays among the program's values, made by nothing and read by nothing (as
      // split-weight-grad leaves the values it drops).
      for (ir::Value* r : op->results()) r->set_producer(nullptr, 0);
      continue;
    }
    auto fused = fused_for.find(op.get());
    program.block().Append(fused == fused_for.end() ? std::move(op) : std::move(fused->second));
  }
  return report;
}

}  // namespace pdist::passes

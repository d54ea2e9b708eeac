#include "passes/fuse_gemm_epilogue.h"

#include <memory>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "ir/attribute.h"
#include "ir/op_def.h"
#include "ir/ops/matmul.h"
#include "passes/uses.h"

namespace pdist::passes {
namespace {

// The matmul or matmul_grad `op` is one GEMM over x's folded rows (what the fused ops take).
bool OneGemm(const ir::Operation& op) {
  const absl::StatusOr<bool> trans_x = ir::GetBool(op.attrs(), "trans_x");
  return trans_x.ok() && ir::ops::FoldsIntoOneGemm(op.operand(0)->type().shape, op.operand(1)->type().shape, *trans_x);
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
  if (!OneGemm(*matmul)) return nullptr;
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

// The GELU (tanh form) of a bias-fused op's sum — gelu's operand a fused_gemm_epilogue without
// an activation makes, in the gelu's role and job, every other reader of the sum after the gelu
// (the fused op, now at the gelu's place, still makes the sum for them) — or null.
const ir::Operation* FusableGemm(const ir::Operation& gelu, const Uses& uses,
                                 const std::unordered_map<const ir::Operation*, size_t>& position) {
  const absl::StatusOr<bool> tanh_form = ir::GetBool(gelu.attrs(), "approximate");
  if (gelu.num_operands() != 1 || !tanh_form.ok() || !*tanh_form) return nullptr;
  const ir::Value* sum = gelu.operand(0);
  const ir::Operation* gemm = sum->producer();
  if (gemm == nullptr || gemm->type() != "fused_gemm_epilogue" || gemm->num_results() != 1) return nullptr;
  if (gemm->role() != gelu.role() || gemm->chunk() != gelu.chunk()) return nullptr;
  for (const Use& use : uses.at(sum)) {
    if (use.op != &gelu && position.at(use.op) < position.at(&gelu)) return nullptr;
  }
  return gemm;
}

std::unordered_map<const ir::Operation*, size_t> Positions(const ir::Program& program) {
  std::unordered_map<const ir::Operation*, size_t> position;
  for (size_t i = 0; i < program.block().ops().size(); ++i) position[program.block().ops()[i].get()] = i;
  return position;
}

// One sweep of a fusion over a program: what it reads of the program before changing anything
// (readers, bound values, op positions), the fused ops it makes, and the rebuild at the end.
class FusionRound {
 public:
  explicit FusionRound(const ir::Program& program)
      : uses(UsesOf(program)), bound(BoundValues(program)), position(Positions(program)) {}

  const Uses uses;
  const std::unordered_set<const ir::Value*> bound;
  const std::unordered_map<const ir::Operation*, size_t> position;

  // `fused` takes `at`'s place; `dropped` goes.
  void Replace(const ir::Operation* at, std::unique_ptr<ir::Operation> fused, const ir::Operation* dropped) {
    fused_for_[at] = std::move(fused);
    dropped_.insert(dropped);
  }
  bool Replaces(const ir::Operation* op) const { return fused_for_.count(op) > 0; }

  // Rewrites the program; how many fused ops it made. A dropped op's results that no fused op
  // took stay among the program's values, made by nothing and read by nothing (as
  // split-weight-grad leaves the values it drops).
  int64_t Finish(ir::Program& program) {
    const auto fused = static_cast<int64_t>(fused_for_.size());
    if (fused == 0) return 0;
    std::vector<std::unique_ptr<ir::Operation>> old = std::move(program.block().mutable_ops());
    program.block().mutable_ops().clear();
    for (auto& op : old) {
      if (dropped_.count(op.get())) {
        for (ir::Value* r : op->results()) {
          if (r->producer() == op.get()) r->set_producer(nullptr, 0);
        }
        continue;
      }
      auto it = fused_for_.find(op.get());
      program.block().Append(it == fused_for_.end() ? std::move(op) : std::move(it->second));
    }
    return fused;
  }

 private:
  std::unordered_map<const ir::Operation*, std::unique_ptr<ir::Operation>> fused_for_;
  std::unordered_set<const ir::Operation*> dropped_;
};

// add(matmul(x, w), b) → fused_gemm_epilogue(x, w, b); how many.
int64_t FuseBiasAdds(ir::Program& program) {
  FusionRound round(program);
  for (const auto& op : program.block().ops()) {
    if (op->type() != "add" || op->num_operands() != 2 || op->num_results() != 1) continue;
    for (size_t product = 0; product < 2; ++product) {
      const ir::Operation* matmul = FusableMatmul(*op, product, round.uses, round.bound, round.position);
      if (matmul == nullptr) continue;
      ir::Value* p = op->operand(product);
      ir::Value* sum = op->result(0);
      ir::AttributeMap attrs = matmul->attrs();
      attrs["activation"] = std::string("none");
      auto fused = std::make_unique<ir::Operation>(
          "fused_gemm_epilogue", std::vector<ir::Value*>{matmul->operand(0), matmul->operand(1), op->operand(1 - product)},
          std::move(attrs));
      fused->CopyRoleAndChunk(*op);
      fused->add_result(sum);
      for (const Use& use : round.uses.at(p)) {
        if (use.op != op.get()) use.op->set_operand(use.operand, sum);  // a type-only reader: the same type
      }
      round.Replace(op.get(), std::move(fused), matmul);
      break;
    }
  }
  return round.Finish(program);
}

// gelu(fused_gemm_epilogue(x, w, b)) → fused_gemm_epilogue(x, w, b) {activation = "gelu"}, its
// results the gelu's and the sum; how many.
int64_t FuseGelus(ir::Program& program) {
  FusionRound round(program);
  for (const auto& op : program.block().ops()) {
    if (op->type() != "gelu") continue;
    const ir::Operation* gemm = FusableGemm(*op, round.uses, round.position);
    if (gemm == nullptr) continue;
    ir::AttributeMap attrs = gemm->attrs();
    attrs["activation"] = std::string("gelu");
    auto fused = std::make_unique<ir::Operation>("fused_gemm_epilogue", gemm->operands(), std::move(attrs));
    fused->CopyRoleAndChunk(*op);
    fused->add_result(op->result(0));
    fused->add_result(gemm->result(0));
    round.Replace(op.get(), std::move(fused), gemm);
  }
  return round.Finish(program);
}

// The matmul_grad that reads `add_grad`'s x_grad — out_grad itself, the bias's sum having no
// broadcast in x — as its out_grad, when the pair fuses: y_grad one column sum per out_grad column
// (a bias), x_grad read by nothing else and not handed out, the product one GEMM, one role and
// job, every reader of the bias gradient after the matmul_grad (where the fused op goes); null
// otherwise.
const ir::Operation* FusableMatmulGrad(const ir::Operation& add_grad, const Uses& uses,
                                       const std::unordered_set<const ir::Value*>& bound,
                                       const std::unordered_map<const ir::Operation*, size_t>& position) {
  if (add_grad.num_operands() != 3 || add_grad.num_results() != 2) return nullptr;
  const ir::Value* out_grad = add_grad.operand(2);
  const ir::Value* x_grad = add_grad.result(0);
  const ir::Value* bias_grad = add_grad.result(1);
  const ir::TensorType& g = out_grad->type();
  if (g.rank() < 2 || x_grad->type() != g || bias_grad->type() != ir::TensorType{{g.shape.back()}, g.dtype}) {
    return nullptr;
  }
  auto readers = uses.find(x_grad);
  if (readers == uses.end() || readers->second.size() != 1 || bound.count(x_grad)) return nullptr;
  const Use& use = readers->second.front();
  const ir::Operation* matmul_grad = use.op;
  if (matmul_grad->type() != "matmul_grad" || use.operand != 2) return nullptr;
  if (matmul_grad->role() != add_grad.role() || matmul_grad->chunk() != add_grad.chunk()) return nullptr;
  if (!OneGemm(*matmul_grad)) return nullptr;
  if (auto bias_readers = uses.find(bias_grad); bias_readers != uses.end()) {
    for (const Use& reader : bias_readers->second) {
      if (position.at(reader.op) < position.at(matmul_grad)) return nullptr;
    }
  }
  return matmul_grad;
}

// add_grad(z, b, g) and matmul_grad(x, w, add_grad's x_grad) → fused_gemm_epilogue_grad(x, w, g),
// its results matmul_grad's and the bias gradient; how many.
int64_t FuseBiasGrads(ir::Program& program) {
  FusionRound round(program);
  for (const auto& op : program.block().ops()) {
    if (op->type() != "add_grad") continue;
    const ir::Operation* matmul_grad = FusableMatmulGrad(*op, round.uses, round.bound, round.position);
    if (matmul_grad == nullptr || round.Replaces(matmul_grad)) continue;
    auto fused = std::make_unique<ir::Operation>(
        "fused_gemm_epilogue_grad",
        std::vector<ir::Value*>{matmul_grad->operand(0), matmul_grad->operand(1), op->operand(2)}, matmul_grad->attrs());
    fused->CopyRoleAndChunk(*matmul_grad);
    fused->add_result(matmul_grad->result(0));
    fused->add_result(matmul_grad->result(1));
    fused->add_result(op->result(1));
    round.Replace(matmul_grad, std::move(fused), op.get());
  }
  return round.Finish(program);
}

}  // namespace

FuseGemmEpilogueReport FuseGemmEpilogues(ir::Program& program) {
  FuseGemmEpilogueReport report;
  report.bias_adds = FuseBiasAdds(program);
  report.gelus = FuseGelus(program);
  report.bias_grads = FuseBiasGrads(program);
  return report;
}

}  // namespace pdist::passes

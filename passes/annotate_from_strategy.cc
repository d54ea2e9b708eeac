// AnnotateFromStrategy: dp / mp / sp degrees → annotations, by recognising Megatron-LM's
// tensor-parallel layers in the ops of a forward program.
#include "passes/annotate_from_strategy.h"

#include <algorithm>
#include <optional>
#include <tuple>
#include <variant>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "ir/dist/shard_tensor.h"
#include "ir/printer.h"
#include "ir/status.h"
#include "passes/annotate.h"
#include "passes/batch_inputs.h"
#include "passes/dist_state.h"

namespace pdist::passes {

namespace {

using ir::Operation;
using ir::Placement;
using ir::Value;

constexpr int kDp = 0;  // mesh dims of [dp, mp]
constexpr int kMp = 1;
constexpr int64_t kSeqAxis = 1;  // of [batch, seq, hidden]

// Ops a norm's output may pass through on its way to a matmul, and a head's logits on their way
// to the loss: they change the view or the dtype, not which layer the value belongs to.
const absl::flat_hash_set<std::string>& ViewOps() {
  static const auto* ops = new absl::flat_hash_set<std::string>{"reshape", "squeeze", "unsqueeze", "cast"};
  return *ops;
}

// Ops between a column-parallel and a row-parallel matmul of one Megatron layer: elementwise,
// activations, attention and view ops (a matmul of two activations is attention's q·kᵀ or p·v).
const absl::flat_hash_set<std::string>& InnerOps() {
  static const auto* ops =
      new absl::flat_hash_set<std::string>{"add",     "subtract",  "multiply",   "divide",     "maximum",
                                           "scale",   "cast",      "dropout",    "relu",       "gelu",
                                           "silu",    "tanh",      "exp",        "softmax",    "reshape",
                                           "sigmoid", "erf",     "where",      "expand",
                                           "squeeze", "unsqueeze", "transpose",  "split",      "split_with_num",
                                           "slice",   "concat",    "fused_rope", "flash_attn", "flash_attention",
                                           "matmul"};
  return *ops;
}

bool IsNorm(const Operation& op) { return op.type() == "layer_norm" || op.type() == "rms_norm"; }

bool BoolAttr(const Operation& op, const std::string& name) {
  auto it = op.attrs().find(name);
  if (it == op.attrs().end()) return false;
  const bool* b = std::get_if<bool>(&it->second);
  return b != nullptr && *b;
}

bool IsParameter(const Value* v, int64_t rank) {
  return v != nullptr && v->is_argument() && v->role() == ir::ValueRole::kParameter && v->type().rank() == rank;
}

// matmul(x, W) with W a 2-D parameter and x not transposed: a linear layer.
bool IsLinear(const Operation& op) {
  return op.type() == "matmul" && op.num_operands() == 2 && op.operand(0) != nullptr && IsParameter(op.operand(1), 2) &&
         !BoolAttr(op, "trans_x");
}
// The weight dim that holds a linear layer's output columns (n) and its input rows (k).
int64_t ColumnDim(const Operation& linear) { return BoolAttr(linear, "trans_y") ? 0 : 1; }
int64_t RowDim(const Operation& linear) { return BoolAttr(linear, "trans_y") ? 1 : 0; }

// Who reads each value: (op, operand index), in op order.
class Uses {
 public:
  explicit Uses(const ir::Program& program) {
    for (const auto& op : program.block().ops()) {
      for (size_t i = 0; i < op->num_operands(); ++i) {
        if (op->operand(i) != nullptr) readers_[op->operand(i)].emplace_back(op.get(), i);
      }
    }
  }
  const std::vector<std::pair<const Operation*, size_t>>& Of(const Value* v) const {
    static const std::vector<std::pair<const Operation*, size_t>> kNone;
    auto it = readers_.find(v);
    return it == readers_.end() ? kNone : it->second;
  }

 private:
  absl::flat_hash_map<const Value*, std::vector<std::pair<const Operation*, size_t>>> readers_;
};

// The norm whose output `x` is (through view ops), or nullptr.
const Operation* NormBehind(const Value* x) {
  while (x != nullptr && x->producer() != nullptr) {
    const Operation* p = x->producer();
    if (IsNorm(*p)) return x->result_index() == 0 ? p : nullptr;
    if (!ViewOps().contains(p->type()) || p->num_operands() == 0) return nullptr;
    x = p->operand(0);
  }
  return nullptr;
}

// Whether `out` is (through view ops and scale) the logits of cross_entropy_with_softmax.
bool FeedsLogits(const Value* out, const Uses& uses) {
  std::vector<const Value*> work = {out};
  while (!work.empty()) {
    const Value* v = work.back();
    work.pop_back();
    for (const auto& [op, index] : uses.Of(v)) {
      if (op->type() == "cross_entropy_with_softmax" && index == 0) return true;
      if (index == 0 && (ViewOps().contains(op->type()) || op->type() == "scale")) work.push_back(op->result(0));
    }
  }
  return false;
}

// What the output of a column-parallel matmul flows into, up to the linear layers that read it.
struct Region {
  std::vector<const Operation*> rows;      // linear layers reached: row-parallel
  std::vector<const Operation*> reshapes;  // to check that heads stay whole
  const Operation* escape = nullptr;       // the first other op reached (a norm, the loss, ...)
};

Region WalkRegion(const Operation& column, const Uses& uses) {
  Region region;
  std::vector<const Value*> work = {column.result(0)};
  absl::flat_hash_set<const Value*> seen = {column.result(0)};
  while (!work.empty()) {
    const Value* v = work.back();
    work.pop_back();
    for (const auto& [op, index] : uses.Of(v)) {
      if (IsLinear(*op) && index == 0) {
        if (std::find(region.rows.begin(), region.rows.end(), op) == region.rows.end()) region.rows.push_back(op);
        continue;
      }
      if (!InnerOps().contains(op->type())) {
        if (region.escape == nullptr) region.escape = op;
        continue;
      }
      if (op->type() == "reshape") region.reshapes.push_back(op);
      for (const Value* r : op->results()) {
        if (seen.insert(r).second) work.push_back(r);
      }
    }
  }
  return region;
}

// A 1-D parameter added to the column-parallel output right after the matmul: its bias.
Value* BiasOf(const Operation& column, const Uses& uses) {
  const Value* out = column.result(0);
  const int64_t n = out->type().shape.empty() ? -1 : out->type().shape.back();
  for (const auto& [op, index] : uses.Of(out)) {
    if (op->type() != "add" || op->num_operands() != 2) continue;
    Value* other = op->operand(1 - index);
    if (IsParameter(other, 1) && other->type().shape[0] == n) return other;
  }
  return nullptr;
}

// The dims a reshape splits the last input dim into, when it splits it: [b,s,96] → [b,s,4,24]
// gives {2, 3}; otherwise empty.
std::vector<size_t> SplitOfLastDim(const ir::Shape& in, const ir::Shape& out) {
  if (in.empty() || out.size() <= in.size()) return {};
  int64_t product = 1;
  size_t i = out.size();
  while (i > 0 && product < in.back()) product *= out[--i];
  if (product != in.back() || out.size() - i < 2) return {};
  std::vector<size_t> dims;
  for (size_t d = i; d < out.size(); ++d) dims.push_back(d);
  return dims;
}

// Turns the strategy's degrees into the annotations of one forward program: data along dp,
// Megatron column/row pairs along mp, sequence-parallel activations (not the cost-model planner).
class AnnotationPlanner {
 public:
  AnnotationPlanner(const strategy::Strategy& s, const ir::Program& program)
      : s_(s), program_(program), uses_(program), numbering_(program) {}

  absl::StatusOr<StrategyAnnotationPlan> Run();

 private:
  // One planned value: the tensor dim sharded along dp and along mp (-1: Replicate).
  struct Entry {
    int64_t dp_dim = -1;
    int64_t mp_dim = -1;
    std::string reason;
  };

  std::string Name(const Value* v) const {
    return v->name().empty() ? numbering_.Name(v) : absl::StrCat(numbering_.Name(v), " '", v->name(), "'");
  }
  std::string Op(const Operation& op) const { return DescribeOp(op, numbering_); }

  // Plans `v` sharded on `dp_dim` (the batch) along dp and `mp_dim` along mp, each only where
  // its degree is > 1, after checking that each sharded dim divides; `role` and `mp_meaning`
  // (what mp_dim holds) word the error.
  absl::Status Add(const Value* v, int64_t dp_dim, int64_t mp_dim, const std::string& role,
                   const std::string& mp_meaning, std::string reason);
  absl::Status PlanData();
  absl::Status PlanTensorParallel();
  absl::Status PlanSequenceParallel();
  absl::Status CheckWholeHeads(const Operation& column, const Region& region) const;

  const strategy::Strategy& s_;
  const ir::Program& program_;
  Uses uses_;
  ir::ValueNumbering numbering_;
  StrategyAnnotationPlan plan_;
  absl::flat_hash_map<const Value*, Entry> entries_;
  // Found by PlanTensorParallel, used by PlanSequenceParallel.
  std::vector<const Operation*> tp_norms_;  // norms read by column-parallel layers or the head
  std::vector<const Operation*> partials_;  // row-parallel matmuls and vocab-parallel embeddings
  bool tp_found_ = false;                   // any tensor-parallel pattern, annotated or kept
};

absl::Status AnnotationPlanner::Add(const Value* v, int64_t dp_dim, int64_t mp_dim, const std::string& role,
                          const std::string& mp_meaning, std::string reason) {
  if (v->dist_annotated()) {
    plan_.notes.push_back(absl::StrCat(Name(v), ": kept as the program annotates it (", role, ")"));
    return absl::OkStatus();
  }
  if (s_.dp_degree == 1) dp_dim = -1;
  if (s_.mp_degree == 1) mp_dim = -1;
  const ir::Shape& shape = v->type().shape;
  for (const auto& [dim, degree, key, meaning] :
       {std::tuple<int64_t, int64_t, const char*, std::string>{dp_dim, s_.dp_degree, "dp_degree", "the batch"},
        std::tuple<int64_t, int64_t, const char*, std::string>{mp_dim, s_.mp_degree, "mp_degree", mp_meaning}}) {
    if (dim < 0) continue;
    if (dim >= static_cast<int64_t>(shape.size()) || shape[static_cast<size_t>(dim)] % degree != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "annotate from strategy: ", role, " ", Name(v), " ", v->type().ToString(), ": dim ", dim, " (", meaning,
          ", size ", dim < static_cast<int64_t>(shape.size()) ? shape[static_cast<size_t>(dim)] : 0,
          ") is not divisible by ", key, " ", degree));
    }
  }
  auto [it, inserted] = entries_.try_emplace(v, Entry{dp_dim, mp_dim, reason});
  if (inserted) return absl::OkStatus();
  // Two patterns on one value (a data input that is also the input of a sequence-parallel
  // norm): they merge per mesh dim when they agree or one leaves it Replicate.
  Entry& e = it->second;
  auto merge = [](int64_t& have, int64_t want) {
    if (have == -1) have = want;
    return want == -1 || have == want;
  };
  if (!merge(e.dp_dim, dp_dim) || !merge(e.mp_dim, mp_dim)) {
    return absl::InvalidArgumentError(absl::StrCat("annotate from strategy: ", Name(v),
                                                   " is claimed by two patterns with different placements: ", e.reason,
                                                   "; and ", reason));
  }
  if (e.reason != reason) absl::StrAppend(&e.reason, "; ", reason);
  return absl::OkStatus();
}

absl::Status AnnotationPlanner::PlanData() {
  // Without degrees, a program the user annotated on a mesh of several processes places its data
  // itself: completion spreads that mesh. Data annotated on the strategy's one process would put
  // the program on two meshes ({0} and the user's), which no rank's program could be cut from.
  if (s_.dp_degree == 1 && s_.mp_degree == 1) {
    bool several = false;  // the program's placements, or the strategy's annotations, on several processes
    for (const strategy::TensorAnnotation& a : s_.annotations) several = several || a.mesh.size() > 1;
    for (int64_t id = 0; id < program_.num_values() && !several; ++id) {
      const Value* v = program_.FindValue(id);
      several = v->dist_attr() && v->dist_attr()->mesh.size() > 1;
    }
    if (several) {
      plan_.notes.push_back("data inputs: left to completion (the program is annotated on a mesh of several "
                            "processes and the strategy has one rank)");
      return absl::OkStatus();
    }
  }
  absl::StatusOr<BatchInputs> batch = FindBatchInputs(program_);
  if (!batch.ok()) return absl::OkStatus();  // no batched data: nothing to cut along dp
  for (const Value* v : batch->inputs) {
    PDIST_RETURN_IF_ERROR(Add(v, 0, -1, "data input", "the batch",
                              s_.dp_degree > 1 ? "data parallel: the batch along dp" : "a data input (dp_degree 1)"));
  }
  for (const Value* v : program_.block().arguments()) {
    if (v->role() != ir::ValueRole::kDataInput || v->type().rank() == 0 || v->name() == "learning_rate") continue;
    if (v->type().shape[0] == batch->batch) continue;
    plan_.notes.push_back(absl::StrCat(Name(v), " ", v->type().ToString(), ": dim 0 is not the batch (",
                                       batch->batch, "): placed by completion from its uses"));
  }
  return absl::OkStatus();
}

absl::Status AnnotationPlanner::CheckWholeHeads(const Operation& column, const Region& region) const {
  const ir::Shape& out = column.result(0)->type().shape;
  for (const Operation* reshape : region.reshapes) {
    const ir::Shape& in = reshape->operand(0)->type().shape;
    if (in.empty() || in.back() != out.back()) continue;
    const std::vector<size_t> split = SplitOfLastDim(in, reshape->result(0)->type().shape);
    if (split.empty()) continue;
    const int64_t heads = reshape->result(0)->type().shape[split.front()];
    if (heads % s_.mp_degree == 0) continue;
    const Value* w = column.operand(1);
    return absl::InvalidArgumentError(absl::StrCat(
        "annotate from strategy: column-parallel weight ", Name(w), " ", w->type().ToString(), ": its output ",
        reshape->operand(0)->type().ToString(), " is split into ", reshape->result(0)->type().ToString(), " by ",
        Op(*reshape), ", and dim ", split.front(), " (the heads, size ", heads, ") is not divisible by mp_degree ",
        s_.mp_degree, ": the ranks would not hold whole heads"));
  }
  return absl::OkStatus();
}

absl::Status AnnotationPlanner::PlanTensorParallel() {
  absl::flat_hash_set<const Operation*> rows;
  for (const auto& op_ptr : program_.block().ops()) {
    const Operation& op = *op_ptr;
    if (op.type() == "embedding" && op.num_operands() >= 2 && IsParameter(op.operand(1), 2)) {
      PDIST_RETURN_IF_ERROR(Add(op.operand(1), -1, 0, "vocab-parallel embedding table", "the vocabulary",
                                absl::StrCat("vocab-parallel: the table of ", Op(op))));
      partials_.push_back(&op);
      tp_found_ = true;
      continue;
    }
    if (!IsLinear(op)) continue;
    const Value* w = op.operand(1);
    const Operation* norm = NormBehind(op.operand(0));
    if (FeedsLogits(op.result(0), uses_)) {
      PDIST_RETURN_IF_ERROR(Add(w, -1, ColumnDim(op), "LM head weight", "the vocabulary",
                                absl::StrCat("LM head: ", Op(op), " gives the logits of the loss")));
      if (norm != nullptr) tp_norms_.push_back(norm);
      tp_found_ = true;
      continue;
    }
    if (norm == nullptr) continue;
    const Region region = WalkRegion(op, uses_);
    if (region.escape != nullptr || region.rows.empty()) {
      plan_.notes.push_back(absl::StrCat(
          Op(op), ": reads ", Op(*norm), " but is not column-parallel: its output ",
          region.escape != nullptr ? absl::StrCat("reaches ", Op(*region.escape)) : "reaches no linear layer"));
      continue;
    }
    PDIST_RETURN_IF_ERROR(CheckWholeHeads(op, region));
    PDIST_RETURN_IF_ERROR(Add(w, -1, ColumnDim(op), "column-parallel weight", "the output columns",
                              absl::StrCat("column-parallel: ", Op(op), " reads ", Op(*norm))));
    if (const Value* bias = BiasOf(op, uses_)) {
      PDIST_RETURN_IF_ERROR(Add(bias, -1, 0, "column-parallel bias", "the output columns",
                                absl::StrCat("the bias of column-parallel ", Op(op))));
    }
    tp_norms_.push_back(norm);
    tp_found_ = true;
    for (const Operation* row : region.rows) {
      if (!rows.insert(row).second) continue;
      PDIST_RETURN_IF_ERROR(
          Add(row->operand(1), -1, RowDim(*row), "row-parallel weight", "the input rows",
              absl::StrCat("row-parallel: ", Op(*row), " reads the output of column-parallel ", Op(op))));
      partials_.push_back(row);
    }
  }
  if (!tp_found_ && s_.annotations.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "annotate from strategy: mp_degree ", s_.mp_degree,
        " but the program has no tensor-parallel layer (a matmul of a 2-D parameter reading a layer_norm or "
        "rms_norm output, an embedding table, or a head before cross_entropy_with_softmax); give the placements "
        "in the strategy's \"annotations\" instead"));
  }
  return absl::OkStatus();
}

absl::Status AnnotationPlanner::PlanSequenceParallel() {
  auto require_3d = [this](const Value* v, const Operation& op) -> absl::Status {
    if (v->type().rank() == 3) return absl::OkStatus();
    return absl::UnimplementedError(
        absl::StrCat("annotate from strategy: sequence parallelism needs [batch, seq, "
                     "hidden] activations; ",
                     Name(v), " of ", Op(op), " is ", v->type().ToString()));
  };
  // In program order, each once: a norm read by several column-parallel layers (q, k, v or gate
  // and up) is listed once per layer.
  auto in_order = [this](std::vector<const Operation*> ops) {
    std::sort(ops.begin(), ops.end(), [this](const Operation* a, const Operation* b) {
      return numbering_.Number(a->result(0)) < numbering_.Number(b->result(0));
    });
    ops.erase(std::unique(ops.begin(), ops.end()), ops.end());
    return ops;
  };
  for (const Operation* norm : in_order(tp_norms_)) {
    const Value* in = norm->operand(0);
    const Value* out = norm->result(0);
    PDIST_RETURN_IF_ERROR(require_3d(in, *norm));
    PDIST_RETURN_IF_ERROR(Add(in, 0, kSeqAxis, "sequence-parallel activation", "the sequence",
                              absl::StrCat("sequence parallel: the input of ", Op(*norm))));
    PDIST_RETURN_IF_ERROR(Add(out, 0, -1, "sequence-parallel activation", "the sequence",
                              absl::StrCat("sequence parallel: the output of ", Op(*norm),
                                           ", gathered for the tensor-parallel layers it feeds")));
  }
  for (const Operation* op : in_order(partials_)) {
    const Value* out = op->result(0);
    PDIST_RETURN_IF_ERROR(require_3d(out, *op));
    PDIST_RETURN_IF_ERROR(
        Add(out, 0, kSeqAxis, "sequence-parallel activation", "the sequence",
            absl::StrCat("sequence parallel: the Partial sum of ", Op(*op), " reduce-scattered over the sequence")));
  }
  return absl::OkStatus();
}

absl::StatusOr<StrategyAnnotationPlan> AnnotationPlanner::Run() {
  if (s_.pp_degree > 1) {
    return absl::InvalidArgumentError(absl::StrCat("annotate from strategy: pp_degree ", s_.pp_degree,
                                                   " plans one stage at a time: cut the program into stages with "
                                                   "AnnotatePipelineStages (passes/pipeline_stages.h)"));
  }
  for (const auto& [key, degree] : {std::pair{"dp_degree", s_.dp_degree}, std::pair{"mp_degree", s_.mp_degree}}) {
    if (degree < 1) {
      return absl::InvalidArgumentError(absl::StrCat("annotate from strategy: ", key, " must be ≥ 1, got ", degree));
    }
  }
  if (s_.sp && s_.mp_degree == 1) {
    return absl::InvalidArgumentError("annotate from strategy: sp (sequence parallel) needs mp_degree > 1");
  }
  if (!program_.gradients().empty()) {
    return absl::FailedPreconditionError(
        "annotate from strategy: the program already has gradients; annotate the forward program, before autodiff");
  }
  plan_.mesh = ir::ProcessMesh::Range({s_.dp_degree, s_.mp_degree}, {"dp", "mp"});
  PDIST_RETURN_IF_ERROR(PlanData());
  if (s_.mp_degree > 1) PDIST_RETURN_IF_ERROR(PlanTensorParallel());
  if (s_.sp) PDIST_RETURN_IF_ERROR(PlanSequenceParallel());

  std::vector<std::pair<int64_t, const Value*>> order;
  for (const auto& [v, entry] : entries_) order.emplace_back(numbering_.Number(v), v);
  std::sort(order.begin(), order.end());
  for (const auto& [number, v] : order) {
    const Entry& e = entries_.at(v);
    std::vector<Placement> placements(2, Placement::Replicate());
    if (e.dp_dim >= 0) placements[kDp] = Placement::Shard(e.dp_dim);
    if (e.mp_dim >= 0) placements[kMp] = Placement::Shard(e.mp_dim);
    plan_.annotations.push_back({const_cast<Value*>(v), std::move(placements), e.reason});
  }
  return std::move(plan_);
}

// A value's DistAttr before the pass, to undo a failed application.
struct Saved {
  Value* value;
  std::optional<ir::DistAttr> dist;
  bool annotated;
};

}  // namespace

absl::StatusOr<StrategyAnnotationPlan> PlanStrategyAnnotations(const strategy::Strategy& strategy,
                                                               const ir::Program& forward) {
  return AnnotationPlanner(strategy, forward).Run();
}

absl::StatusOr<StrategyAnnotationPlan> AnnotateFromStrategyExplained(const strategy::Strategy& strategy,
                                                                     ir::Program& forward) {
  PDIST_ASSIGN_OR_RETURN(StrategyAnnotationPlan plan, PlanStrategyAnnotations(strategy, forward));
  std::vector<Saved> saved;
  auto restore = [&saved] {
    for (const Saved& s : saved) {
      s.value->set_dist_attr(s.dist);
      s.value->set_dist_annotated(s.annotated);
    }
  };
  for (const StrategyAnnotation& a : plan.annotations) {
    saved.push_back({a.value, a.value->dist_attr(), a.value->dist_annotated()});
    absl::Status status = ir::ShardTensor(a.value, plan.mesh, a.placements);
    if (!status.ok()) {
      restore();
      return WithContext(status, absl::StrCat("annotate from strategy (", a.reason, ")"));
    }
  }
  absl::Status status = ApplyAnnotations(strategy, forward);  // all or nothing itself
  if (!status.ok()) {
    restore();
    return status;
  }
  return plan;
}

absl::Status AnnotateFromStrategy(const strategy::Strategy& strategy, ir::Program& forward) {
  return AnnotateFromStrategyExplained(strategy, forward).status();
}

}  // namespace pdist::passes

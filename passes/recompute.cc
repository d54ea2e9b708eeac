// ApplyRecompute: segments of the forward, what the backward reads of them, and the copies.
#include "passes/recompute.h"

#include <algorithm>
#include <map>
#include <memory>
#include <unordered_map>
#include <unordered_set>

#include "absl/strings/str_cat.h"
#include "ir/op_def.h"
#include "ir/pipeline_job.h"
#include "ir/status.h"
#include "passes/pipeline_stages.h"
#include "passes/repeated_pieces.h"

namespace pdist::passes {
namespace {

using ir::Operation;
using ir::Value;

// A reshard to another mesh is a pipeline send (or receive).
bool MovesToAnotherMesh(const Operation& op) {
  return op.type() == "reshard" && op.operand(0)->dist_attr() && op.result(0)->dist_attr() &&
         op.operand(0)->dist_attr()->mesh != op.result(0)->dist_attr()->mesh;
}

// The mesh an op runs on (its first placed result's), or nullptr before annotation.
const ir::ProcessMesh* MeshOf(const Operation& op) {
  for (const Value* r : op.results()) {
    if (r != nullptr && r->dist_attr()) return &r->dist_attr()->mesh;
  }
  return nullptr;
}

// Drops the cuts inside each repeated layer (passes/repeated_pieces.h) and inside what precedes
// and follows the layers, but those in `must_cut`. Layers are compared with the reshards in
// them transparent; a piece of reshards alone (a pipeline stage boundary between two layers)
// is compared as part of the piece before it, and stays a segment of its own.
void KeepLayerCuts(const std::vector<const Operation*>& forward, const std::vector<bool>& must_cut,
                   std::vector<bool>& cut) {
  const size_t n = forward.size();
  std::vector<size_t> cuts;
  for (size_t c = 1; c < n; ++c) {
    if (!cut[c]) continue;
    size_t e = c;
    while (e < n && forward[e]->type() == "reshard" && (e == c || !cut[e])) ++e;
    const bool reshards_alone = e > c && (e == n || cut[e]);
    if (!reshards_alone) cuts.push_back(c);
  }
  const Pieces pieces = CutIntoPieces(forward, cuts);
  const Repetition layers = LongestRepetition(pieces);
  if (layers.copies < 2) return;
  const size_t end = layers.start + layers.copies * layers.period;
  for (size_t k = 1; k < pieces.begin.size(); ++k) {
    const bool starts_a_layer = k >= layers.start && k < end && (k - layers.start) % layers.period == 0;
    const size_t c = pieces.begin[k];
    if (!starts_a_layer && k != end && !must_cut[c]) cut[c] = false;
  }
}

// Where each forward op's segment starts (segment[i] for the i-th forward op). A segment never
// spans two chunks, two meshes (pipeline stages) or a reshard. Within them:
//   kFinest — cuts where the fewest values made by earlier forward ops are still read by later
//     ones (the residual stream, twice per pre-norm transformer layer);
//   kLayers — those cuts, then the pieces of each repeated layer merged into one segment, and
//     what precedes and follows the layers into one segment each, as the planner's segments
//     (planner/program_segments.h); every cut where nothing repeats;
//   kStages — no cut but the chunks' and meshes'.
std::vector<int64_t> Segments(const std::vector<Operation*>& forward, RecomputeSegments by) {
  const size_t n = forward.size();
  const std::vector<const Operation*> ops(forward.begin(), forward.end());
  const std::vector<int64_t> crossing = CrossingValues(ops);
  const int64_t fewest = n > 1 ? *std::min_element(crossing.begin() + 1, crossing.end()) : 0;
  std::vector<bool> cut(n, false), must_cut(n, false);
  for (size_t c = 1; c < n; ++c) {
    const ir::ProcessMesh* mesh = MeshOf(*forward[c]);
    const ir::ProcessMesh* before = MeshOf(*forward[c - 1]);
    // A reshard is a segment of its own: before completion the one the annotation puts at a
    // pipeline stage boundary is the only sign of the boundary (the ops around it have no
    // placement yet), and what it delivers is then kept for the later segments that read it.
    must_cut[c] = forward[c]->chunk() != forward[c - 1]->chunk() || (mesh && before && *mesh != *before) ||
                  forward[c]->type() == "reshard" || forward[c - 1]->type() == "reshard";
    cut[c] = must_cut[c] || (by != RecomputeSegments::kStages && crossing[c] == fewest);
  }
  if (by == RecomputeSegments::kLayers) KeepLayerCuts(ops, must_cut, cut);
  std::vector<int64_t> segment(n, 0);
  for (size_t c = 1; c < n; ++c) segment[c] = segment[c - 1] + (cut[c] ? 1 : 0);
  return segment;
}

// Replaying a send in the backward would send again. ApplyRecompute keeps what a send delivers,
// so a replay never reaches one; this guards that.
absl::Status CheckReplayable(const Operation& op) {
  if (!MovesToAnotherMesh(op)) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "recompute: the segment to replay contains ", op.Describe(), ", which moves a value from mesh ",
      op.operand(0)->dist_attr()->mesh.ToString(), " to ", op.result(0)->dist_attr()->mesh.ToString(),
      " (another pipeline stage); a segment must not span a stage boundary"));
}

}  // namespace

absl::StatusOr<RecomputeGranularity> ParseRecomputeGranularity(const std::string& name) {
  if (name == "full") return RecomputeGranularity::kFull;
  if (name == "selective") return RecomputeGranularity::kSelective;
  return absl::InvalidArgumentError(absl::StrCat("unknown recompute granularity '", name, "' (expected full or selective)"));
}

const char* RecomputeGranularityName(RecomputeGranularity granularity) {
  return granularity == RecomputeGranularity::kFull ? "full" : "selective";
}

absl::StatusOr<RecomputeSegments> ParseRecomputeSegments(const std::string& name) {
  if (name == "layers") return RecomputeSegments::kLayers;
  if (name == "stages") return RecomputeSegments::kStages;
  if (name == "finest") return RecomputeSegments::kFinest;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown recompute segments '", name, "' (expected layers, stages or finest)"));
}

const char* RecomputeSegmentsName(RecomputeSegments segments) {
  switch (segments) {
    case RecomputeSegments::kFinest: return "finest";
    case RecomputeSegments::kLayers: return "layers";
    case RecomputeSegments::kStages: return "stages";
  }
  return "?";
}

absl::StatusOr<RecomputeReport> ApplyRecompute(ir::Program& program, RecomputeGranularity granularity,
                                               RecomputeSegments segments) {
  if (program.gradients().empty()) {
    return absl::FailedPreconditionError("recompute: the program has no backward (run autodiff first)");
  }
  if (program.local_rank() >= 0) {
    return absl::FailedPreconditionError("recompute: the program is one rank's local program; recompute the global one");
  }
  std::vector<Operation*> forward;
  for (const auto& op : program.block().ops()) {
    if (op->role() == ir::OpRole::kForward) forward.push_back(op.get());
  }
  // Selective keeps what crosses its finest cuts anyway (cheap to keep next to the matmul
  // results it keeps); full replays a layer, or a stage, whole.
  const std::vector<int64_t> segment_of_op =
      Segments(forward, granularity == RecomputeGranularity::kSelective ? RecomputeSegments::kFinest : segments);
  std::unordered_map<const Value*, int64_t> segment;  // of every value a forward op makes
  std::unordered_map<const Value*, Operation*> made_by;
  std::unordered_map<const Operation*, int64_t> op_segment;
  for (size_t i = 0; i < forward.size(); ++i) {
    op_segment[forward[i]] = segment_of_op[i];
    for (Value* r : forward[i]->results()) {
      segment[r] = segment_of_op[i];
      made_by[r] = forward[i];
    }
  }

  // Kept: values read by a later segment's forward or by anything but the forward and backward
  // (the optimizer, the loss), what a pipeline send delivers to another stage (an activation
  // across a cut: the receiver holds it as it would without recompute; a tied table comes in the
  // prologue, outside the forward), and under selective the results of compute-bound ops.
  std::unordered_set<const Value*> kept;
  if (program.loss() != nullptr) kept.insert(program.loss());
  for (const auto& op : program.block().ops()) {
    const bool forward_op = op->role() == ir::OpRole::kForward;
    if (forward_op && MovesToAnotherMesh(*op)) kept.insert(op->results().begin(), op->results().end());
    for (const Value* v : op->operands()) {
      auto s = v == nullptr ? segment.end() : segment.find(v);
      if (s == segment.end()) continue;
      if (forward_op ? op_segment.at(op.get()) > s->second : !ir::IsBackwardRole(op->role())) kept.insert(v);
    }
    if (forward_op && granularity == RecomputeGranularity::kSelective) {
      const ir::OpDef* def = ir::OpRegistry::Global().Find(op->type());
      if (def != nullptr && def->compute_bound) kept.insert(op->results().begin(), op->results().end());
    }
  }

  // Per segment: the backward's first reader, and the ops to replay (the closure of what the
  // backward reads, stopping at kept values), in program order.
  struct Replay {
    Operation* first_reader = nullptr;
    std::unordered_set<const Operation*> ops;
  };
  std::map<int64_t, Replay> replays;
  RecomputeReport report;
  std::unordered_set<const Value*> dropped;
  for (const auto& op : program.block().ops()) {
    if (!ir::IsBackwardRole(op->role())) continue;
    for (size_t k = 0; k < op->num_operands(); ++k) {
      // A use of the type alone (ir::OpDef::type_only_operands) needs no replay: the forward
      // value's type is the copy's.
      const Value* v = op->operand(k);
      if (!ir::ReadsOperand(*op, k) || !segment.count(v) || kept.count(v) || !dropped.insert(v).second) continue;
      report.bytes_dropped += v->type().num_bytes();
      Replay& replay = replays[segment.at(v)];
      if (replay.first_reader == nullptr) replay.first_reader = op.get();
      std::vector<const Value*> work = {v};
      while (!work.empty()) {
        const Value* x = work.back();
        work.pop_back();
        Operation* maker = made_by.at(x);
        if (!replay.ops.insert(maker).second) continue;
        PDIST_RETURN_IF_ERROR(CheckReplayable(*maker));
        for (const Value* in : maker->operands()) {
          if (in != nullptr && segment.count(in) && !kept.count(in) && segment.at(in) == segment.at(x)) work.push_back(in);
        }
      }
    }
  }
  report.values_dropped = static_cast<int64_t>(dropped.size());

  // Copies, placed before each segment's first backward reader; then the backward reads them.
  std::unordered_map<const Operation*, std::vector<std::unique_ptr<Operation>>> before;
  std::unordered_map<const Value*, Value*> copy_of;  // of the dropped values, for the backward
  for (auto& [s, replay] : replays) {
    ++report.segments;
    // A copy reads copies made for its own segment only: a kept result of a replayed op (a
    // value crossing into the next segment) has a copy too, made later in program order.
    std::unordered_map<const Value*, Value*> local;
    for (Operation* op : forward) {
      if (!replay.ops.count(op)) continue;
      std::vector<Value*> operands = op->operands();
      for (Value*& in : operands) {
        if (auto c = local.find(in); in != nullptr && c != local.end() && !kept.count(in)) in = c->second;
      }
      auto copy = std::make_unique<Operation>(op->type(), std::move(operands), op->attrs());
      copy->set_role(ir::OpRole::kBackward);
      copy->set_chunk(op->chunk());
      for (Value* r : op->results()) {
        Value* c = program.NewValue(r->type(), r->role());
        c->set_dist_attr(r->dist_attr());
        c->set_dist_annotated(r->dist_annotated());
        copy->add_result(c);
        local[r] = c;
        if (dropped.count(r)) copy_of[r] = c;
      }
      before[replay.first_reader].push_back(std::move(copy));
      ++report.ops_replayed;
    }
  }
  std::vector<std::unique_ptr<Operation>>& ops = program.block().mutable_ops();
  std::vector<std::unique_ptr<Operation>> out;
  out.reserve(ops.size() + static_cast<size_t>(report.ops_replayed));
  for (std::unique_ptr<Operation>& op : ops) {
    if (auto it = before.find(op.get()); it != before.end()) {
      for (std::unique_ptr<Operation>& c : it->second) out.push_back(std::move(c));
    }
    if (ir::IsBackwardRole(op->role())) {
      for (size_t i = 0; i < op->num_operands(); ++i) {
        // A use of the type alone keeps the forward value: its copy may come later.
        auto c = !ir::ReadsOperand(*op, i) ? copy_of.end() : copy_of.find(op->operand(i));
        if (c != copy_of.end()) op->set_operand(i, c->second);
      }
    }
    out.push_back(std::move(op));
  }
  ops = std::move(out);
  return report;
}

}  // namespace pdist::passes

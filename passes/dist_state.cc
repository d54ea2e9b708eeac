// DistState: per-value distributions during completion, the merge policy, and rule calls on them.
#include "passes/dist_state.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "ir/pipeline_job.h"
#include "ir/status.h"

namespace pdist::passes {

using ir::DimsMapping;
using ir::TensorDistSpec;

int64_t Shardedness(const ir::ProcessMesh& mesh, const DimsMapping& mapping) {
  int64_t pieces = 1;
  for (int64_t m : mapping) {
    if (m >= 0 && m < mesh.ndim()) pieces *= mesh.dim_size(m);
  }
  return pieces;
}

namespace {

// Per-dim union of two mappings of one tensor: -1 yields to a mesh dim. nullopt when a dim gets
// two different mesh dims or one mesh dim would shard two dims.
std::optional<DimsMapping> UnionMapping(const DimsMapping& a, const DimsMapping& b) {
  if (a.size() != b.size()) return std::nullopt;
  DimsMapping out(a.size(), -1);
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i] != -1 && b[i] != -1 && a[i] != b[i]) return std::nullopt;
    out[i] = a[i] != -1 ? a[i] : b[i];
    for (size_t j = 0; j < i; ++j) {
      if (out[i] != -1 && out[j] == out[i]) return std::nullopt;
    }
  }
  return out;
}

bool IsConsumerOrigin(const DistOrigin& origin) {
  return origin.kind == DistOrigin::Kind::kReverse || origin.kind == DistOrigin::Kind::kUpdate;
}

}  // namespace

DistState::DistState(const ir::Program& program) : values_(static_cast<size_t>(program.num_values())), numbering_(program) {
  auto init = [this](const ir::Value* v, bool reshard_result) {
    if (!v->dist_attr()) return;
    const ir::DistAttr& attr = *v->dist_attr();
    ValueDist& s = at(v);
    s.mesh = Intern(attr.mesh);
    s.dims_mapping = attr.dims_mapping;
    s.partial = attr.partial;
    s.fixed = v->dist_annotated() || reshard_result;
    s.origin.kind = v->dist_annotated() ? DistOrigin::Kind::kAnnotation
                    : reshard_result    ? DistOrigin::Kind::kReshardTarget
                                        : DistOrigin::Kind::kInput;
  };
  for (const ir::Value* v : program.block().arguments()) init(v, false);
  for (const auto& op : program.block().ops()) {
    for (const ir::Value* r : op->results()) init(r, IsReshard(*op));
  }
}

MeshId DistState::Intern(const ir::ProcessMesh& mesh) {
  for (size_t i = 0; i < meshes_.size(); ++i) {
    if (meshes_[i] == mesh) return static_cast<MeshId>(i);
  }
  meshes_.push_back(mesh);
  return static_cast<MeshId>(meshes_.size() - 1);
}

ValueDist& DistState::at(const ir::Value* v) {
  const size_t id = static_cast<size_t>(v->id());
  if (id >= values_.size()) values_.resize(id + 1);
  return values_[id];
}

ir::DistAttr DistState::AttrOf(const ir::Value* v) const {
  const ValueDist& s = at(v);
  return ir::DistAttr{mesh(s.mesh), s.dims_mapping, s.partial};
}

bool DistState::Matches(const ir::Value* v, MeshId mesh, const TensorDistSpec& spec) const {
  const ValueDist& s = at(v);
  return s.mesh == mesh && s.dims_mapping == spec.dims_mapping && s.partial == spec.partial;
}

void DistState::Set(const ir::Value* v, MeshId mesh, const TensorDistSpec& spec, const DistOrigin& origin) {
  ValueDist& s = at(v);
  s.mesh = mesh;
  s.dims_mapping = spec.dims_mapping;
  s.partial = spec.partial;
  s.origin = origin;
}

bool DistState::Propose(const ir::Value* v, MeshId mesh, const DimsMapping& mapping, const ir::PartialDims& partial,
                        const DistOrigin& origin) {
  ValueDist& s = at(v);
  if (s.fixed) return false;
  const bool forward = !IsConsumerOrigin(origin);
  if (!s.known() || (forward && s.mesh != mesh)) {
    // Unknown so far, or the producer runs elsewhere: a result lives where its op runs. A
    // consumer says nothing about Partial.
    s.mesh = mesh;
    s.dims_mapping = mapping;
    s.partial = forward ? partial : ir::PartialDims{};
    s.origin = origin;
    return true;
  }
  if (s.mesh != mesh) return false;  // a consumer on another mesh gets a reshard
  // Most proposals repeat what the value has: answer them without building anything.
  if (mapping == s.dims_mapping && (!forward || partial == s.partial)) return false;
  DimsMapping next_mapping;
  if (std::optional<DimsMapping> both = UnionMapping(s.dims_mapping, mapping)) {
    next_mapping = *std::move(both);
  } else {
    // Conflict: the more sharded mapping wins; a tie keeps what the value has, which makes the
    // outcome depend only on the (fixed) sweep order.
    const ir::ProcessMesh& m = this->mesh(mesh);
    next_mapping = Shardedness(m, mapping) > Shardedness(m, s.dims_mapping) ? mapping : s.dims_mapping;
  }
  ir::PartialDims next_partial = forward ? partial : s.partial;
  // A mesh dim cannot both shard a dim and hold partial values.
  for (int64_t m : next_mapping) {
    if (m >= 0) next_partial.erase(m);
  }
  if (next_mapping == s.dims_mapping && next_partial == s.partial) return false;
  s.dims_mapping = std::move(next_mapping);
  s.partial = std::move(next_partial);
  s.origin = origin;
  return true;
}

void DistState::RetargetOrigins(const ir::Operation* from, const ir::Operation* to) {
  for (ValueDist& s : values_) {
    if (s.origin.op == from) s.origin.op = to;
  }
}

MeshId DistState::OpMesh(const ir::Operation& op) const {
  // A backward op runs where the forward values it reads live: the gradient it reads may come
  // from the next pipeline stage (a weight-gradient matmul reads dy first when the weight is
  // transposed, and must still run on the weight's stage).
  if (ir::IsBackwardRole(op.role())) {
    for (const ir::Value* v : op.operands()) {
      if (v != nullptr && v->role() != ir::ValueRole::kGradient && at(v).known()) return at(v).mesh;
    }
  }
  for (const ir::Value* v : op.operands()) {
    if (v != nullptr && at(v).known()) return at(v).mesh;
  }
  for (const ir::Value* v : op.results()) {
    if (at(v).known()) return at(v).mesh;
  }
  return -1;
}

DistState::View DistState::ViewOf(const ir::Value* v, MeshId mesh) const {
  const ValueDist& s = at(v);
  if (!s.known()) return {};
  if (s.mesh == mesh) return {&s.dims_mapping, &s.partial};
  if (this->mesh(s.mesh).shape() == this->mesh(mesh).shape()) return {&s.dims_mapping, nullptr};
  return {};
}

TensorDistSpec DistState::SpecOf(const ir::Value* v, MeshId mesh) const {
  if (v == nullptr) return TensorDistSpec{{0}, {}, {}};
  const View view = ViewOf(v, mesh);
  return TensorDistSpec{v->type().shape, view.mapping ? *view.mapping : DimsMapping(v->type().shape.size(), -1),
                        view.partial ? *view.partial : ir::PartialDims{}};
}

void DistState::AppendKey(const ir::Value* v, MeshId mesh, std::vector<int64_t>& key) const {
  // Separators below -1, the smallest mapping entry; partial dims and reduce types are >= 0.
  constexpr int64_t kAbsent = -2, kEndMapping = -3, kEndPartial = -4;
  if (v == nullptr) {
    key.push_back(kAbsent);
    return;
  }
  const View view = ViewOf(v, mesh);
  if (view.mapping) {
    key.insert(key.end(), view.mapping->begin(), view.mapping->end());
  } else {
    key.insert(key.end(), v->type().shape.size(), -1);
  }
  key.push_back(kEndMapping);
  if (view.partial) {
    for (const auto& [dim, type] : *view.partial) {
      key.push_back(dim);
      key.push_back(static_cast<int64_t>(type));
    }
  }
  key.push_back(kEndPartial);
}

absl::StatusOr<const ir::SpmdResult*> DistState::RunRule(const ir::Operation& op, MeshId mesh,
                                                         SpmdDirection direction) {
  const bool forward = direction == SpmdDirection::kForward;
  auto [slot, added] = memo_index_.try_emplace(&op, memo_.size());
  if (added) memo_.emplace_back();
  RuleMemo& memo = memo_[slot->second][forward ? 0 : 1];
  // Rules are pure: the same specs on the same mesh give the same answer. After the first
  // sweep most ops see what they saw before, so this saves most rule calls. The specs are
  // compared through a flat key, which costs no allocation once key_ has grown.
  key_.clear();
  key_.push_back(mesh);
  for (const ir::Value* v : op.operands()) AppendKey(v, mesh, key_);
  if (!forward) {
    for (const ir::Value* r : op.results()) AppendKey(r, mesh, key_);
  }
  if (memo.result && memo.key == key_) return &*memo.result;

  SpmdCall call;
  call.def = ir::OpRegistry::Global().Find(op.type());
  if (call.def == nullptr) return absl::NotFoundError(absl::StrCat("unknown op type '", op.type(), "'"));
  call.attrs = &op.attrs();
  call.mesh_shape = this->mesh(mesh).shape();
  call.mesh = &this->mesh(mesh);
  call.specs_verified = true;  // made from DistAttrs the verifier (or ShardTensor) checked
  call.direction = direction;
  call.inputs.reserve(op.num_operands());
  for (const ir::Value* v : op.operands()) call.inputs.push_back(SpecOf(v, mesh));
  if (forward) call.result_shapes.emplace();
  for (const ir::Value* r : op.results()) {
    if (forward) {
      call.result_shapes->push_back(r->type().shape);
    } else {
      call.outputs.push_back(SpecOf(r, mesh));
    }
  }
  absl::StatusOr<ir::SpmdResult> result = RunSpmdRule(call);
  if (!result.ok()) return WithContext(result.status(), DescribeOp(op, numbering_));
  memo.key = key_;
  memo.result = *std::move(result);
  return &*memo.result;
}

std::string DescribeOp(const ir::Operation& op, const ir::ValueNumbering& numbering) {
  auto names = [&numbering](const std::vector<ir::Value*>& values) {
    std::vector<std::string> out;
    out.reserve(values.size());
    for (const ir::Value* v : values) out.push_back(numbering.Name(v));
    return absl::StrJoin(out, ", ");
  };
  return absl::StrCat(names(op.results()), " = ", op.type(), "(", names(op.operands()), ")");
}

}  // namespace pdist::passes

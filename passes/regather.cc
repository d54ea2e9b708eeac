// RegatherInBackward: clone each gather chain the backward reads, just before its first reader.
#include "passes/regather.h"

#include <algorithm>
#include <map>
#include <memory>
#include <unordered_map>
#include <utility>
#include <vector>

#include "ir/pipeline_job.h"
#include "ir/status.h"

namespace pdist::passes {
namespace {

using ir::Operation;
using ir::Value;


bool MadeInForward(const Value* v) { return v->producer() != nullptr && v->producer()->role() == ir::OpRole::kForward; }

// A reshard that only gathers: same mesh, nothing Partial, and every dim either kept or made
// whole, at least one made whole.
bool OnlyGathers(const Operation& reshard) {
  const Value* from = reshard.operand(0);
  const Value* to = reshard.result(0);
  if (!from->dist_attr() || !to->dist_attr()) return false;
  const ir::DistAttr& a = *from->dist_attr();
  const ir::DistAttr& b = *to->dist_attr();
  if (a.mesh != b.mesh || a.is_partial() || b.is_partial() || a.dims_mapping.size() != b.dims_mapping.size()) {
    return false;
  }
  bool gathers = false;
  for (size_t d = 0; d < a.dims_mapping.size(); ++d) {
    if (a.dims_mapping[d] == b.dims_mapping[d]) continue;
    if (b.dims_mapping[d] != -1) return false;
    gathers = true;
  }
  return gathers;
}

// The forward ops that make `v` from a forward activation by one gathering reshard and casts, in
// program order; empty when `v` is not made so.
std::vector<Operation*> GatherChain(Value* v) {
  std::vector<Operation*> chain;
  Value* at = v;
  while (MadeInForward(at) && at->producer()->type() == "cast") {
    chain.push_back(at->producer());
    at = at->producer()->operand(0);
  }
  if (!MadeInForward(at) || at->producer()->type() != "reshard" || !OnlyGathers(*at->producer()) ||
      !MadeInForward(at->producer()->operand(0))) {
    return {};
  }
  chain.push_back(at->producer());
  std::reverse(chain.begin(), chain.end());
  return chain;
}

int64_t LocalBytes(const Value& v) {
  ir::TensorType local = v.type();
  if (v.dist_attr()) local.shape = v.dist_attr()->LocalShape(v.type().shape);
  return local.num_bytes();
}

}  // namespace

absl::StatusOr<Regathered> RegatherInBackward(ir::Program& program) {
  Regathered out;
  std::vector<std::unique_ptr<Operation>> old = std::move(program.block().mutable_ops());
  program.block().mutable_ops().clear();
  // (forward value, model chunk) → its clone in that chunk's backward.
  std::map<std::pair<const Value*, int64_t>, Value*> regathered;
  std::unordered_map<const Value*, bool> not_a_chain;
  for (std::unique_ptr<Operation>& op : old) {
    if (ir::IsBackwardRole(op->role())) {
      for (size_t k = 0; k < op->num_operands(); ++k) {
        Value* v = op->operand(k);
        if (v == nullptr || !MadeInForward(v) || not_a_chain.count(v) != 0) continue;
        auto done = regathered.find({v, op->chunk()});
        if (done == regathered.end()) {
          const std::vector<Operation*> chain = GatherChain(v);
          if (chain.empty()) {
            not_a_chain[v] = true;
            continue;
          }
          Value* input = chain.front()->operand(0);  // the shard, now kept for the backward instead
          for (const Operation* link : chain) {
            auto clone = std::make_unique<Operation>(link->type(), std::vector<Value*>{input}, link->attrs());
            clone->set_role(ir::OpRole::kBackward);
            clone->set_chunk(op->chunk());
            Value* result = program.NewValue(link->result(0)->type(), link->result(0)->role());
            result->set_dist_attr(link->result(0)->dist_attr());
            clone->add_result(result);
            program.block().Append(std::move(clone));
            input = result;
          }
          done = regathered.emplace(std::pair{v, op->chunk()}, input).first;
          ++out.values;
          out.bytes_saved += LocalBytes(*v) - LocalBytes(*chain.front()->operand(0));
        }
        op->set_operand(k, done->second);
      }
    }
    program.block().Append(std::move(op));
  }
  return out;
}

}  // namespace pdist::passes

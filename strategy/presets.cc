// Ready-made annotation sets (strategy/presets.h).
#include "strategy/presets.h"

namespace pdist::strategy {

std::vector<TensorAnnotation> MegatronGptAnnotations(const ir::ProcessMesh& mesh, const std::string& prefix) {
  using ir::Placement;
  const Placement R = Placement::Replicate();
  const std::vector<Placement> batch = {Placement::Shard(0), R};  // along dp
  const std::vector<Placement> rows = {R, Placement::Shard(0)};   // along mp: a weight's rows, a bias
  const std::vector<Placement> cols = {R, Placement::Shard(1)};   // along mp: a weight's columns
  const std::string layer = prefix + ".h.*.";
  return {
      {"tokens", mesh, batch},
      {"labels", mesh, batch},
      {prefix + ".wte", mesh, rows},  // vocab-parallel embedding
      {layer + "attn.qkv.weight", mesh, cols},
      {layer + "attn.qkv.bias", mesh, rows},
      {layer + "attn.proj.weight", mesh, rows},
      {layer + "mlp.up.weight", mesh, cols},
      {layer + "mlp.up.bias", mesh, rows},
      {layer + "mlp.down.weight", mesh, rows},
      {prefix + ".lm_head.weight", mesh, cols},  // logits split over the vocabulary
  };
}

}  // namespace pdist::strategy

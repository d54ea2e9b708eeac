// Ready-made per-tensor annotations for common layouts, written against the parameter names of
// ir/models/decoder.h.
//
//   strategy::Strategy s{.dp_degree = 2, .mp_degree = 2};
//   s.annotations = strategy::MegatronGptAnnotations(ir::ProcessMesh::Range({2, 2}, {"dp", "mp"}));
//   PDIST_RETURN_IF_ERROR(passes::ApplyAnnotations(s, program));   // then autodiff, completion
#pragma once

#include <string>
#include <vector>

#include "ir/dist/process_mesh.h"
#include "strategy/strategy.h"

namespace pdist::strategy {

// Megatron-LM's tensor parallelism plus data parallelism for an untied GPT (ir/models/gpt.h) on a
// 2-D mesh [dp, mp]: tokens and labels Shard(0) along dp; on mp, the qkv and mlp.up weights
// column-parallel (Shard(1), their biases Shard(0)), attn.proj and mlp.down row-parallel
// (Shard(0)), the token embedding vocab-parallel (Shard(0)) and the head split over the
// vocabulary (Shard(1)). Everything else is left to completion.
std::vector<TensorAnnotation> MegatronGptAnnotations(const ir::ProcessMesh& mesh, const std::string& prefix = "gpt");

}  // namespace pdist::strategy

// ApplyAnnotations: a strategy's per-tensor annotations applied to a program, as if the user had
// called shard_tensor on each matching block argument.
//
//   "annotations": [{"tensor": "gpt.h.*.attn.qkv.weight",
//                    "mesh": {"shape": [2, 2], "dim_names": ["dp", "mp"]},
//                    "placements": ["Replicate()", "Shard(1)"]}]
//   PDIST_RETURN_IF_ERROR(ApplyAnnotations(strategy, program));
//   // every gpt.h.<i>.attn.qkv.weight now prints  dist! {mesh: [2,2] [dp,mp], dims_mapping: [-1,1]}
#pragma once

#include "absl/status/status.h"
#include "ir/glob.h"
#include "ir/program.h"
#include "strategy/strategy.h"

namespace pdist::passes {

// Annotation patterns match tensor names by ir::GlobMatch (ir/glob.h).
using ir::GlobMatch;

// Annotates every block argument whose name matches an annotation's `tensor` pattern
// (ir::ShardTensor: the DistAttr is set and marked annotated, replacing any earlier one).
// InvalidArgument naming the annotation ("annotations[1]") when its pattern matches no
// argument, when its placements do not fit a matched tensor, or when two annotations give one
// tensor different placements. All or nothing: on error the program is unchanged.
absl::Status ApplyAnnotations(const strategy::Strategy& strategy, ir::Program& program);

}  // namespace pdist::passes

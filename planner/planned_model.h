// The model a plan is for, in the form the profiler needs: the forward as segments (embedding,
// repeated layers, head — or whatever the graph has), and a program in which each kind of
// segment can be cut out as a pipeline stage of its own (planner/profile.h), at any micro-batch
// size.
//
//   PDIST_ASSIGN_OR_RETURN(PlannedModel m, ModelFromSpec("gpt:layers=96,hidden=12288,heads=96,vocab=51200,seq=2048", 1536));
//   m.layers          // 96; the profiler builds a 1-layer copy, so a 175B model profiles in milliseconds
//   PDIST_ASSIGN_OR_RETURN(PlannedModel f, ModelFromProgram(std::move(program_from_model_pb), "model.pb"));
//   f.global_batch    // the program's batch: a model.pb is profiled whole, cut into micro-batches
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "ir/program.h"
#include "planner/program_segments.h"

namespace pdist::planner {

// A program to profile and how to cut it: split into `accumulate_steps` micro-batches (of the
// size asked for), then into pipeline stages at `split_before`; stage s measures the segments of
// kind `stage_kind[s]` (-1: a stage of segments measured elsewhere, there only to be cut off).
struct ProfileProgram {
  ir::Program forward;
  int64_t accumulate_steps = 1;
  std::vector<std::string> split_before;
  std::vector<int64_t> stage_kind;
};

struct PlannedModel {
  std::string description;  // "gpt:layers=96,hidden=12288,..." or "model.pb (12 repeated layers of 17 ops; ...)"
  // The forward in program order as the planner prices and cuts it: segments of one kind cost
  // the same; a pipeline stage starts at a segment's mark (planner/program_segments.h).
  std::vector<ProgramSegment> segments;
  int64_t kinds = 0;
  int64_t layers = 0;        // repeated layers among the segments (0 when nothing repeats)
  int64_t global_batch = 1;  // sequences per step
  int64_t seq_len = 1;
  ir::DataType dtype = ir::DataType::kFloat32;  // of the parameters: the peak rate MFU counts against
  std::function<absl::StatusOr<ProfileProgram>(int64_t micro_batch)> profile_program;
  // The whole forward of a model.pb, to find where a user's `pipeline.split_before` cuts it
  // (planner/stage_layout.h); null for a spec, whose segments' marks are the cuts it takes.
  std::shared_ptr<const ir::Program> forward;
};

// The segment kinds of a model from a spec: embedding, one per layer, head.
inline constexpr int64_t kEmbeddingKind = 0, kLayerKind = 1, kHeadKind = 2;

// "gpt:layers=L,hidden=H,heads=A,vocab=V,seq=S[,ffn=F][,tied=0|1][,dtype=f32|bf16|f16|f64]
// [,f32_loss=0|1]" and the same for "llama:" (f32_loss: the loss on an f32 copy of bf16/f16
// logits, as Megatron-LM computes it; GptConfig::f32_loss). InvalidArgument naming an unknown model or key or a bad value.
absl::StatusOr<PlannedModel> ModelFromSpec(const std::string& spec, int64_t global_batch);

// A forward program with a loss (a model.pb), of any structure and parameter names: its
// segments come from the graph (planner/program_segments.h). Batch and sequence come from its
// first batch input [batch, seq, ...] (passes/batch_inputs.h), the batch at most 2^24.
// InvalidArgument naming what is missing.
absl::StatusOr<PlannedModel> ModelFromProgram(ir::Program program, std::string description);

}  // namespace pdist::planner

// The model a plan is for, in the form the profiler needs: a program in which layers 1 and 2 of
// the repeated stack can be cut out as pipeline stages of their own (planner/profile.h), at any
// micro-batch size.
//
//   PDIST_ASSIGN_OR_RETURN(PlannedModel m, ModelFromSpec("gpt:layers=96,hidden=12288,heads=96,vocab=51200,seq=2048", 1536));
//   m.layers          // 96; the profiler builds 3-layer copies, so a 175B model profiles in milliseconds
//   PDIST_ASSIGN_OR_RETURN(PlannedModel f, ModelFromProgram(std::move(program_from_model_pb)));
//   f.global_batch    // the program's batch: a model.pb is profiled whole, cut into micro-batches
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "ir/program.h"

namespace pdist::planner {

// A program to profile and how to cut it: split into `accumulate_steps` micro-batches (of the
// size asked for), then stages start at the layers `split_before` names (layer 1, layer 2).
struct ProfileProgram {
  ir::Program forward;
  int64_t layers = 0;  // repeated layers in `forward`
  int64_t accumulate_steps = 1;
  std::vector<std::string> split_before;
};

struct PlannedModel {
  std::string description;  // "gpt:layers=96,hidden=12288,..." or "model.pb (12 layers of gpt.h.*)"
  int64_t layers = 0;
  int64_t global_batch = 1;  // sequences per step
  int64_t seq_len = 1;
  ir::DataType dtype = ir::DataType::kFloat32;  // of the parameters: the peak rate MFU counts against
  // Stage marks (strategy pipeline.split_before): a stage that starts at layer i starts at
  // "<layer_prefix>.<i>.*"; one that starts after the last layer starts at `head_mark`.
  std::string layer_prefix;
  std::string head_mark;
  std::function<absl::StatusOr<ProfileProgram>(int64_t micro_batch)> profile_program;
};

// "gpt:layers=L,hidden=H,heads=A,vocab=V,seq=S[,ffn=F][,tied=0|1][,dtype=f32|bf16|f16|f64]" and
// the same for "llama:". InvalidArgument naming an unknown model or key or a bad value.
absl::StatusOr<PlannedModel> ModelFromSpec(const std::string& spec, int64_t global_batch);

// A forward program with a loss (a model.pb), whose parameters number their layers
// "<prefix>.<i>.<rest>" (at least 3 layers). Batch and sequence come from its first data input
// [batch, seq, ...]. InvalidArgument naming what is missing.
absl::StatusOr<PlannedModel> ModelFromProgram(ir::Program program, std::string description);

}  // namespace pdist::planner

// Shared by the C API's translation units (c_api.cc, c_api_feed.cc, c_api_program.cc,
// c_api_plan.cc): one thread-local last error, one status → pdist_status mapping, the handles.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "engine/c_api.h"
#include "engine/engine.h"
#include "ir/program.h"

struct pdist_engine {
  std::unique_ptr<pdist::engine::Engine> engine;
  // One call at a time (threads sharing an engine crashed it: a user probe); recursive, so that a
  // step callback may call back into its engine (its step, a save) on fit's thread.
  mutable std::recursive_mutex mu;
  // The last pdist_engine_predict's outputs; `outputs` points into the other three.
  std::vector<pdist::exec::Tensor> predicted;
  std::vector<std::string> predicted_names;
  std::vector<std::vector<int64_t>> predicted_shapes;
  std::vector<pdist_output> outputs;
};

struct pdist_program {
  pdist::ir::Program program;
  std::string printed;  // the last pdist_program_print result, owned here
  std::string planned;  // the last pdist_program_plan result, owned here
};

namespace pdist::engine::capi {

// Records the message (empty on OK) for pdist_last_error() and maps the code:
//   return ToCode(ir::SaveProgram(program, path));
pdist_status ToCode(const absl::Status& status);
// InvalidArgument with `message`, for NULL or malformed arguments.
pdist_status Fail(const char* message);
// InvalidArgument for an options JSON key of the wrong type: `<what>: "<key>" must be
// <expected>, got <value>` (what: "plan options", "import options").
absl::Status WrongOptionType(const char* what, const std::string& key, const char* expected, const std::string& value);

}  // namespace pdist::engine::capi

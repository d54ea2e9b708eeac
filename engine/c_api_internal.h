// Shared by the C API's translation units (c_api.cc, c_api_program.cc): one thread-local last
// error and one status → pdist_status mapping.
#pragma once

#include "absl/status/status.h"
#include "engine/c_api.h"

namespace pdist::engine::capi {

// Records the message (empty on OK) for pdist_last_error() and maps the code:
//   return ToCode(ir::SaveProgram(program, path));
pdist_status ToCode(const absl::Status& status);
// InvalidArgument with `message`, for NULL or malformed arguments.
pdist_status Fail(const char* message);

}  // namespace pdist::engine::capi

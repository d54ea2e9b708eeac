// Error-propagation macros for absl::Status / absl::StatusOr (this abseil LTS has none).
//
//   PDIST_RETURN_IF_ERROR(Verify(program));
//   PDIST_ASSIGN_OR_RETURN(Program p, ParseProgram(text));
#pragma once

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define PDIST_STATUS_CONCAT_INNER_(a, b) a##b
#define PDIST_STATUS_CONCAT_(a, b) PDIST_STATUS_CONCAT_INNER_(a, b)

#define PDIST_RETURN_IF_ERROR(expr)                        \
  do {                                                     \
    ::absl::Status pdist_status_ = (expr);                 \
    if (!pdist_status_.ok()) return pdist_status_;         \
  } while (false)

#define PDIST_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                 \
  if (!tmp.ok()) return std::move(tmp).status();     \
  lhs = std::move(tmp).value()

#define PDIST_ASSIGN_OR_RETURN(lhs, expr) \
  PDIST_ASSIGN_OR_RETURN_IMPL_(PDIST_STATUS_CONCAT_(pdist_statusor_, __LINE__), lhs, expr)

namespace pdist {

// Returns `status` with `context: ` prepended to its message (same code).
inline absl::Status WithContext(const absl::Status& status, std::string_view context) {
  if (status.ok()) return status;
  return absl::Status(status.code(), std::string(context) + ": " + std::string(status.message()));
}

}  // namespace pdist

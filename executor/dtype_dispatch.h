// Runtime dtype → C++ type dispatch for kernels.
//
//   PDIST_DISPATCH_FLOAT(x.dtype(), T, { Add<T>(x, y, out); });   // f32, f64; else Unimplemented
#pragma once

#include <cstdint>

#include <Eigen/Core>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "ir/types.h"

namespace pdist::exec {

using bfloat16 = Eigen::bfloat16;
using float16 = Eigen::half;

}  // namespace pdist::exec

#define PDIST_DTYPE_CASE_(enum_value, cpp_type, T, ...) \
  case ::pdist::ir::DataType::enum_value: {            \
    using T = cpp_type;                                \
    __VA_ARGS__;                                       \
    break;                                             \
  }

// Every dtype. Only for code that cannot fail (conversions).
#define PDIST_DISPATCH_ALL(dtype, T, ...)                                   \
  switch (dtype) {                                                          \
    PDIST_DTYPE_CASE_(kFloat32, float, T, __VA_ARGS__)                      \
    PDIST_DTYPE_CASE_(kFloat64, double, T, __VA_ARGS__)                     \
    PDIST_DTYPE_CASE_(kBFloat16, ::pdist::exec::bfloat16, T, __VA_ARGS__)   \
    PDIST_DTYPE_CASE_(kFloat16, ::pdist::exec::float16, T, __VA_ARGS__)     \
    PDIST_DTYPE_CASE_(kInt32, int32_t, T, __VA_ARGS__)                      \
    PDIST_DTYPE_CASE_(kInt64, int64_t, T, __VA_ARGS__)                      \
    PDIST_DTYPE_CASE_(kBool, bool, T, __VA_ARGS__)                          \
  }

// float32 and float64; any other dtype returns Unimplemented from the enclosing function.
#define PDIST_DISPATCH_FLOAT(dtype, T, ...)                                                        \
  switch (dtype) {                                                                                 \
    PDIST_DTYPE_CASE_(kFloat32, float, T, __VA_ARGS__)                                             \
    PDIST_DTYPE_CASE_(kFloat64, double, T, __VA_ARGS__)                                            \
    default:                                                                                       \
      return ::absl::UnimplementedError(                                                           \
          ::absl::StrCat("no CPU kernel for dtype ", ::pdist::ir::DataTypeName(dtype), " (f32, f64 only)")); \
  }

// f32, f64, bf16 and f16, for loops whose per-element arithmetic is right in every float type
// (Eigen's bfloat16 and half add in f32 and round once).
#define PDIST_DISPATCH_ANY_FLOAT(dtype, T, ...)                                                   \
  switch (dtype) {                                                                                 \
    PDIST_DTYPE_CASE_(kFloat32, float, T, __VA_ARGS__)                                             \
    PDIST_DTYPE_CASE_(kFloat64, double, T, __VA_ARGS__)                                            \
    PDIST_DTYPE_CASE_(kBFloat16, ::pdist::exec::bfloat16, T, __VA_ARGS__)                          \
    PDIST_DTYPE_CASE_(kFloat16, ::pdist::exec::float16, T, __VA_ARGS__)                            \
    default:                                                                                       \
      return ::absl::UnimplementedError(                                                           \
          ::absl::StrCat("expected a float dtype (f32, f64, bf16, f16), got ", ::pdist::ir::DataTypeName(dtype))); \
  }

// Integer index types (embedding ids, labels).
#define PDIST_DISPATCH_INDEX(dtype, T, ...)                                                     \
  switch (dtype) {                                                                              \
    PDIST_DTYPE_CASE_(kInt32, int32_t, T, __VA_ARGS__)                                          \
    PDIST_DTYPE_CASE_(kInt64, int64_t, T, __VA_ARGS__)                                          \
    default:                                                                                    \
      return ::absl::UnimplementedError(                                                        \
          ::absl::StrCat("index tensor must be i32 or i64, got ", ::pdist::ir::DataTypeName(dtype))); \
  }

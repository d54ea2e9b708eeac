// DataType and TensorType: the static type of every value in a program.
//
//   f32[8,32,64]   — TensorType{{8,32,64}, DataType::kFloat32}
//   i64[]          — a scalar
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace pdist::ir {

enum class DataType : int8_t {
  kFloat32 = 0,
  kFloat64 = 1,
  kBFloat16 = 2,
  kFloat16 = 3,
  kInt32 = 4,
  kInt64 = 5,
  kBool = 6,
};

// Short name used in the text form: f32, f64, bf16, f16, i32, i64, bool.
const char* DataTypeName(DataType dtype);
absl::StatusOr<DataType> ParseDataType(std::string_view name);
int64_t DataTypeSize(DataType dtype);
bool IsFloatingPoint(DataType dtype);
// bf16 and f16: stored in 2 bytes, computed in f32 by every kernel (PyTorch's "opmath" type).
bool IsLowPrecisionFloat(DataType dtype);
// The type a kernel computes `dtype` in: f32 for bf16 and f16, `dtype` itself otherwise.
DataType ComputeDtype(DataType dtype);

using Shape = std::vector<int64_t>;

int64_t NumElements(const Shape& shape);
std::string ShapeToString(const Shape& shape);  // "[8,32,64]"

struct TensorType {
  Shape shape;
  DataType dtype = DataType::kFloat32;

  int64_t rank() const { return static_cast<int64_t>(shape.size()); }
  int64_t num_elements() const { return NumElements(shape); }
  int64_t num_bytes() const { return num_elements() * DataTypeSize(dtype); }
  std::string ToString() const;  // "f32[8,32,64]"

  friend bool operator==(const TensorType&, const TensorType&) = default;
};

}  // namespace pdist::ir

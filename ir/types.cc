// DataType names and sizes, TensorType printing.
#include "ir/types.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

// Note: this abseil build has its own absl::string_view (not std::string_view); convert
// std::string_view to std::string before passing it to StrCat.

namespace pdist::ir {

namespace {
struct DataTypeInfo {
  DataType dtype;
  const char* name;
  int64_t size;
  bool floating;
};
constexpr DataTypeInfo kDataTypes[] = {
    {DataType::kFloat32, "f32", 4, true},  {DataType::kFloat64, "f64", 8, true},
    {DataType::kBFloat16, "bf16", 2, true}, {DataType::kFloat16, "f16", 2, true},
    {DataType::kInt32, "i32", 4, false},   {DataType::kInt64, "i64", 8, false},
    {DataType::kBool, "bool", 1, false},
};
const DataTypeInfo& Info(DataType dtype) { return kDataTypes[static_cast<int>(dtype)]; }
}  // namespace

const char* DataTypeName(DataType dtype) { return Info(dtype).name; }
int64_t DataTypeSize(DataType dtype) { return Info(dtype).size; }
bool IsFloatingPoint(DataType dtype) { return Info(dtype).floating; }

bool IsLowPrecisionFloat(DataType dtype) { return dtype == DataType::kBFloat16 || dtype == DataType::kFloat16; }

DataType ComputeDtype(DataType dtype) { return IsLowPrecisionFloat(dtype) ? DataType::kFloat32 : dtype; }

absl::StatusOr<DataType> ParseDataType(std::string_view name) {
  for (const DataTypeInfo& info : kDataTypes) {
    if (name == info.name) return info.dtype;
  }
  // Long names accepted on input (Paddle spells them this way).
  if (name == "float32") return DataType::kFloat32;
  if (name == "float64") return DataType::kFloat64;
  if (name == "bfloat16") return DataType::kBFloat16;
  if (name == "float16") return DataType::kFloat16;
  if (name == "int32") return DataType::kInt32;
  if (name == "int64") return DataType::kInt64;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown data type '", std::string(name), "' (expected f32, f64, bf16, f16, i32, i64 or bool)"));
}

int64_t NumElements(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string ShapeToString(const Shape& shape) { return absl::StrCat("[", absl::StrJoin(shape, ","), "]"); }

std::string TensorType::ToString() const { return absl::StrCat(DataTypeName(dtype), ShapeToString(shape)); }

}  // namespace pdist::ir

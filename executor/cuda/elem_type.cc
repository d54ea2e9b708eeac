// ElemTypeOf: the float dtypes the CUDA launchers compute in, and back.
#include "executor/cuda/elem_type.h"

#include "absl/strings/str_cat.h"

namespace pdist::exec::cuda {

absl::StatusOr<ElemType> ElemTypeOf(const char* op, ir::DataType dtype) {
  switch (dtype) {
    case ir::DataType::kFloat32: return ElemType::kF32;
    case ir::DataType::kFloat64: return ElemType::kF64;
    case ir::DataType::kBFloat16: return ElemType::kBF16;
    case ir::DataType::kFloat16: return ElemType::kF16;
    default:
      return absl::UnimplementedError(absl::StrCat(op, " on cuda: ", ir::DataTypeName(dtype),
                                                   " operands (the CUDA kernel takes f32, f64, bf16, f16)"));
  }
}

ir::DataType DataTypeOf(ElemType type) {
  switch (type) {
    case ElemType::kF64: return ir::DataType::kFloat64;
    case ElemType::kBF16: return ir::DataType::kBFloat16;
    case ElemType::kF16: return ir::DataType::kFloat16;
    case ElemType::kF32: break;
  }
  return ir::DataType::kFloat32;
}

int64_t ElemTypeSize(ElemType type) { return ir::DataTypeSize(DataTypeOf(type)); }

}  // namespace pdist::exec::cuda

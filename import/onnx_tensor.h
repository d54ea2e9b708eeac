// ONNX tensors as pdist sees them: an initializer, a Constant's value or a test case's input,
// read out of its TensorProto into a dtype, a shape and little-endian row-major bytes.
//
//   PDIST_ASSIGN_OR_RETURN(OnnxTensor t, ReadOnnxTensor(initializer));   // f32[64,32]
//   PDIST_ASSIGN_OR_RETURN(std::vector<int64_t> shape, t.Ints());       // an int tensor's numbers
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "ir/program.h"
#include "ir/types.h"

namespace onnx {
class TensorProto;
}

namespace pdist::onnx_import {

struct OnnxTensor {
  ir::TensorType type;
  std::shared_ptr<const ir::StoredNumbers> numbers;  // numbers->dtype == type.dtype

  int64_t num_elements() const { return type.num_elements(); }
  // Element i as a double (any dtype; 16-bit floats widened exactly).
  double At(int64_t i) const;
  // Every element of an integer tensor (shapes, axes, split sizes); an error for a float one.
  absl::StatusOr<std::vector<int64_t>> Ints() const;
};

// The pdist dtype of an ONNX TensorProto.DataType code; errors name the ONNX type.
absl::StatusOr<ir::DataType> DataTypeOfOnnx(int32_t onnx_type);

// Reads `proto`'s numbers (raw_data or the typed fields). Refuses external data, a shape with a
// negative dimension, and a byte count that is not the shape's.
absl::StatusOr<OnnxTensor> ReadOnnxTensor(const onnx::TensorProto& proto);

// A tensor built here (folded constants): `values` converted to `dtype`.
OnnxTensor MakeOnnxTensor(ir::TensorType type, const std::vector<double>& values);

}  // namespace pdist::onnx_import

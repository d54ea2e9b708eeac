// Small helpers for op tests: literal tensors, running an op that must succeed, and the error
// that shape inference reports.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "executor/tensor.h"
#include "ir/builder.h"
#include "tests/testing/op_testing.h"

namespace pdist::testing {

// A tensor of `dtype` (float64 by default) holding `values` in row-major order.
inline exec::Tensor Literal(const ir::Shape& shape, const std::vector<double>& values,
                            ir::DataType dtype = ir::DataType::kFloat64) {
  EXPECT_EQ(ir::NumElements(shape), static_cast<int64_t>(values.size())) << ir::ShapeToString(shape);
  return exec::TensorFromDoubles({shape, dtype}, values);
}

// Literal tensors of float32 / float64.
inline exec::Tensor F32(const ir::Shape& shape, const std::vector<double>& values) {
  return Literal(shape, values, ir::DataType::kFloat32);
}
inline exec::Tensor F64(const ir::Shape& shape, const std::vector<double>& values) {
  return Literal(shape, values, ir::DataType::kFloat64);
}

// The elements of `t` as doubles, row-major.
inline std::vector<double> Values(const exec::Tensor& t) { return exec::TensorToDoubles(t); }

// Runs `op_type` and returns its results; a failure fails the test (and returns nothing).
inline std::vector<exec::Tensor> MustRun(const std::string& op_type, const std::vector<exec::Tensor>& inputs,
                                         const ir::AttributeMap& attrs = {}) {
  absl::StatusOr<std::vector<exec::Tensor>> out = RunOp(op_type, inputs, attrs);
  EXPECT_TRUE(out.ok()) << out.status();
  return out.ok() ? *out : std::vector<exec::Tensor>{};
}

// The result types of `op_type` built on data operands of `types` (builder errors included).
inline absl::StatusOr<std::vector<ir::TensorType>> TryInfer(const std::string& op_type,
                                                            const std::vector<ir::TensorType>& types,
                                                            const ir::AttributeMap& attrs = {}) {
  ir::Program program;
  ir::Builder b(&program);
  std::vector<ir::Value*> operands;
  for (size_t i = 0; i < types.size(); ++i) operands.push_back(b.Data("in" + std::to_string(i), types[i]));
  absl::StatusOr<std::vector<ir::Value*>> results = b.Create(op_type, operands, attrs);
  if (!results.ok()) return results.status();
  std::vector<ir::TensorType> out;
  for (const ir::Value* v : *results) out.push_back(v->type());
  return out;
}

// The message of the error that building `op_type` gives; "" if it builds.
inline std::string BuildError(const std::string& op_type, const std::vector<ir::TensorType>& types,
                              const ir::AttributeMap& attrs = {}) {
  absl::StatusOr<std::vector<ir::TensorType>> out = TryInfer(op_type, types, attrs);
  return out.ok() ? "" : std::string(out.status().message());
}

// The result types, failing the test on an error.
inline std::vector<ir::TensorType> InferTypes(const std::string& op_type, const std::vector<ir::TensorType>& types,
                                              const ir::AttributeMap& attrs = {}) {
  absl::StatusOr<std::vector<ir::TensorType>> out = TryInfer(op_type, types, attrs);
  EXPECT_TRUE(out.ok()) << out.status();
  return out.ok() ? *out : std::vector<ir::TensorType>{};
}

}  // namespace pdist::testing

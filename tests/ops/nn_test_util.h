// Small helpers shared by the norm, nn, attention and optimizer op tests.
#pragma once

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "executor/tensor.h"
#include "ir/builder.h"
#include "tests/testing/op_testing.h"

namespace pdist::nn_test {

using exec::Tensor;
using ir::DataType;
using ir::Shape;

inline Tensor F64(const Shape& shape, const std::vector<double>& values) {
  return exec::TensorFromDoubles({shape, DataType::kFloat64}, values);
}
inline Tensor F32(const Shape& shape, const std::vector<double>& values) {
  return exec::TensorFromDoubles({shape, DataType::kFloat32}, values);
}
inline Tensor I64(const Shape& shape, const std::vector<double>& values) {
  return exec::TensorFromDoubles({shape, DataType::kInt64}, values);
}

// Runs one op; fails the test (and returns no tensors) when it does not run.
inline std::vector<Tensor> RunOk(const std::string& op, const std::vector<Tensor>& inputs,
                                 const ir::AttributeMap& attrs = {}) {
  absl::StatusOr<std::vector<Tensor>> out = pdist::testing::RunOp(op, inputs, attrs);
  EXPECT_TRUE(out.ok()) << op << ": " << out.status();
  return out.ok() ? *out : std::vector<Tensor>{};
}

inline void ExpectValues(const Tensor& t, const std::vector<double>& expected, double tol,
                         const std::string& what = "") {
  ASSERT_EQ(t.num_elements(), static_cast<int64_t>(expected.size())) << what;
  for (size_t i = 0; i < expected.size(); ++i)
    EXPECT_NEAR(t.At(static_cast<int64_t>(i)), expected[i], tol) << what << "[" << i << "]";
}

// Builds `op` on data inputs of `types` (nullptr: absent) and returns the builder's status.
inline absl::Status BuildStatus(const std::string& op, const std::vector<const ir::TensorType*>& types,
                                const ir::AttributeMap& attrs = {}) {
  ir::Program program;
  ir::Builder b(&program);
  std::vector<ir::Value*> operands;
  for (size_t i = 0; i < types.size(); ++i) {
    operands.push_back(types[i] ? b.Data("in" + std::to_string(i), *types[i]) : nullptr);
  }
  return b.Create(op, operands, attrs).status();
}

// The op is rejected at build time with InvalidArgument mentioning `substring`.
inline void ExpectBuildError(const std::string& op, const std::vector<const ir::TensorType*>& types,
                             const ir::AttributeMap& attrs, const std::string& substring) {
  const absl::Status s = BuildStatus(op, types, attrs);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(std::string(s.message()), ::testing::HasSubstr(substring));
}

inline void ExpectGradientsOk(const std::string& op, const std::vector<pdist::testing::GradInput>& inputs,
                              const ir::AttributeMap& attrs, std::vector<int> loss_results = {}) {
  pdist::testing::GradCheckOptions options;
  options.loss_results = std::move(loss_results);
  const absl::Status s = pdist::testing::CheckOpGradients(op, inputs, attrs, options);
  EXPECT_TRUE(s.ok()) << s;
}

inline Tensor Random64(const Shape& shape, uint64_t seed) {
  return pdist::testing::RandomTensor({shape, DataType::kFloat64}, seed);
}

}  // namespace pdist::nn_test

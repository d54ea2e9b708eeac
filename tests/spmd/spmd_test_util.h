// Helpers for the SPMD rule tests: call a registered op's rule and print its answer compactly.
//
//   Forward("softmax", {S({8, 16, 32}, {1, -1, 0})}, {2, 2})  → "[1,-1,-1] -> [1,-1,-1]"
//   (inputs, then outputs; " {0: sum}" after a Partial spec; "_" for an absent input)
#pragma once

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"
#include "ir/op_def.h"

namespace pdist::nn_spmd_test {

using ir::DimsMapping;
using ir::PartialDims;
using ir::ReduceType;
using ir::Shape;
using ir::TensorDistSpec;

inline TensorDistSpec S(Shape shape, DimsMapping mapping, PartialDims partial = {}) {
  return {std::move(shape), std::move(mapping), std::move(partial)};
}
inline TensorDistSpec Absent() { return {{0}, {}, {}}; }
inline PartialDims Sum(int64_t mesh_dim) { return {{mesh_dim, ReduceType::kSum}}; }

inline std::string Print(const std::vector<TensorDistSpec>& specs) {
  std::vector<std::string> parts;
  for (const TensorDistSpec& s : specs) {
    if (s.absent()) {
      parts.push_back("_");
      continue;
    }
    std::string text = ir::DimsMappingToString(s.dims_mapping);
    if (!s.partial.empty()) absl::StrAppend(&text, " ", ir::PartialDimsToString(s.partial));
    parts.push_back(text);
  }
  return absl::StrJoin(parts, ", ");
}

inline std::string Print(const absl::StatusOr<ir::SpmdResult>& r) {
  if (!r.ok()) return absl::StrCat("error: ", r.status().message());
  return absl::StrCat(Print(r->inputs), " -> ", Print(r->outputs));
}

inline const ir::OpDef& Def(const std::string& op) {
  const ir::OpDef* def = ir::OpRegistry::Global().Find(op);
  EXPECT_NE(def, nullptr) << op;
  return *def;
}

inline ir::AttributeMap Attrs(const ir::OpDef& def, const ir::AttributeMap& attrs) {
  absl::StatusOr<ir::AttributeMap> normal = ir::NormalizeAttributes(def, attrs);
  EXPECT_TRUE(normal.ok()) << normal.status();
  return normal.ok() ? *normal : attrs;
}

inline absl::StatusOr<ir::SpmdResult> Forward(const std::string& op, const std::vector<TensorDistSpec>& inputs,
                                              std::vector<int64_t> mesh, const ir::AttributeMap& attrs = {}) {
  const ir::OpDef& def = Def(op);
  const ir::AttributeMap normal = Attrs(def, attrs);
  return def.infer_spmd(inputs, ir::SpmdContext{std::move(mesh), normal});
}

inline absl::StatusOr<ir::SpmdResult> Reverse(const std::string& op, const std::vector<TensorDistSpec>& inputs,
                                              const std::vector<TensorDistSpec>& outputs, std::vector<int64_t> mesh,
                                              const ir::AttributeMap& attrs = {}) {
  const ir::OpDef& def = Def(op);
  const ir::AttributeMap normal = Attrs(def, attrs);
  return def.infer_spmd_reverse(inputs, outputs, ir::SpmdContext{std::move(mesh), normal});
}

// The printed rule for inputs of these shapes (f32; shape [0] = absent).
inline std::string Describe(const std::string& op, const std::vector<Shape>& shapes,
                            const ir::AttributeMap& attrs = {}) {
  const ir::OpDef& def = Def(op);
  std::vector<ir::TensorType> types;
  for (const Shape& s : shapes) types.push_back({s, ir::DataType::kFloat32});
  std::vector<const ir::TensorType*> ptrs;
  for (const ir::TensorType& t : types) ptrs.push_back(t.shape == Shape{0} ? nullptr : &t);
  return def.describe_spmd(ptrs, Attrs(def, attrs));
}

// The message of a failed rule call ("" when it succeeded).
inline std::string ErrorOf(const absl::StatusOr<ir::SpmdResult>& r) {
  return r.ok() ? "" : std::string(r.status().message());
}

}  // namespace pdist::nn_spmd_test

// ONNX import: an ONNX model (opset >= 13) as a pdist program, ready for autodiff, the planner
// and every strategy. Initializers become parameters whose numbers the program carries (init
// "stored"), graph inputs become data inputs, nodes become pdist ops, and a training loss can be
// appended over one of the graph's outputs.
//
//   OnnxImportOptions options;
//   options.loss = "cross_entropy";   // logits: the only graph output; labels: a new data input
//   PDIST_ASSIGN_OR_RETURN(OnnxImport imported, ImportOnnxFile("model.onnx", options));
//   // imported.program: data "tokens", params "wte.weight" ..., loss = mean cross entropy
//
// What maps to what, and what is refused, is in docs/onnx.md. An operator pdist does not import
// is an error that lists every such op type with its count and first node; nothing is dropped.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "ir/program.h"

namespace pdist::onnx_import {

struct OnnxImportOptions {
  // "" or "none" (no loss: the forward program, for inference and tests; `logits` and `labels`
  // then refused), "cross_entropy" (mean softmax
  // cross entropy of `logits` against integer class labels of logits' shape but the last axis)
  // or "mse" (mean squared error against float labels of logits' shape).
  std::string loss;
  std::string logits;           // the graph output the loss reads; empty: the only graph output
  std::string labels = "labels";  // the data input created for the labels
  // Initializers kept fixed (not trainable): names or globs with `*` ("blocks.*.mask").
  std::vector<std::string> frozen;
  // Shapes of graph inputs whose ONNX shape has symbolic or unknown dimensions ("tokens" →
  // {8, 128}): pdist programs have static shapes.
  std::map<std::string, std::vector<int64_t>> input_shapes;
};

struct OnnxImport {
  ir::Program program;  // its outputs (ir::ProgramOutput) are the graph's, by ONNX name, in order
  int64_t nodes = 0;       // ONNX nodes read
  int64_t parameters = 0;  // initializers that became parameters (trainable or frozen)
  int64_t opset = 0;       // the model's default-domain opset
};

absl::StatusOr<OnnxImport> ImportOnnxBytes(const std::string& bytes, const OnnxImportOptions& options);
// Errors name the file: unreadable, not an ONNX model, an unsupported operator or opset.
absl::StatusOr<OnnxImport> ImportOnnxFile(const std::string& path, const OnnxImportOptions& options);

}  // namespace pdist::onnx_import

// What the op converters (import/onnx_ops.cc) share while a graph is imported: the program being
// built, and for every ONNX name either a pdist value, numbers known at import time, or both.
//
// Known numbers matter because ONNX spells shapes, axes and split sizes as tensors (Reshape's
// `shape` input, often computed by Shape → Gather → Concat chains); pdist spells them as
// attributes. So the importer folds integer arithmetic on known numbers, and a known tensor only
// becomes a program value when an op reads it as data: a float initializer as a parameter
// (trainable unless frozen), any other known tensor as a frozen parameter.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "import/onnx_import.h"
#include "import/onnx_tensor.h"
#include "ir/builder.h"
#include "onnx/onnx_pb.h"

namespace pdist::onnx_import {

class ImportContext {
 public:
  ImportContext(ir::Program* program, const OnnxImportOptions& options) : builder_(program), options_(options) {}

  ir::Builder& builder() { return builder_; }
  int64_t opset() const { return opset_; }
  void set_opset(int64_t opset) { opset_ = opset; }
  int64_t parameters() const { return parameters_; }

  // Input `i` of `node` as a program value; an absent input (index past the end or name "") is
  // an error naming the node.
  absl::StatusOr<ir::Value*> Input(const onnx::NodeProto& node, int i);
  // `name` as a program value (materialising known numbers, see above).
  absl::StatusOr<ir::Value*> ValueOf(const std::string& name);
  // The known numbers of input `i`, or nullptr (absent input, or computed at run time).
  const OnnxTensor* Known(const onnx::NodeProto& node, int i) const;
  // The integers of input `i`, which must be known: `what` names it in the error.
  absl::StatusOr<std::vector<int64_t>> KnownInts(const onnx::NodeProto& node, int i, const char* what) const;
  bool HasInput(const onnx::NodeProto& node, int i) const {
    return i < node.input_size() && !node.input(i).empty();
  }

  void Define(const std::string& name, ir::Value* value) { entries_[name].value = value; }
  void DefineKnown(const std::string& name, OnnxTensor numbers, bool initializer = false);
  // An ONNX Identity of an initializer: the same numbers as a parameter of their own, named
  // `name` (exporters write one initializer and Identity copies for parameters whose numbers
  // happen to be equal, such as every LayerNorm's ones at initialisation; training them tied
  // would not be the source model).
  absl::Status DefineCopyOfInitializer(const std::string& name, const std::string& source);
  bool IsInitializer(const std::string& name) const;
  // Whether `name` already names a value or known numbers (ONNX names are assigned once).
  bool IsDefined(const std::string& name) const { return entries_.contains(name); }

  // Op creation with the node named in errors.
  absl::StatusOr<ir::Value*> Op1(const onnx::NodeProto& node, const std::string& type, const std::vector<ir::Value*>& operands,
                                 const ir::AttributeMap& attrs = {});
  absl::StatusOr<std::vector<ir::Value*>> Create(const onnx::NodeProto& node, const std::string& type,
                                                 const std::vector<ir::Value*>& operands, const ir::AttributeMap& attrs = {});

 private:
  struct Entry {
    ir::Value* value = nullptr;
    std::optional<OnnxTensor> known;
    bool initializer = false;
  };
  bool Frozen(const std::string& name) const;

  ir::Builder builder_;
  const OnnxImportOptions& options_;
  absl::flat_hash_map<std::string, Entry> entries_;
  int64_t opset_ = 0;
  int64_t parameters_ = 0;
};

// The attribute `name` of `node`, or `fallback` when absent.
int64_t IntAttr(const onnx::NodeProto& node, const std::string& name, int64_t fallback);
double FloatAttr(const onnx::NodeProto& node, const std::string& name, double fallback);
std::optional<std::vector<int64_t>> IntsAttr(const onnx::NodeProto& node, const std::string& name);
const onnx::AttributeProto* FindAttr(const onnx::NodeProto& node, const std::string& name);

// "node 'NAME' (OpType)" for errors.
std::string Describe(const onnx::NodeProto& node);

// One ONNX op type's translation: reads the node's inputs from the context and defines its outputs.
using Converter = std::function<absl::Status(ImportContext&, const onnx::NodeProto&)>;
using ConverterMap = absl::flat_hash_map<std::string, Converter>;
// Every op type the importer translates (default domain), by ONNX name.
const ConverterMap& Converters();
// The two halves of that table: arithmetic, activations, norms and reductions
// (import/onnx_math_ops.cc); shapes, constants, indexing (import/onnx_shape_ops.cc).
void AddMathConverters(ConverterMap& map);
void AddShapeConverters(ConverterMap& map);

}  // namespace pdist::onnx_import

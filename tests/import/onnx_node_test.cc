// Every ONNX node test case (Debian's libonnx-testdata: a one-node model, its inputs and the
// outputs ONNX's reference implementation computed) whose operators pdist imports: imported
// without a loss, run forward on the CPU executor, and compared with ONNX's outputs. A case may
// be refused with an error (an attribute, dtype or form pdist does not support; the message is
// printed), never answered with wrong numbers; and every operator the importer claims must pass
// at least one case.
//
// Two adaptations, both keeping ONNX's numbers: the cases feed shapes, axes, split sizes and
// ratios as graph inputs, which pdist needs known at import (static shapes), so those inputs
// become initializers holding the case's own data; and ConstantOfShape's cases, written at
// opset 9, run as opset 13 — the operator is the same from 9 to 19.
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "executor/executor.h"
#include "gtest/gtest.h"
#include "import/onnx_context.h"
#include "import/onnx_import.h"
#include "import/onnx_tensor.h"
#include "ir/input_file.h"
#include "ir/status.h"
#include "onnx/onnx_pb.h"

namespace pdist::onnx_import {
namespace {

namespace fs = std::filesystem;

constexpr char kNodeTests[] = "/usr/share/libonnx-testdata/data/node";

absl::StatusOr<OnnxTensor> ReadTensorFile(const fs::path& path) {
  PDIST_ASSIGN_OR_RETURN(std::string bytes, ir::ReadFileToString(path.string()));
  onnx::TensorProto proto;
  if (!proto.ParseFromString(bytes)) return absl::InvalidArgumentError(absl::StrCat(path.string(), ": not a TensorProto"));
  return ReadOnnxTensor(proto);
}

exec::Tensor ToTensor(const OnnxTensor& t) {
  exec::Tensor out = exec::Tensor::Empty(t.type);
  std::memcpy(out.raw(), t.numbers->bytes.data(), t.numbers->bytes.size());
  return out;
}

struct CaseResult {
  bool imported = false;
  absl::Status status;     // why it was refused (import or run)
  std::string mismatch;    // non-empty: wrong numbers
};

// Imports and runs one case; the outputs are compared within ONNX's own test tolerances
// (rtol 1e-3, atol 1e-7: onnx/backend/test/case/node's default).
// The inputs of each op type that are attributes in pdist (read at import): index → op types.
bool IsImportTimeInput(const std::string& op, int index) {
  static const std::set<std::string> from_one = {"Reshape", "Slice", "Squeeze", "Unsqueeze", "ReduceSum", "ReduceMean",
                                                 "ReduceMax", "Split", "Dropout", "Pow", "Expand"};
  return (index >= 1 && from_one.contains(op)) || op == "ConstantOfShape";
}

// The adaptations described at the top, applied to `model` with the case's input files.
absl::Status Adapt(onnx::ModelProto& model, const fs::path& data) {
  onnx::GraphProto& g = *model.mutable_graph();
  std::set<std::string> import_time;
  for (const onnx::NodeProto& node : g.node()) {
    for (int i = 0; i < node.input_size(); ++i) {
      if (IsImportTimeInput(node.op_type(), i)) import_time.insert(node.input(i));
    }
  }
  bool only_constant_of_shape = true;
  for (const onnx::NodeProto& node : g.node()) only_constant_of_shape = only_constant_of_shape && node.op_type() == "ConstantOfShape";
  for (onnx::OperatorSetIdProto& set : *model.mutable_opset_import()) {
    if (only_constant_of_shape && set.domain().empty() && set.version() >= 9) set.set_version(std::max<int64_t>(set.version(), 13));
  }
  int input_file = 0;
  google::protobuf::RepeatedPtrField<onnx::ValueInfoProto> kept;
  for (const onnx::ValueInfoProto& input : g.input()) {
    const fs::path file = data / absl::StrCat("input_", input_file++, ".pb");
    if (!import_time.contains(input.name())) {
      *kept.Add() = input;
      continue;
    }
    PDIST_ASSIGN_OR_RETURN(std::string bytes, ir::ReadFileToString(file.string()));
    onnx::TensorProto* init = g.add_initializer();
    if (!init->ParseFromString(bytes)) return absl::InvalidArgumentError(absl::StrCat(file.string(), ": not a TensorProto"));
    init->set_name(input.name());
  }
  g.mutable_input()->Swap(&kept);
  return absl::OkStatus();
}

CaseResult RunCase(const fs::path& dir) {
  CaseResult r;
  absl::StatusOr<std::string> bytes = ir::ReadFileToString((dir / "model.onnx").string());
  onnx::ModelProto model;
  model.ParseFromString(*bytes);
  // The input files are numbered over the original inputs: remember which file is whose.
  std::map<std::string, int> input_file;
  for (const onnx::ValueInfoProto& input : model.graph().input()) {
    input_file.emplace(input.name(), static_cast<int>(input_file.size()));
  }
  if (absl::Status adapted = Adapt(model, dir / "test_data_set_0"); !adapted.ok()) {
    r.status = adapted;
    return r;
  }
  absl::StatusOr<OnnxImport> imported = ImportOnnxBytes(model.SerializeAsString(), {});
  if (!imported.ok()) {
    r.status = imported.status();
    return r;
  }
  r.imported = true;
  const fs::path data = dir / "test_data_set_0";
  exec::Feeds feeds;
  for (const onnx::ValueInfoProto& input : model.graph().input()) {
    absl::StatusOr<OnnxTensor> t = ReadTensorFile(data / absl::StrCat("input_", input_file.at(input.name()), ".pb"));
    if (!t.ok()) {
      r.status = t.status();
      return r;
    }
    feeds.emplace(input.name(), ToTensor(*t));
  }
  exec::ExecutorOptions options;
  for (const auto& [name, value] : imported->program.outputs()) options.fetch_ids.push_back(value->id());
  absl::StatusOr<exec::Executor> executor = exec::Executor::Create(imported->program, options);
  exec::Workspace ws;
  absl::Status run_status = executor.ok() ? exec::InitializeWorkspace(imported->program, 1, ws) : executor.status();
  absl::StatusOr<exec::RunResult> run =
      run_status.ok() ? executor->Run(feeds, ws) : absl::StatusOr<exec::RunResult>(run_status);
  if (!run.ok()) {
    r.status = run.status();
    return r;
  }
  for (size_t i = 0; i < imported->program.outputs().size(); ++i) {
    absl::StatusOr<OnnxTensor> expected = ReadTensorFile(data / absl::StrCat("output_", i, ".pb"));
    if (!expected.ok()) {
      r.status = expected.status();
      return r;
    }
    const exec::Tensor& got = run->fetched.at(imported->program.outputs()[i].value->id());
    if (got.type().shape != expected->type.shape) {
      r.mismatch = absl::StrCat("output ", i, " is ", got.type().ToString(), ", ONNX's is ", expected->type.ToString());
      return r;
    }
    for (int64_t k = 0; k < expected->num_elements(); ++k) {
      const double want = expected->At(k), have = got.At(k);
      if (std::abs(have - want) > 1e-7 + 1e-3 * std::abs(want) || std::isnan(have) != std::isnan(want)) {
        r.mismatch = absl::StrCat("output ", i, " element ", k, ": ", have, ", ONNX's ", want);
        return r;
      }
    }
  }
  return r;
}

// Cases whose outputs are ONNX's random numbers (dropout masks drawn in training mode).
const std::set<std::string> kRandomCases = {"test_training_dropout", "test_training_dropout_default",
                                            "test_training_dropout_mask", "test_training_dropout_default_mask"};

// Operators the importer takes in a form no ONNX case has; each is covered elsewhere.
const std::map<std::string, std::string> kCoveredElsewhere = {
    {"Pow", "imported with a known exponent of 1, 2, 0.5 or -0.5, which no case has: tests/import/onnx_import_test.cc"},
};

TEST(OnnxNodeTest, EveryImportedCaseMatchesOnnxAndEveryOperatorPassesOne) {
  ASSERT_TRUE(fs::is_directory(kNodeTests)) << kNodeTests << " is missing: apt install libonnx-testdata";
  std::map<std::string, int> passed_per_op;
  int passed = 0, refused = 0;
  for (const fs::directory_entry& entry : fs::directory_iterator(kNodeTests)) {
    onnx::ModelProto model;
    absl::StatusOr<std::string> bytes = ir::ReadFileToString((entry.path() / "model.onnx").string());
    if (!bytes.ok() || !model.ParseFromString(*bytes)) continue;
    std::set<std::string> ops;
    bool all_supported = model.graph().node_size() > 0;
    for (const onnx::NodeProto& node : model.graph().node()) {
      ops.insert(node.op_type());
      all_supported = all_supported && node.domain().empty() && Converters().contains(node.op_type());
    }
    if (!all_supported || kRandomCases.contains(entry.path().filename().string())) continue;
    const CaseResult r = RunCase(entry.path());
    const std::string name = entry.path().filename().string();
    EXPECT_TRUE(r.mismatch.empty()) << name << ": wrong numbers: " << r.mismatch;
    if (!r.mismatch.empty()) continue;
    if (!r.status.ok()) {
      ++refused;
      EXPECT_FALSE(r.status.message().empty()) << name;
      std::printf("refused  %-55s %s\n", name.c_str(), std::string(r.status.message()).substr(0, 160).c_str());
      continue;
    }
    ++passed;
    for (const std::string& op : ops) ++passed_per_op[op];
  }
  std::printf("%d cases match ONNX's outputs, %d refused with an error\n", passed, refused);
  for (const auto& [op, _] : Converters()) {
    if (kCoveredElsewhere.contains(op)) continue;
    EXPECT_GT(passed_per_op[op], 0) << op << ": the importer claims it, but no ONNX node test case of it passes";
  }
}

}  // namespace
}  // namespace pdist::onnx_import

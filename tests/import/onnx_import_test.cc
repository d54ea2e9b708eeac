// The importer on small hand-built ONNX models: the forms no ONNX node test case has (a token
// embedding Gather, Pow by 2), parameters and their numbers, the appended losses, and every
// refusal a user meets — each naming what is wrong and what to do.
#include <cstring>
#include <filesystem>

#include "executor/executor.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "import/onnx_import.h"
#include "ir/serialize.h"
#include "ir/status.h"
#include "onnx/onnx_pb.h"
#include "passes/autodiff.h"
#include "tests/testing/temp_path.h"

namespace pdist::onnx_import {
namespace {

using ::testing::HasSubstr;

onnx::ModelProto Model(int64_t opset = 17) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  onnx::OperatorSetIdProto* set = m.add_opset_import();
  set->set_domain("");
  set->set_version(opset);
  return m;
}

void AddInput(onnx::ModelProto& m, const std::string& name, int32_t type, std::vector<int64_t> dims,
              const std::string& symbolic_dim = "") {
  onnx::ValueInfoProto* in = m.mutable_graph()->add_input();
  in->set_name(name);
  onnx::TypeProto::Tensor* t = in->mutable_type()->mutable_tensor_type();
  t->set_elem_type(type);
  for (int64_t d : dims) t->mutable_shape()->add_dim()->set_dim_value(d);
  if (!symbolic_dim.empty()) t->mutable_shape()->add_dim()->set_dim_param(symbolic_dim);
}

void AddOutput(onnx::ModelProto& m, const std::string& name) { m.mutable_graph()->add_output()->set_name(name); }

void AddInitializer(onnx::ModelProto& m, const std::string& name, std::vector<int64_t> dims, std::vector<float> values) {
  onnx::TensorProto* t = m.mutable_graph()->add_initializer();
  t->set_name(name);
  t->set_data_type(onnx::TensorProto::FLOAT);
  for (int64_t d : dims) t->add_dims(d);
  for (float v : values) t->add_float_data(v);
}

onnx::NodeProto* AddNode(onnx::ModelProto& m, const std::string& type, std::vector<std::string> inputs,
                         std::vector<std::string> outputs, const std::string& name = "") {
  onnx::NodeProto* n = m.mutable_graph()->add_node();
  n->set_op_type(type);
  n->set_name(name.empty() ? type : name);
  for (const std::string& i : inputs) n->add_input(i);
  for (const std::string& o : outputs) n->add_output(o);
  return n;
}

absl::StatusOr<OnnxImport> Import(const onnx::ModelProto& m, const OnnxImportOptions& options = {}) {
  return ImportOnnxBytes(m.SerializeAsString(), options);
}

// The imported program's first output on `feeds`, its parameters initialised (seed 1).
absl::StatusOr<exec::Tensor> FirstOutput(const OnnxImport& imported, const exec::Feeds& feeds) {
  exec::ExecutorOptions options;
  options.fetch_ids = {imported.program.outputs().at(0).value->id()};
  PDIST_ASSIGN_OR_RETURN(exec::Executor executor, exec::Executor::Create(imported.program, options));
  exec::Workspace ws;
  PDIST_RETURN_IF_ERROR(exec::InitializeWorkspace(imported.program, 1, ws));
  PDIST_ASSIGN_OR_RETURN(exec::RunResult run, executor.Run(feeds, ws));
  return run.fetched.at(options.fetch_ids[0]);
}

// tokens:i64[2,3] → Gather(table f32[4,2]) → Pow 2 → y:f32[2,3,2]
onnx::ModelProto EmbeddingSquared() {
  onnx::ModelProto m = Model();
  AddInput(m, "tokens", onnx::TensorProto::INT64, {2, 3});
  AddInitializer(m, "table", {4, 2}, {0.5f, 1, 1.5f, 2, 2.5f, 3, 3.5f, 4});
  onnx::TensorProto* two = AddNode(m, "Constant", {}, {"two"})->add_attribute()->mutable_t();
  m.mutable_graph()->mutable_node(0)->mutable_attribute(0)->set_name("value");
  two->set_data_type(onnx::TensorProto::FLOAT);
  two->add_float_data(2.0f);
  AddNode(m, "Gather", {"table", "tokens"}, {"rows"});
  AddNode(m, "Pow", {"rows", "two"}, {"y"});
  AddOutput(m, "y");
  return m;
}

TEST(OnnxImportTest, AnEmbeddingGatherAndASquareComputeWhatOnnxDefines) {
  absl::StatusOr<OnnxImport> imported = Import(EmbeddingSquared());
  ASSERT_TRUE(imported.ok()) << imported.status();
  EXPECT_EQ(imported->nodes, 3);
  EXPECT_EQ(imported->parameters, 1) << "the exponent folds away; only the table becomes a parameter";
  const ir::Value* table = imported->program.FindArgument("table");
  ASSERT_NE(table, nullptr);
  EXPECT_EQ(table->init(), ir::kStoredInit);
  EXPECT_TRUE(table->trainable());

  exec::ExecutorOptions options;
  options.fetch_ids = {imported->program.outputs().at(0).value->id()};
  absl::StatusOr<exec::Executor> executor = exec::Executor::Create(imported->program, options);
  ASSERT_TRUE(executor.ok()) << executor.status();
  exec::Workspace ws;
  ASSERT_TRUE(exec::InitializeWorkspace(imported->program, 1, ws).ok());
  exec::Tensor tokens = exec::Tensor::Empty({{2, 3}, ir::DataType::kInt64});
  const int64_t ids[] = {3, 0, 1, 1, 2, 3};
  std::memcpy(tokens.raw(), ids, sizeof(ids));
  absl::StatusOr<exec::RunResult> run = executor->Run({{"tokens", tokens}}, ws);
  ASSERT_TRUE(run.ok()) << run.status();
  const exec::Tensor& y = run->fetched.at(options.fetch_ids[0]);
  ASSERT_EQ(y.type().shape, (ir::Shape{2, 3, 2}));
  for (int64_t i = 0; i < 6; ++i) {
    for (int64_t j = 0; j < 2; ++j) {
      const double x = 0.5 * static_cast<double>(2 * ids[i] + j + 1);
      EXPECT_DOUBLE_EQ(y.At(i * 2 + j), x * x) << "token " << i << " column " << j;
    }
  }
}

// table[-1], as torch exports self.table[-1]: a Gather on axis 0 of a 2-D table with a constant
// negative index counts from the end. Imported as an embedding (ids in [0, rows)) it failed its
// first step ("embedding id -1 ... out of range"); it is a gather.
TEST(OnnxImportTest, AConstantNegativeGatherIndexCountsFromTheEnd) {
  onnx::ModelProto m = Model();
  AddInput(m, "x", onnx::TensorProto::FLOAT, {2});
  AddInitializer(m, "table", {3, 2}, {1, 2, 3, 4, 5, 6});
  onnx::TensorProto* idx = m.mutable_graph()->add_initializer();
  idx->set_name("idx");
  idx->set_data_type(onnx::TensorProto::INT64);
  idx->add_int64_data(-1);
  AddNode(m, "Gather", {"table", "idx"}, {"row"});
  AddNode(m, "Add", {"x", "row"}, {"y"});
  AddOutput(m, "y");
  absl::StatusOr<OnnxImport> imported = Import(m);
  ASSERT_TRUE(imported.ok()) << imported.status();
  exec::Tensor x = exec::Tensor::Empty({{2}, ir::DataType::kFloat32});
  const float zeros[] = {0, 0};
  std::memcpy(x.raw(), zeros, sizeof(zeros));
  absl::StatusOr<exec::Tensor> y = FirstOutput(*imported, {{"x", x}});
  ASSERT_TRUE(y.ok()) << y.status();
  ASSERT_EQ(y->type().shape, (ir::Shape{2}));
  EXPECT_EQ(y->At(0), 5);  // the last row
  EXPECT_EQ(y->At(1), 6);
}

// LayerNorm as PyTorch exports it below opset 17: ReduceMean, Sub, Pow 2, ReduceMean, Add eps,
// Sqrt, Div — and the same with Pow −0.5 and Mul.
TEST(OnnxImportTest, ADecomposedLayerNormComputesTheNorm) {
  for (bool reciprocal : {false, true}) {
    onnx::ModelProto m = Model();
    AddInput(m, "x", onnx::TensorProto::FLOAT, {2, 4});
    for (const auto& [name, value] : std::vector<std::pair<std::string, float>>{{"two", 2}, {"eps", 1e-5f}, {"half", -0.5f}}) {
      onnx::NodeProto* c = AddNode(m, "Constant", {}, {name});
      onnx::AttributeProto* a = c->add_attribute();
      a->set_name("value_float");
      a->set_f(value);
    }
    for (const char* reduce : {"mean", "var"}) {
      onnx::NodeProto* n = AddNode(m, "ReduceMean", {std::string(reduce) == "mean" ? "x" : "sq"}, {reduce});
      onnx::AttributeProto* axes = n->add_attribute();
      axes->set_name("axes");
      axes->add_ints(-1);
      if (std::string(reduce) == "mean") AddNode(m, "Sub", {"x", "mean"}, {"d"});
      if (std::string(reduce) == "mean") AddNode(m, "Pow", {"d", "two"}, {"sq"});
    }
    AddNode(m, "Add", {"var", "eps"}, {"ve"});
    if (reciprocal) {
      AddNode(m, "Pow", {"ve", "half"}, {"inv"});
      AddNode(m, "Mul", {"d", "inv"}, {"y"});
    } else {
      AddNode(m, "Sqrt", {"ve"}, {"std"});
      AddNode(m, "Div", {"d", "std"}, {"y"});
    }
    AddOutput(m, "y");
    absl::StatusOr<OnnxImport> imported = Import(m);
    ASSERT_TRUE(imported.ok()) << imported.status();
    exec::ExecutorOptions options;
    options.fetch_ids = {imported->program.outputs().at(0).value->id()};
    absl::StatusOr<exec::Executor> executor = exec::Executor::Create(imported->program, options);
    ASSERT_TRUE(executor.ok()) << executor.status();
    exec::Workspace ws;
    const std::vector<float> x = {1, 2, 3, 4, -1, 0, 0, 5};
    exec::Tensor xt = exec::Tensor::Empty({{2, 4}, ir::DataType::kFloat32});
    std::memcpy(xt.raw(), x.data(), x.size() * sizeof(float));
    absl::StatusOr<exec::RunResult> run = executor->Run({{"x", xt}}, ws);
    ASSERT_TRUE(run.ok()) << run.status();
    const exec::Tensor& y = run->fetched.at(options.fetch_ids[0]);
    for (int row = 0; row < 2; ++row) {
      double mean = 0, var = 0;
      for (int j = 0; j < 4; ++j) mean += x[row * 4 + j] / 4.0;
      for (int j = 0; j < 4; ++j) var += (x[row * 4 + j] - mean) * (x[row * 4 + j] - mean) / 4.0;
      for (int j = 0; j < 4; ++j) {
        EXPECT_NEAR(y.At(row * 4 + j), (x[row * 4 + j] - mean) / std::sqrt(var + 1e-5), 1e-5) << "reciprocal " << reciprocal;
      }
    }
  }
}

TEST(OnnxImportTest, AnIdentityOfAnInitializerIsAParameterOfItsOwn) {
  // Exporters write equal initializers once (every LayerNorm's ones) and Identity copies.
  onnx::ModelProto m = Model();
  AddInput(m, "x", onnx::TensorProto::FLOAT, {2, 2});
  AddInitializer(m, "a.weight", {2}, {1, 1});
  AddNode(m, "Identity", {"a.weight"}, {"b.weight"});
  AddNode(m, "Mul", {"x", "a.weight"}, {"h"});
  AddNode(m, "Mul", {"h", "b.weight"}, {"y"});
  AddOutput(m, "y");
  absl::StatusOr<OnnxImport> imported = Import(m);
  ASSERT_TRUE(imported.ok()) << imported.status();
  const ir::Value* a = imported->program.FindArgument("a.weight");
  const ir::Value* b = imported->program.FindArgument("b.weight");
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  EXPECT_NE(a, b);
  EXPECT_EQ(a->stored()->bytes, b->stored()->bytes);
  EXPECT_EQ(imported->parameters, 2);
}

TEST(OnnxImportTest, LossesAreAppendedAndTheProgramDifferentiates) {
  onnx::ModelProto m = Model();
  AddInput(m, "x", onnx::TensorProto::FLOAT, {4, 3});
  AddInitializer(m, "w", {3, 5}, std::vector<float>(15, 0.1f));
  AddInitializer(m, "mask", {5}, std::vector<float>(5, 1.0f));
  AddNode(m, "MatMul", {"x", "w"}, {"h"});
  AddNode(m, "Mul", {"h", "mask"}, {"logits"});
  AddOutput(m, "logits");
  OnnxImportOptions options;
  options.loss = "cross_entropy";
  options.frozen = {"ma*"};
  absl::StatusOr<OnnxImport> ce = Import(m, options);
  ASSERT_TRUE(ce.ok()) << ce.status();
  EXPECT_EQ(ce->program.FindArgument("labels")->type(), (ir::TensorType{{4}, ir::DataType::kInt64}));
  EXPECT_FALSE(ce->program.FindArgument("mask")->trainable()) << "frozen by the glob";
  ASSERT_NE(ce->program.loss(), nullptr);
  EXPECT_TRUE(passes::AppendBackward(ce->program, ce->program.loss()).ok());
  EXPECT_NE(ce->program.GradientOf(ce->program.FindArgument("w")), nullptr);
  EXPECT_EQ(ce->program.GradientOf(ce->program.FindArgument("mask")), nullptr);

  options.loss = "mse";
  options.labels = "target";
  absl::StatusOr<OnnxImport> mse = Import(m, options);
  ASSERT_TRUE(mse.ok()) << mse.status();
  EXPECT_EQ(mse->program.FindArgument("target")->type(), (ir::TensorType{{4, 5}, ir::DataType::kFloat32}));

  // The imported program with its numbers survives model.pb.
  absl::StatusOr<std::string> bytes = ir::SerializeProgram(mse->program);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  absl::StatusOr<ir::Program> loaded = ir::DeserializeProgram(*bytes);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->FindArgument("w")->stored()->bytes, mse->program.FindArgument("w")->stored()->bytes);

  options.frozen = {"mask*", "nope.*"};
  EXPECT_THAT(std::string(Import(m, options).status().message()),
              HasSubstr("--frozen 'nope.*' matches no initializer (initializers: w, mask)"));
  options.frozen = {};
  options.loss = "hinge";
  EXPECT_THAT(std::string(Import(m, options).status().message()), HasSubstr("unknown loss 'hinge'; expected cross_entropy or mse"));
  options.loss = "mse";
  options.labels = "x";
  EXPECT_THAT(std::string(Import(m, options).status().message()), HasSubstr("labels input 'x' would take the name"));
  options.labels = "labels";
  options.logits = "h";
  EXPECT_THAT(std::string(Import(m, options).status().message()), HasSubstr("the graph has no output 'h' (--logits NAME; outputs: logits)"));
}

TEST(OnnxImportTest, UnsupportedOperatorsAreListedWithCountsAndFirstNodes) {
  onnx::ModelProto m = Model();
  AddInput(m, "x", onnx::TensorProto::FLOAT, {2});
  AddNode(m, "Tile", {"x"}, {"a"}, "/mask/Tile");
  AddNode(m, "Tile", {"a"}, {"b"}, "/mask/Tile_1");
  AddNode(m, "Mod", {"b"}, {"c"}, "/mask/Mod");
  AddNode(m, "Selu", {"c"}, {"d"})->clear_name();  // unnamed: named by its output (it read "first ''")
  AddNode(m, "Relu", {"d"}, {"y"});
  AddOutput(m, "y");
  absl::Status s = Import(m).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(std::string(s.message()), HasSubstr("pdist does not import 3 operator types of this model: Mod (1 node, first "
                                                  "'/mask/Mod'), Selu (1 node, first unnamed, output 'd'), Tile (2 "
                                                  "nodes, first '/mask/Tile')"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("It imports: Add Cast Concat"));
}

TEST(OnnxImportTest, ModelsPdistCannotTakeAreRefusedWithTheFix) {
  // y = Relu(x) declaring `opset`.
  auto relu_of_opset = [](int64_t opset) {
    onnx::ModelProto m = Model(opset);
    AddInput(m, "x", onnx::TensorProto::FLOAT, {2});
    AddNode(m, "Relu", {"x"}, {"y"});
    AddOutput(m, "y");
    return m;
  };
  EXPECT_THAT(std::string(Import(relu_of_opset(11)).status().message()),
              HasSubstr("the model uses opset 11; pdist imports opset 13 and newer (re-export with"));

  onnx::ModelProto symbolic = Model();
  AddInput(symbolic, "tokens", onnx::TensorProto::INT64, {8}, "seq");
  AddNode(symbolic, "Identity", {"tokens"}, {"y"});
  AddOutput(symbolic, "y");
  EXPECT_THAT(std::string(Import(symbolic).status().message()),
              HasSubstr("graph input 'tokens' has dimension 1 = 'seq'; pdist programs have static shapes: give it "
                        "(pdist-import --input-shape tokens=8,128)"));
  OnnxImportOptions shaped;
  shaped.input_shapes["tokens"] = {8, 16};
  absl::StatusOr<OnnxImport> fixed = Import(symbolic, shaped);
  ASSERT_TRUE(fixed.ok()) << fixed.status();
  EXPECT_EQ(fixed->program.FindArgument("tokens")->type().shape, (ir::Shape{8, 16}));
  // Another rank, or another value for a fixed dim, is refused at import (it imported, and
  // pdist-train said "must be [batch, seq], got i64[8]").
  shaped.input_shapes["tokens"] = {8};
  EXPECT_THAT(std::string(Import(symbolic, shaped).status().message()),
              HasSubstr("--input-shape tokens: 1 dims given, but the graph's input is [8, seq] (2 dims)"));
  shaped.input_shapes["tokens"] = {4, 16};
  EXPECT_THAT(std::string(Import(symbolic, shaped).status().message()),
              HasSubstr("--input-shape tokens: dim 0 is 4, but the graph fixes it at 8 ([8, seq])"));
  shaped.input_shapes["tokens"] = {8, 16};
  shaped.input_shapes["nope"] = {1};
  EXPECT_THAT(std::string(Import(symbolic, shaped).status().message()), HasSubstr("--input-shape names 'nope', which is not a graph input"));

  // No shape at all (an unknown rank) was read as a scalar and failed in the first op.
  onnx::ModelProto unshaped = Model();
  AddInput(unshaped, "x", onnx::TensorProto::FLOAT, {});
  AddNode(unshaped, "Relu", {"x"}, {"y"});
  AddOutput(unshaped, "y");
  EXPECT_THAT(std::string(Import(unshaped).status().message()),
              HasSubstr("graph input 'x' has no shape (not even its rank)"));
  shaped.input_shapes = {{"x", {4, 2}}};
  absl::StatusOr<OnnxImport> given = Import(unshaped, shaped);
  ASSERT_TRUE(given.ok()) << given.status();
  EXPECT_EQ(given->program.FindArgument("x")->type().shape, (ir::Shape{4, 2}));

  // A sparse initializer was read as absent ("'w' is read before any node ... defines it").
  onnx::ModelProto sparse = Model();
  AddInput(sparse, "x", onnx::TensorProto::FLOAT, {2});
  onnx::SparseTensorProto* w = sparse.mutable_graph()->add_sparse_initializer();
  w->add_dims(2);
  w->mutable_values()->set_name("w");
  w->mutable_values()->set_data_type(onnx::TensorProto::FLOAT);
  w->mutable_values()->add_float_data(1);
  w->mutable_indices()->set_data_type(onnx::TensorProto::INT64);
  w->mutable_indices()->add_int64_data(0);
  AddNode(sparse, "Add", {"x", "w"}, {"y"});
  AddOutput(sparse, "y");
  EXPECT_THAT(std::string(Import(sparse).status().message()),
              HasSubstr("initializer 'w' is sparse (1 sparse initializers); pdist imports dense ones"));

  // What a loss reads, named without a loss: pdist-import exited 0 without one.
  OnnxImportOptions labels_only;
  labels_only.labels = "y";
  labels_only.input_shapes = {{"x", {4, 2}}};
  EXPECT_THAT(std::string(Import(unshaped, labels_only).status().message()),
              HasSubstr("labels 'y' name what a loss reads, but no loss is appended"));
  labels_only.labels = "labels";
  labels_only.logits = "y";
  labels_only.loss = "none";
  EXPECT_THAT(std::string(Import(unshaped, labels_only).status().message()),
              HasSubstr("logits 'y' name what a loss reads, but no loss is appended"));
  labels_only.logits = "";
  EXPECT_TRUE(Import(unshaped, labels_only).ok()) << "--loss none: the forward program";

  onnx::ModelProto dynamic_reshape = Model();
  AddInput(dynamic_reshape, "x", onnx::TensorProto::FLOAT, {2, 3});
  AddInput(dynamic_reshape, "shape", onnx::TensorProto::INT64, {1});
  AddNode(dynamic_reshape, "Reshape", {"x", "shape"}, {"y"}, "/r");
  AddOutput(dynamic_reshape, "y");
  EXPECT_THAT(std::string(Import(dynamic_reshape).status().message()),
              HasSubstr("node '/r' (Reshape): its shape (input 1, 'shape') is computed at run time"));

  // A target shape that does not hold x's elements (folded numbers must not allocate it).
  onnx::ModelProto bad_reshape = Model();
  onnx::NodeProto* data = AddNode(bad_reshape, "Constant", {}, {"c"});
  onnx::AttributeProto* ints = data->add_attribute();
  ints->set_name("value_ints");
  for (int64_t v : {1, 2, 3, 4}) ints->add_ints(v);
  onnx::NodeProto* shape = AddNode(bad_reshape, "Constant", {}, {"s"}, "Constant_1");
  onnx::AttributeProto* dims = shape->add_attribute();
  dims->set_name("value_ints");
  dims->add_ints(int64_t{1} << 40);
  AddNode(bad_reshape, "Reshape", {"c", "s"}, {"y"}, "/reshape");
  AddOutput(bad_reshape, "y");
  EXPECT_THAT(std::string(Import(bad_reshape).status().message()),
              HasSubstr("node '/reshape' (Reshape): cannot reshape i64[4] (4 elements) to [1099511627776]"));

  // Each imported at rc 0: an opset newer than the converters know, a graph with no outputs, a
  // second initializer of one name (its numbers replaced the first's).
  EXPECT_THAT(std::string(Import(relu_of_opset(9999)).status().message()),
              HasSubstr("the model uses opset 9999; pdist knows operator definitions up to opset 23"));
  onnx::ModelProto no_outputs = Model();
  AddInput(no_outputs, "x", onnx::TensorProto::FLOAT, {2});
  AddNode(no_outputs, "Relu", {"x"}, {"y"});
  EXPECT_THAT(std::string(Import(no_outputs).status().message()), HasSubstr("the ONNX graph has no outputs"));
  onnx::ModelProto two_ws = Model();
  AddInitializer(two_ws, "w", {2}, {1, 2});
  AddInitializer(two_ws, "w", {2}, {3, 4});
  AddInput(two_ws, "x", onnx::TensorProto::FLOAT, {2});
  AddNode(two_ws, "Add", {"x", "w"}, {"y"});
  AddOutput(two_ws, "y");
  EXPECT_THAT(std::string(Import(two_ws).status().message()), HasSubstr("initializer 'w' is defined twice"));

  // Found by fuzz_onnx_import: nodes without the inputs or outputs their operator needs.
  onnx::ModelProto no_output = Model();
  AddInput(no_output, "x", onnx::TensorProto::FLOAT, {2});
  AddNode(no_output, "Relu", {"x"}, {}, "/r");
  EXPECT_THAT(std::string(Import(no_output).status().message()), HasSubstr("node '/r' (Relu) has no output"));
  onnx::ModelProto no_input = Model();
  AddNode(no_input, "Concat", {}, {"y"}, "/c");
  AddOutput(no_input, "y");
  EXPECT_THAT(std::string(Import(no_input).status().message()), HasSubstr("node '/c' (Concat) has no input"));

  onnx::ModelProto twice = Model();
  AddInput(twice, "x", onnx::TensorProto::FLOAT, {2});
  AddNode(twice, "Relu", {"x"}, {"x"}, "/again");
  AddOutput(twice, "x");
  EXPECT_THAT(std::string(Import(twice).status().message()),
              HasSubstr("node '/again' (Relu) defines 'x', which an input, initializer or earlier node already defines"));

  EXPECT_THAT(std::string(ImportOnnxBytes("not a model", {}).status().message()), HasSubstr("not an ONNX model"));
  const std::string dir = pdist::testing::UniqueTempPath("onnx-dir");
  std::filesystem::create_directories(dir);
  EXPECT_THAT(std::string(ImportOnnxFile(dir, {}).status().message()), HasSubstr("is a directory, not a file"));
  EXPECT_THAT(std::string(ImportOnnxFile(dir + "/missing.onnx", {}).status().message()), HasSubstr("does not exist"));
}

}  // namespace
}  // namespace pdist::onnx_import

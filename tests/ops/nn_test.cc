// embedding and cross_entropy_with_softmax: hand-computed values, errors, gradients.
#include <cmath>

#include "ir/op_def.h"
#include "tests/ops/nn_test_util.h"

namespace pdist::nn_test {
namespace {

using pdist::testing::GradInput;

const std::vector<double> kTable = {0, 1, 2, 3, 4, 5, 6, 7};  // weight [4, 2]: row v = (2v, 2v+1)

TEST(EmbeddingTest, Lookup) {
  const std::vector<Tensor> out = RunOk("embedding", {I64({2, 2}, {3, 0, 1, 3}), F32({4, 2}, kTable)});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].shape(), (Shape{2, 2, 2}));
  ExpectValues(out[0], {6, 7, 0, 1, 2, 3, 6, 7}, 0);
}

TEST(EmbeddingTest, Int32IdsAndPaddingRowReadsZero) {
  const Tensor ids = exec::TensorFromDoubles({{3}, DataType::kInt32}, {3, 0, 1});
  const std::vector<Tensor> out = RunOk("embedding", {ids, F64({4, 2}, kTable)}, {{"padding_idx", int64_t{3}}});
  ASSERT_EQ(out.size(), 1u);
  ExpectValues(out[0], {0, 0, 0, 1, 2, 3}, 0);
}

TEST(EmbeddingTest, OutOfRangeIdIsAnError) {
  const auto out = pdist::testing::RunOp("embedding", {I64({2}, {1, 4}), F32({4, 2}, kTable)}, {});
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(out.status().message()), ::testing::HasSubstr("id 4"));
  EXPECT_THAT(std::string(out.status().message()), ::testing::HasSubstr("vocab size 4"));
}

TEST(EmbeddingTest, GradScatterAddsAndSkipsPadding) {
  // ids 2, 0, 2, 1 with padding_idx 1: row 2 gets two rows of out_grad, row 1 none.
  const std::vector<Tensor> out = RunOk(
      "embedding_grad",
      {I64({4}, {2, 0, 2, 1}), F64({3, 2}, {0, 0, 0, 0, 0, 0}), F64({4, 2}, {1, 2, 10, 20, 100, 200, 1000, 2000})},
      {{"padding_idx", int64_t{1}}});
  ASSERT_EQ(out.size(), 1u);
  ExpectValues(out[0], {10, 20, 0, 0, 101, 202}, 0);
}

TEST(EmbeddingTest, GradIsDeterministicAcrossManyRepeatedIds) {
  // 4096 lookups of 8 rows: each row sums 512 values in position order, whatever the threads.
  const int64_t n = 4096, vocab = 8, hidden = 16;
  std::vector<double> ids(n);
  for (int64_t i = 0; i < n; ++i) ids[i] = static_cast<double>((i * 5) % vocab);
  const Tensor grad = pdist::testing::RandomTensor({{n, hidden}, DataType::kFloat32}, 3);
  const std::vector<Tensor> out =
      RunOk("embedding_grad", {I64({n}, ids), Tensor::Zeros({{vocab, hidden}, DataType::kFloat32}), grad});
  ASSERT_EQ(out.size(), 1u);
  for (int64_t v = 0; v < vocab; ++v) {
    for (int64_t h = 0; h < hidden; ++h) {
      float expected = 0;
      for (int64_t i = 0; i < n; ++i) {
        if (static_cast<int64_t>(ids[i]) == v) expected += grad.data<float>()[i * hidden + h];
      }
      EXPECT_EQ(out[0].data<float>()[v * hidden + h], expected) << v << "," << h;
    }
  }
}

TEST(EmbeddingTest, ShapeErrors) {
  const ir::TensorType ids{{2, 3}, DataType::kInt64};
  const ir::TensorType w{{4, 2}, DataType::kFloat32};
  const ir::TensorType w1{{8}, DataType::kFloat32};
  const ir::TensorType float_ids{{2, 3}, DataType::kFloat32};
  ExpectBuildError("embedding", {&ids, &w1}, {}, "rank 2");
  ExpectBuildError("embedding", {&float_ids, &w}, {}, "i32 or i64");
  ExpectBuildError("embedding", {&ids, &w}, {{"padding_idx", int64_t{4}}}, "padding_idx 4");
}

TEST(EmbeddingTest, Gradients) {
  const Tensor ids = I64({2, 3}, {0, 3, 1, 3, 2, 0});
  ExpectGradientsOk("embedding", {{ids}, {Random64({4, 3}, 1)}}, {});
  ExpectGradientsOk("embedding", {{ids}, {Random64({4, 3}, 2)}}, {{"padding_idx", int64_t{3}}});
}

// logits [[1, 2, 3], [1, 1, 1]], labels [[2], [-100]]: the second row is ignored.
TEST(CrossEntropyTest, HardLabelWithIgnoreIndex) {
  const std::vector<Tensor> out =
      RunOk("cross_entropy_with_softmax", {F64({2, 3}, {1, 2, 3, 1, 1, 1}), I64({2, 1}, {2, -100})});
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[1].shape(), (Shape{2, 1}));
  // log(e + e² + e³) - 3.
  ExpectValues(out[1], {0.40760596444438013, 0}, 1e-12, "loss");
  const double third = 1.0 / 3;
  ExpectValues(out[0], {0.09003057317038048, 0.2447284710547977, 0.665240955774822, third, third, third}, 1e-12,
               "softmax");
}

TEST(CrossEntropyTest, GradOfIgnoredRowIsZero) {
  const Tensor softmax = F64({2, 3}, {0.2, 0.3, 0.5, 0.1, 0.6, 0.3});
  const std::vector<Tensor> out =
      RunOk("cross_entropy_with_softmax_grad", {I64({2, 1}, {1, 7}), softmax, F64({2, 1}, {2, 5})},
            {{"ignore_index", int64_t{7}}});
  ASSERT_EQ(out.size(), 1u);
  ExpectValues(out[0], {0.4, -1.4, 1.0, 0, 0, 0}, 1e-12);
}

TEST(CrossEntropyTest, SoftLabel) {
  const std::vector<Tensor> out = RunOk("cross_entropy_with_softmax",
                                        {F64({1, 3}, {1, 2, 3}), F64({1, 3}, {0.2, 0.3, 0.5})}, {{"soft_label", true}});
  ASSERT_EQ(out.size(), 2u);
  ExpectValues(out[1], {1.10760596444438}, 1e-12);
}

TEST(CrossEntropyTest, ProbabilitiesWithoutSoftmax) {
  const std::vector<Tensor> out =
      RunOk("cross_entropy_with_softmax", {F64({1, 3}, {0.2, 0.3, 0.5}), I64({1, 1}, {1})}, {{"use_softmax", false}});
  ASSERT_EQ(out.size(), 2u);
  ExpectValues(out[0], {0.2, 0.3, 0.5}, 0);
  ExpectValues(out[1], {-std::log(0.3)}, 1e-12);
}

TEST(CrossEntropyTest, ManyRowsMatchSerialReference) {
  // 512 rows of 128 classes run in parallel; every 7th row is ignored.
  const int64_t rows = 512, classes = 128;
  const Tensor logits = Random64({rows, classes}, 5);
  std::vector<double> labels(rows);
  for (int64_t r = 0; r < rows; ++r) labels[r] = r % 7 == 0 ? -100 : static_cast<double>((r * 13) % classes);
  const std::vector<Tensor> out = RunOk("cross_entropy_with_softmax", {logits, I64({rows, 1}, labels)});
  ASSERT_EQ(out.size(), 2u);
  for (int64_t r = 0; r < rows; ++r) {
    double sum = 0;
    for (int64_t c = 0; c < classes; ++c) sum += std::exp(logits.At(r * classes + c));
    const double expected =
        labels[r] < 0 ? 0 : std::log(sum) - logits.At(r * classes + static_cast<int64_t>(labels[r]));
    EXPECT_NEAR(out[1].At(r), expected, 1e-12) << r;
  }
}

TEST(CrossEntropyTest, LabelOutOfRangeIsAnError) {
  const auto out = pdist::testing::RunOp("cross_entropy_with_softmax", {F32({1, 3}, {1, 2, 3}), I64({1, 1}, {3})}, {});
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(out.status().message()), ::testing::HasSubstr("label 3"));
}

TEST(CrossEntropyTest, ShapeErrors) {
  const ir::TensorType logits{{2, 5}, DataType::kFloat32};
  const ir::TensorType label_no_trailing_1{{2}, DataType::kInt64};
  const ir::TensorType float_label{{2, 1}, DataType::kFloat32};
  ExpectBuildError("cross_entropy_with_softmax", {&logits, &label_no_trailing_1}, {}, "shape [2,1]");
  ExpectBuildError("cross_entropy_with_softmax", {&logits, &float_label}, {}, "i32/i64");
  const ir::TensorType label{{2, 1}, DataType::kInt64};
  ExpectBuildError("cross_entropy_with_softmax", {&logits, &label}, {{"soft_label", true}}, "soft label must match");
}

TEST(CrossEntropyTest, Gradients) {
  // Hard labels, one ignored position; the loss (result 1) is differentiated.
  ExpectGradientsOk("cross_entropy_with_softmax", {{Random64({3, 4}, 1)}, {I64({3, 1}, {2, -100, 0})}}, {}, {1});
  // The class axis in the middle: logits [2, 3, 2], labels [2, 1, 2].
  ExpectGradientsOk("cross_entropy_with_softmax", {{Random64({2, 3, 2}, 2)}, {I64({2, 1, 2}, {0, 2, 1, 1})}},
                    {{"axis", int64_t{1}}}, {1});
  ExpectGradientsOk("cross_entropy_with_softmax",
                    {{Random64({2, 3}, 3)}, {F64({2, 3}, {0.2, 0.3, 0.5, 0.6, 0.1, 0.1}), false}},
                    {{"soft_label", true}}, {1});
  const Tensor probs = pdist::testing::RandomTensor({{2, 3}, DataType::kFloat64}, 4, 0.2, 1.0);
  ExpectGradientsOk("cross_entropy_with_softmax", {{probs}, {I64({2, 1}, {1, 2})}}, {{"use_softmax", false}}, {1});
}

// The gradient that recomputes the softmax from the logits (what bf16/f16 models' backward runs)
// gives the softmax form's gradient in every form of the op: hard labels with an ignored row, the
// class axis in the middle, soft labels, probabilities without softmax.
TEST(CrossEntropyTest, GradientFromTheLogitsIsTheGradientFromTheSoftmax) {
  struct Form {
    const char* name;
    Tensor logits, label;
    ir::AttributeMap attrs;
  };
  const Tensor probs = pdist::testing::RandomTensor({{2, 3}, DataType::kFloat64}, 4, 0.2, 1.0);
  const std::vector<Form> forms = {
      {"hard, ignore_index", Random64({3, 5}, 11), I64({3, 1}, {2, -100, 4}), {}},
      {"axis 1", Random64({2, 3, 2}, 12), I64({2, 1, 2}, {0, 2, 1, 1}), {{"axis", int64_t{1}}}},
      {"soft label", Random64({2, 3}, 13), F64({2, 3}, {0.2, 0.3, 0.5, 0.6, 0.1, 0.1}), {{"soft_label", true}}},
      {"no softmax", probs, I64({2, 1}, {1, 2}), {{"use_softmax", false}}},
  };
  for (const Form& f : forms) {
    SCOPED_TRACE(f.name);
    const std::vector<Tensor> fwd = RunOk("cross_entropy_with_softmax", {f.logits, f.label}, f.attrs);
    ASSERT_EQ(fwd.size(), 2u);
    const Tensor g = Random64(fwd[1].shape(), 14);
    const std::vector<Tensor> from_softmax = RunOk("cross_entropy_with_softmax_grad", {f.label, fwd[0], g}, f.attrs);
    const std::vector<Tensor> from_logits =
        RunOk("cross_entropy_with_softmax_grad_from_logits", {f.label, f.logits, g}, f.attrs);
    ASSERT_EQ(from_softmax.size(), 1u);
    ASSERT_EQ(from_logits.size(), 1u);
    std::vector<double> expected(static_cast<size_t>(from_softmax[0].num_elements()));
    for (size_t i = 0; i < expected.size(); ++i) expected[i] = from_softmax[0].At(static_cast<int64_t>(i));
    ExpectValues(from_logits[0], expected, 0, "logits_grad");  // the same SoftmaxLane: bit for bit
  }
}

// Without return_softmax the op makes no softmax (an empty f[0]) and the same loss; its backward
// then reads the logits, in f32 too.
TEST(CrossEntropyTest, WithoutReturnSoftmaxTheLossIsTheSameAndTheBackwardReadsTheLogits) {
  const Tensor logits = Random64({3, 5}, 21);
  const Tensor label = I64({3, 1}, {2, -100, 4});
  const std::vector<Tensor> with = RunOk("cross_entropy_with_softmax", {logits, label});
  const std::vector<Tensor> without = RunOk("cross_entropy_with_softmax", {logits, label}, {{"return_softmax", false}});
  ASSERT_EQ(with.size(), 2u);
  ASSERT_EQ(without.size(), 2u);
  EXPECT_EQ(without[0].type().ToString(), "f64[0]");
  std::vector<double> loss(3);
  for (int64_t i = 0; i < 3; ++i) loss[static_cast<size_t>(i)] = with[1].At(i);
  ExpectValues(without[1], loss, 0, "loss");

  ir::Program program;
  ir::Builder b(&program);
  absl::StatusOr<std::vector<ir::Value*>> ce =
      b.Create("cross_entropy_with_softmax", {b.Data("logits", {{3, 5}, DataType::kFloat32}),
                                              b.Data("label", {{3, 1}, DataType::kInt64})},
               {{"return_softmax", false}});
  ASSERT_TRUE(ce.ok()) << ce.status();
  absl::StatusOr<std::vector<ir::Value*>> grads = ir::OpRegistry::Global().Find("cross_entropy_with_softmax")->grad(
      b, *(*ce)[1]->producer(), {nullptr, b.Data("g", {{3, 1}, DataType::kFloat32})});
  ASSERT_TRUE(grads.ok()) << grads.status();
  EXPECT_EQ((*grads)[0]->producer()->type(), "cross_entropy_with_softmax_grad_from_logits");
}

// bf16 logits: softmax in bf16 (the activation's type), the loss in f32 (what the op computes in);
// the backward reads the logits, not the softmax.
TEST(CrossEntropyTest, LowPrecisionLogitsGiveAFloat32LossAndABackwardFromTheLogits) {
  ir::Program program;
  ir::Builder b(&program);
  ir::Value* logits = b.Data("logits", {{4, 16}, DataType::kBFloat16});
  ir::Value* label = b.Data("label", {{4, 1}, DataType::kInt64});
  absl::StatusOr<std::vector<ir::Value*>> ce = b.Create("cross_entropy_with_softmax", {logits, label});
  ASSERT_TRUE(ce.ok()) << ce.status();
  EXPECT_EQ((*ce)[0]->type().ToString(), "bf16[4,16]");
  EXPECT_EQ((*ce)[1]->type().ToString(), "f32[4,1]");
  const ir::OpDef* def = ir::OpRegistry::Global().Find("cross_entropy_with_softmax");
  ASSERT_NE(def, nullptr);
  ir::Value* g = b.Data("loss_grad", {{4, 1}, DataType::kFloat32});
  absl::StatusOr<std::vector<ir::Value*>> grads = def->grad(b, *(*ce)[1]->producer(), {nullptr, g});
  ASSERT_TRUE(grads.ok()) << grads.status();
  ASSERT_NE((*grads)[0], nullptr);
  const ir::Operation* grad_op = (*grads)[0]->producer();
  EXPECT_EQ(grad_op->type(), "cross_entropy_with_softmax_grad_from_logits");
  EXPECT_EQ(grad_op->operand(1), logits);
  EXPECT_EQ((*grads)[0]->type().ToString(), "bf16[4,16]");
}

}  // namespace
}  // namespace pdist::nn_test

// Golden tests of the printed SPMD rules (describe_spmd) of the matmul, elementwise, activation,
// reduction, shape and slicing families; and that every one of their ops has all three slots.
#include "gtest/gtest.h"
#include "tests/spmd/spmd_test_util.h"

namespace pdist::nn_spmd_test {
namespace {

TEST(DescribeSpmd, Matmul) {
  EXPECT_EQ(Describe("matmul", {{64, 32}, {32, 48}}), "mk,kn->mn  k→Partial  pass P: x|y");
  EXPECT_EQ(Describe("matmul", {{64, 32}, {48, 32}}, {{"trans_y", true}}), "mk,nk->mn  k→Partial  pass P: x|y");
  EXPECT_EQ(Describe("matmul", {{32, 64}, {32, 48}}, {{"trans_x", true}}), "km,kn->mn  k→Partial  pass P: x|y");
  EXPECT_EQ(Describe("matmul", {{8, 64, 32}, {32, 48}}), "amk,kn->amn  k→Partial  pass P: x|y");
  EXPECT_EQ(Describe("matmul", {{1, 64, 32}, {4, 32, 48}}), "1mk,akn->amn  k→Partial  pass P: x|y");
  EXPECT_EQ(Describe("matmul", {{32}, {32, 48}}), "k,kn->n  k→Partial  pass P: x|y");
  EXPECT_EQ(Describe("matmul_grad", {{64, 32}, {32, 48}, {64, 48}}),
            "mk,kn,mn->mk,kn  x_grad: n→Partial  y_grad: m→Partial  pass P: out_grad");
  EXPECT_EQ(Describe("matmul_grad", {{8, 64, 32}, {32, 48}, {8, 64, 48}}),
            "amk,kn,amn->amk,kn  x_grad: n→Partial  y_grad: am→Partial  pass P: out_grad");
}

TEST(DescribeSpmd, Binary) {
  EXPECT_EQ(Describe("add", {{8, 16}, {16}}), "ab,b->ab  pass P: x&y");
  EXPECT_EQ(Describe("subtract", {{8, 16}, {8, 16}}), "ab,ab->ab  pass P: x&y");
  EXPECT_EQ(Describe("multiply", {{8, 16}, {16}}), "ab,b->ab  pass P: x|y");
  EXPECT_EQ(Describe("divide", {{8, 16}, {16}}), "ab,b->ab  pass P: x");
  EXPECT_EQ(Describe("maximum", {{8, 16}, {16}}), "ab,b->ab  pass P(max): x&y");
  EXPECT_EQ(Describe("greater_than", {{8, 16}, {16}}), "ab,b->ab");
  EXPECT_EQ(Describe("less_than", {{8, 16}, {16}}), "ab,b->ab");
  EXPECT_EQ(Describe("equal", {{8, 16}, {16}}), "ab,b->ab");
  EXPECT_EQ(Describe("add", {{64, 1, 1, 12}, {64, 32, 12}}), "a11d,bcd->abcd  pass P: x&y");
  EXPECT_EQ(Describe("add_grad", {{8, 16}, {16}, {8, 16}}), "ab,b,ab->ab,b  y_grad: a→Partial  pass P: out_grad");
  EXPECT_EQ(Describe("multiply_grad", {{8, 1}, {8, 16}, {8, 16}}),
            "a1,ab,ab->a1,ab  x_grad: b→Partial  pass P: out_grad");
  for (const char* op : {"subtract_grad", "divide_grad", "maximum_grad"}) {
    EXPECT_EQ(Describe(op, {{8, 16}, {8, 16}, {8, 16}}), "ab,ab,ab->ab,ab  pass P: out_grad") << op;
  }
}

TEST(DescribeSpmd, Unary) {
  for (const char* op : {"relu", "gelu", "silu", "tanh", "exp"}) {
    EXPECT_EQ(Describe(op, {{8, 16}}), "ab->ab") << op;
    EXPECT_EQ(Describe(std::string(op) + "_grad", {{8, 16}, {8, 16}}), "ab,ab->ab  pass P: out_grad") << op;
  }
  EXPECT_EQ(Describe("scale", {{8, 16}}), "ab->ab  pass P(any): x");
  EXPECT_EQ(Describe("scale", {{8, 16}}, {{"bias", 1.0}}), "ab->ab  pass P(avg,max): x");
  EXPECT_EQ(Describe("scale", {{8, 16}}, {{"scale", -2.0}}), "ab->ab  pass P: x");
  EXPECT_EQ(Describe("cast", {{8, 16}}, {{"dtype", ir::DataType::kBFloat16}}), "ab->ab  pass P(any): x");
  EXPECT_EQ(Describe("cast", {{8, 16}}, {{"dtype", ir::DataType::kInt32}}), "ab->ab");
  EXPECT_EQ(Describe("dropout", {{8, 16}, {0}}), "ab,_->ab,ab");
  EXPECT_EQ(Describe("dropout", {{8, 16}, {1}}), "ab,1->ab,ab");
  EXPECT_EQ(Describe("dropout_grad", {{8, 16}, {8, 16}}), "ab,ab->ab  pass P: out_grad");
}

TEST(DescribeSpmd, Reductions) {
  const ir::AttributeMap axis1 = {{"axis", std::vector<int64_t>{1}}};
  const ir::AttributeMap keep = {{"axis", std::vector<int64_t>{1}}, {"keep_dim", true}};
  EXPECT_EQ(Describe("sum", {{8, 16, 32}}, axis1), "abc->ac  b→Partial  pass P: x");
  EXPECT_EQ(Describe("sum", {{8, 16, 32}}, keep), "abc->a1c  b→Partial  pass P: x");
  EXPECT_EQ(Describe("sum", {{8, 16, 32}}), "abc->  abc→Partial  pass P: x");
  EXPECT_EQ(Describe("mean", {{8, 16, 32}}, axis1), "abc->ac  b→Partial(avg)  pass P: x");
  EXPECT_EQ(Describe("max", {{8, 16, 32}}, axis1), "abc->ac  b→Partial(max)  pass P(max): x");
  EXPECT_EQ(Describe("min", {{8, 16, 32}}, axis1), "abc->ac  b→Replicate");
  EXPECT_EQ(Describe("sum_grad", {{8, 16, 32}, {8, 32}}, axis1), "abc,ac->abc  b→Replicate  pass P: out_grad");
  EXPECT_EQ(Describe("mean_grad", {{8, 16, 32}, {8, 1, 32}}, keep), "abc,a1c->abc  b→Replicate  pass P: out_grad");
  EXPECT_EQ(Describe("max_grad", {{8, 16, 32}, {8, 32}, {8, 32}}, axis1),
            "abc,ac,ac->abc  b→Replicate  pass P: out_grad");
  EXPECT_EQ(Describe("min_grad", {{8, 16, 32}, {8, 32}, {8, 32}}, axis1),
            "abc,ac,ac->abc  b→Replicate  pass P: out_grad");
  EXPECT_EQ(Describe("full", {}, {{"shape", std::vector<int64_t>{8, 16}}}), "->ab");
}

TEST(DescribeSpmd, ShapeOps) {
  EXPECT_EQ(Describe("reshape", {{6, 12, 48, 24}}, {{"shape", std::vector<int64_t>{1, 72, 48, 4, 6}}}),
            "abcd->1,(ab),c,split(d,[4,6],0),split(d,[4,6],1)  pass P(any): x");
  EXPECT_EQ(Describe("reshape", {{8, 32, 64}}, {{"shape", std::vector<int64_t>{0, 0, 4, -1}}}),
            "abc->a,b,split(c,[4,16],0),split(c,[4,16],1)  pass P(any): x");
  EXPECT_EQ(Describe("unsqueeze", {{8, 16}}, {{"axis", std::vector<int64_t>{0}}}), "ab->1,a,b  pass P(any): x");
  EXPECT_EQ(Describe("squeeze", {{8, 1, 16}}, {{"axis", std::vector<int64_t>{}}}), "abc->a,c  pass P(any): x");
  EXPECT_EQ(Describe("transpose", {{8, 16, 32}}, {{"perm", std::vector<int64_t>{2, 0, 1}}}),
            "abc->cab  pass P(any): x");
  EXPECT_EQ(Describe("reshape", {{8, 32}}, {{"shape", std::vector<int64_t>{5, 5}}}).substr(0, 7), "<error:");
}

TEST(DescribeSpmd, SlicingOps) {
  EXPECT_EQ(Describe("split", {{6, 12, 48}}, {{"sections", std::vector<int64_t>{4, 4, 4}}, {"axis", int64_t{1}}}),
            "abc->abc,abc,abc  b→Replicate  pass P(any): x");
  EXPECT_EQ(Describe("split_with_num", {{6, 12, 48}}, {{"num", int64_t{2}}, {"axis", int64_t{0}}}),
            "abc->abc,abc  a→Replicate  pass P(any): x");
  EXPECT_EQ(Describe("concat", {{4, 16}, {8, 16}}, {{"axis", int64_t{0}}}),
            "ab,ab->ab  a→Replicate  pass P(any): x0&x1");
  const ir::AttributeMap slice = {{"axes", std::vector<int64_t>{1}},
                                  {"starts", std::vector<int64_t>{0}},
                                  {"ends", std::vector<int64_t>{1}},
                                  {"decrease_axis", std::vector<int64_t>{1}}};
  EXPECT_EQ(Describe("slice", {{8, 16, 32}}, slice), "abc->ac  b→Replicate  pass P(any): input");
  EXPECT_EQ(Describe("slice_grad", {{8, 16, 32}, {8, 32}}, slice), "abc,ac->abc  b→Replicate  pass P: out_grad");
}

TEST(SpmdSlots, EveryOpOfTheseFamiliesHasAllThree) {
  for (const char* op : {"matmul",      "matmul_grad",  "add",          "subtract",       "multiply",
                         "divide",      "maximum",      "add_grad",     "subtract_grad",  "multiply_grad",
                         "divide_grad", "maximum_grad", "greater_than", "less_than",      "equal",
                         "scale",       "relu",         "gelu",         "silu",           "tanh",
                         "exp",         "relu_grad",    "gelu_grad",    "silu_grad",      "tanh_grad",
                         "exp_grad",    "cast",         "dropout",      "dropout_grad",   "sum",
                         "mean",        "max",          "min",          "sum_grad",       "mean_grad",
                         "max_grad",    "min_grad",     "full",         "reshape",        "squeeze",
                         "unsqueeze",   "transpose",    "split",        "split_with_num", "concat",
                         "slice",       "slice_grad"}) {
    const ir::OpDef& def = Def(op);
    EXPECT_TRUE(def.infer_spmd) << op;
    EXPECT_TRUE(def.infer_spmd_reverse) << op;
    EXPECT_TRUE(def.describe_spmd) << op;
  }
}

}  // namespace
}  // namespace pdist::nn_spmd_test

// Files written before the norm statistics took x's leading shape still load: the flattened
// [rows] statistics of layer_norm and rms_norm are read as x.shape[:begin_norm_axis], from text
// and from model.pb, and print in today's form.
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ir/legacy_types.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/serialize.h"
#include "program.pb.h"

namespace pdist::ir {
namespace {

constexpr char kLegacyText[] = R"(program {
  %x = data "x" : f32[2,3,4]
  %g = param "g" : f32[4] {init = "ones"}
  %n, %m, %v = layer_norm(%x, %g, none) {begin_norm_axis = 2} : f32[2,3,4], f32[6], f32[6]
  %r, %i = rms_norm(%x, %g) : f32[2,3,4], f32[6]
  %s = add(%n, %r) : f32[2,3,4]
  %l = mean(%s) : f32[]
  loss %l
})";

TEST(LegacyTypesTest, FlattenedNormStatisticsFromTextAreUpgraded) {
  absl::StatusOr<Program> p = ParseProgram(kLegacyText);
  ASSERT_TRUE(p.ok()) << p.status();
  const auto& ops = p->block().ops();
  EXPECT_EQ(ops[0]->result(1)->type().shape, (Shape{2, 3}));
  EXPECT_EQ(ops[0]->result(2)->type().shape, (Shape{2, 3}));
  EXPECT_EQ(ops[1]->result(1)->type().shape, (Shape{2, 3}));
  EXPECT_THAT(PrintProgram(*p), ::testing::HasSubstr(": f32[2,3,4], f32[2,3], f32[2,3]"));
}

TEST(LegacyTypesTest, FlattenedNormStatisticsFromModelPbAreUpgraded) {
  absl::StatusOr<Program> today = ParseProgram(kLegacyText);
  ASSERT_TRUE(today.ok()) << today.status();
  absl::StatusOr<std::string> bytes = SerializeProgram(*today);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  proto::Program pb;
  ASSERT_TRUE(pb.ParseFromString(*bytes));
  int flattened = 0;
  for (proto::Value& v : *pb.mutable_values()) {
    if (v.type().shape_size() == 2 && v.type().shape(0) == 2 && v.type().shape(1) == 3) {
      v.mutable_type()->clear_shape();
      v.mutable_type()->add_shape(6);
      ++flattened;
    }
  }
  ASSERT_EQ(flattened, 3);
  pb.clear_checksum();
  absl::StatusOr<Program> loaded = DeserializeProgram(SealModelBytes(pb.SerializeAsString()));
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(PrintProgram(*loaded), PrintProgram(*today));
}

TEST(LegacyTypesTest, OnlyTheSameElementsInOneAxisAreAnOlderSpelling) {
  const TensorType inferred{{2, 3}, DataType::kFloat32};
  EXPECT_TRUE(IsLegacyResultType("layer_norm", 1, {{6}, DataType::kFloat32}, inferred, DataType::kFloat32));
  EXPECT_FALSE(IsLegacyResultType("layer_norm", 0, {{6}, DataType::kFloat32}, inferred, DataType::kFloat32));  // out, not a statistic
  EXPECT_FALSE(IsLegacyResultType("layer_norm", 1, {{5}, DataType::kFloat32}, inferred, DataType::kFloat32));
  EXPECT_FALSE(IsLegacyResultType("layer_norm", 1, {{6}, DataType::kFloat64}, inferred, DataType::kFloat32));
  EXPECT_FALSE(IsLegacyResultType("matmul", 1, {{6}, DataType::kFloat32}, inferred, DataType::kFloat32));
  // A wrong type in any other form is still an error naming it.
  EXPECT_THAT(std::string(ParseProgram(R"(program {
  %x = data "x" : f32[2,3,4]
  %n, %m, %v = layer_norm(%x, none, none) {begin_norm_axis = 2} : f32[2,3,4], f32[3,2], f32[3,2]
})").status().message()),
              ::testing::HasSubstr("is written as f32[3,2] but the op infers f32[2,3]"));
}

// Until session 20 a bf16/f16 norm's statistics were in x's dtype; they are f32 now (the type the
// norm computes in), and programs written before still load.
TEST(LegacyTypesTest, LowPrecisionStatisticsReadAsFloat32) {
  const TensorType inferred{{2, 3}, DataType::kFloat32};
  const DataType bf16 = DataType::kBFloat16;
  EXPECT_TRUE(IsLegacyResultType("layer_norm", 2, {{2, 3}, bf16}, inferred, bf16));
  EXPECT_TRUE(IsLegacyResultType("rms_norm", 1, {{2, 3}, DataType::kFloat16}, inferred, DataType::kFloat16));
  EXPECT_TRUE(IsLegacyResultType("rms_norm", 1, {{6}, bf16}, inferred, bf16));  // both old spellings
  EXPECT_FALSE(IsLegacyResultType("rms_norm", 1, {{3, 2}, bf16}, inferred, bf16));
  EXPECT_FALSE(IsLegacyResultType("rms_norm", 0, {{2, 3}, bf16}, inferred, bf16));
  // Statistics in a dtype x never had were never written.
  EXPECT_FALSE(IsLegacyResultType("rms_norm", 1, {{2, 3}, bf16}, inferred, DataType::kFloat32));
  EXPECT_FALSE(IsLegacyResultType("rms_norm", 1, {{2, 3}, bf16}, inferred, DataType::kFloat16));
  // The gradient after it reads the upgraded statistics: the text is upgraded op by op.
  absl::StatusOr<Program> old = ParseProgram(R"(program {
  %x = data "x" : bf16[2,3,4]
  %g = data "g" : bf16[2,3,4]
  %n, %m, %v = layer_norm(%x, none, none) {begin_norm_axis = 2} : bf16[2,3,4], bf16[2,3], bf16[2,3]
  %dx, %ds, %db = layer_norm_grad(%x, none, none, %m, %v, %g) {begin_norm_axis = 2} : bf16[2,3,4], bf16[0], bf16[0]
})");
  ASSERT_TRUE(old.ok()) << old.status();
  EXPECT_THAT(PrintProgram(*old), ::testing::HasSubstr(": bf16[2,3,4], f32[2,3], f32[2,3]"));
}

TEST(LegacyTypesTest, LowPrecisionAttentionLseReadsAsFloat32) {
  const TensorType inferred{{2, 4, 8}, DataType::kFloat32};
  const DataType bf16 = DataType::kBFloat16;
  EXPECT_TRUE(IsLegacyResultType("flash_attn", 2, {{2, 4, 8}, bf16}, inferred, bf16));
  EXPECT_TRUE(IsLegacyResultType("flash_attention", 2, {{2, 4, 8}, DataType::kFloat16}, inferred, DataType::kFloat16));
  EXPECT_FALSE(IsLegacyResultType("flash_attn", 0, {{2, 4, 8}, bf16}, inferred, bf16));  // out
  EXPECT_FALSE(IsLegacyResultType("flash_attn", 2, {{64}, bf16}, inferred, bf16));       // never written flattened
  // The gradient after it reads the upgraded lse, from text (op by op) and from model.pb.
  constexpr char kOld[] = R"(program {
  %q = data "q" : bf16[2,8,4,16]
  %g = data "g" : bf16[2,8,4,16]
  %o, %p, %lse, %so = flash_attn(%q, %q, %q) {causal = true, dropout = 0.0, return_softmax = false, is_test = false} : bf16[2,8,4,16], bf16[0], bf16[2,4,8], i64[2]
  %dq, %dk, %dv = flash_attn_grad(%q, %q, %q, %o, %lse, %so, none, %g) {causal = true, dropout = 0.0} : bf16[2,8,4,16], bf16[2,8,4,16], bf16[2,8,4,16]
})";
  absl::StatusOr<Program> old = ParseProgram(kOld);
  ASSERT_TRUE(old.ok()) << old.status();
  EXPECT_THAT(PrintProgram(*old), ::testing::HasSubstr("bf16[0], f32[2,4,8], i64[2]"));
}

}  // namespace
}  // namespace pdist::ir

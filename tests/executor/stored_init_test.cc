// Parameters whose numbers the program carries (init "stored": an imported model's weights):
// they survive model.pb, every rank cuts its own piece out of them, a master weight starts from
// them, and a stored blob that does not match its value is refused by the verifier.
#include <cstring>

#include "executor/executor.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ir/builder.h"
#include "ir/serialize.h"
#include "ir/verifier.h"

namespace pdist::exec {
namespace {

using ::testing::HasSubstr;

// f32 numbers 0.5 * i + 0.25 (exact in f32, not in bf16 beyond 256), row-major.
std::shared_ptr<const ir::StoredNumbers> Counting(int64_t n) {
  std::string bytes(static_cast<size_t>(n) * sizeof(float), '\0');
  for (int64_t i = 0; i < n; ++i) {
    const float x = 0.5f * static_cast<float>(i) + 0.25f;
    std::memcpy(bytes.data() + i * sizeof(float), &x, sizeof(float));
  }
  return std::make_shared<const ir::StoredNumbers>(ir::StoredNumbers{ir::DataType::kFloat32, std::move(bytes)});
}

// x:f32[2,4] · w:f32[4,6] (stored) → sum.
ir::Program StoredProgram() {
  ir::Program p;
  ir::Builder b(&p);
  ir::Value* x = b.Data("x", {{2, 4}, ir::DataType::kFloat32});
  ir::Value* w = b.Parameter("w", {{4, 6}, ir::DataType::kFloat32}, ir::kStoredInit);
  w->set_stored(Counting(24));
  p.set_loss(b.Op1("sum", {b.Op1("matmul", {x, w}).value()}).value());
  return p;
}

TEST(StoredInitTest, TheWholeTensorIsInitialisedFromItsNumbers) {
  const ir::Program p = StoredProgram();
  ASSERT_TRUE(ir::VerifyProgram(p).ok()) << ir::VerifyProgram(p);
  Workspace ws;
  ASSERT_TRUE(InitializeWorkspace(p, /*seed=*/7, ws).ok());
  const Tensor& w = ws.at("w");
  for (int64_t i = 0; i < 24; ++i) EXPECT_EQ(w.At(i), 0.5 * static_cast<double>(i) + 0.25) << "element " << i;
}

TEST(StoredInitTest, NumbersSurviveModelPbAndClones) {
  const ir::Program p = StoredProgram();
  absl::StatusOr<std::string> bytes = ir::SerializeProgram(p);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  absl::StatusOr<ir::Program> loaded = ir::DeserializeProgram(*bytes);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  const ir::Value* w = loaded->FindArgument("w");
  ASSERT_NE(w->stored(), nullptr);
  EXPECT_EQ(w->stored()->bytes, p.FindArgument("w")->stored()->bytes);
  EXPECT_EQ(loaded->Clone().FindArgument("w")->stored(), w->stored()) << "a clone shares the numbers, never copies them";
  EXPECT_EQ(*ir::SerializeProgram(*loaded), *bytes);
}

TEST(StoredInitTest, EachRankCutsItsPieceOutOfTheWholeTensor) {
  // w sharded along its columns over 2 ranks, as partition leaves it: a local f32[4,3] type with
  // the whole tensor's numbers.
  for (int64_t rank = 0; rank < 2; ++rank) {
    ir::Program local = StoredProgram();
    ir::Value* w = local.FindArgument("w");
    w->set_dist_attr(ir::DistAttr{ir::ProcessMesh::Range({2}, {"mp"}), {-1, 0}, {}});
    w->set_type({{4, 3}, ir::DataType::kFloat32});
    local.set_local_rank(rank);
    Workspace ws;
    ASSERT_TRUE(InitializeLocalWorkspace(local, 7, rank, ws).ok());
    const Tensor& piece = ws.at("w");
    for (int64_t row = 0; row < 4; ++row) {
      for (int64_t col = 0; col < 3; ++col) {
        const int64_t global = row * 6 + rank * 3 + col;
        EXPECT_EQ(piece.At(row * 3 + col), 0.5 * static_cast<double>(global) + 0.25) << "rank " << rank;
      }
    }
  }
}

TEST(StoredInitTest, ALoweredParameterAndItsMasterRoundTheNumbers) {
  // Mixed precision o2 lowers w to bf16 and gives the optimizer an f32 master "cast_of(w)": both
  // hold the bf16-rounded numbers (the master starts from the parameter, as in Megatron).
  ir::Program p = StoredProgram();
  ir::Value* w = p.FindArgument("w");
  w->set_type({{4, 6}, ir::DataType::kBFloat16});
  w->set_stored(std::make_shared<const ir::StoredNumbers>(ir::StoredNumbers{ir::DataType::kFloat32, std::string(
      reinterpret_cast<const char*>(std::vector<float>(24, 1.00390625f).data()), 24 * sizeof(float))}));
  ir::Builder b(&p);
  b.State("w.master", {{4, 6}, ir::DataType::kFloat32}, "cast_of(w)");
  Workspace ws;
  ASSERT_TRUE(InitializeWorkspace(p, 7, ws).ok());
  // 1 + 2^-8 is not a bf16 number (7 mantissa bits): it rounds to 1.
  EXPECT_EQ(ws.at("w").At(5), 1.0);
  EXPECT_EQ(ws.at("w.master").At(5), 1.0);
}

TEST(StoredInitTest, NumbersThatDoNotMatchTheirValueAreRefused) {
  ir::Program missing = StoredProgram();
  missing.FindArgument("w")->set_stored(nullptr);
  EXPECT_THAT(std::string(ir::VerifyProgram(missing).message()),
              HasSubstr("has init \"stored\" but carries no numbers (textual IR does not hold tensor data"));

  ir::Program short_blob = StoredProgram();
  short_blob.FindArgument("w")->set_stored(Counting(23));
  EXPECT_THAT(std::string(ir::VerifyProgram(short_blob).message()),
              HasSubstr("(f32[4,6]) stores 92 bytes of f32; its whole tensor has 96"));

  ir::Program other_init = StoredProgram();
  other_init.FindArgument("w")->set_init("zeros");
  EXPECT_THAT(std::string(ir::VerifyProgram(other_init).message()),
              HasSubstr("carries stored numbers but its init is 'zeros', not \"stored\""));
}

}  // namespace
}  // namespace pdist::exec

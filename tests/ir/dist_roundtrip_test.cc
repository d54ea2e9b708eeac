// DistAttrs in the IR: text print → parse → print, model.pb bytes, parser and verifier errors.
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ir/builder.h"
#include "ir/dist/shard_tensor.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/serialize.h"
#include "ir/verifier.h"
#include "program.pb.h"
#include "tests/ir/sample_programs.h"

namespace pdist::ir {
namespace {

using ::pdist::testing::F32;
using ::testing::HasSubstr;

// MatmulSumProgram with every kind of DistAttr: annotated (x, w), completed with a partial
// result and non-default process ids (the matmul), none (the loss).
Program DistProgram() {
  Program p = testing::MatmulSumProgram();
  const ProcessMesh mesh = ProcessMesh::Range({2, 2}, {"dp", "mp"});
  EXPECT_TRUE(ShardTensor(p.FindArgument("x"), mesh, {Placement::Shard(0), Placement::Replicate()}).ok());
  EXPECT_TRUE(ShardTensor(p.FindArgument("w"), mesh, {Placement::Replicate(), Placement::Shard(0)}).ok());
  Value* y = p.block().ops()[0]->result(0);
  y->set_dist_attr(DistAttr{mesh, {0, -1}, {{1, ReduceType::kSum}}});
  Value* loss = p.loss();
  loss->set_dist_attr(DistAttr{*ProcessMesh::Create({2}, {6, 4}, {"pp"}), {}, {{0, ReduceType::kAvg}}});
  return p;
}

constexpr char kDistText[] =
    "program {\n"
    "  %0 = data \"x\" : f32[8,64] dist! {mesh: [2,2] [dp,mp], dims_mapping: [0,-1]}\n"
    "  %1 = param \"w\" : f32[64,64] dist! {mesh: [2,2] [dp,mp], dims_mapping: [1,-1]} {init = \"normal(0.02)\"}\n"
    "  %2 = matmul(%0, %1) {trans_x = false, trans_y = false} : f32[8,64] dist {mesh: [2,2] [dp,mp], "
    "dims_mapping: [0,-1], partial: {1: sum}}\n"
    "  %3 = sum(%2) {axis = int[], keep_dim = false} : f32[] dist {mesh: [2] [pp] ids [6,4], dims_mapping: [], "
    "partial: {0: avg}}\n"
    "  loss %3\n"
    "}\n";

std::string Serialized(const Program& p) {
  absl::StatusOr<std::string> bytes = SerializeProgram(p);
  EXPECT_TRUE(bytes.ok()) << bytes.status();
  return bytes.ok() ? *bytes : "";
}

std::string ParseError(const std::string& text) {
  absl::StatusOr<Program> p = ParseProgram(text);
  EXPECT_FALSE(p.ok()) << text;
  return p.ok() ? "" : std::string(p.status().message());
}

TEST(DistRoundTripTest, GoldenText) { EXPECT_EQ(PrintProgram(DistProgram()), kDistText); }

TEST(DistRoundTripTest, PrintParsePrintIsIdentical) {
  absl::StatusOr<Program> parsed = ParseProgram(kDistText);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(PrintProgram(*parsed), kDistText);
  EXPECT_TRUE(VerifyProgram(*parsed).ok()) << VerifyProgram(*parsed);
  EXPECT_TRUE(parsed->FindArgument("x")->dist_annotated());
  EXPECT_FALSE(parsed->loss()->dist_annotated());
  EXPECT_EQ(parsed->FindArgument("w")->dist_attr(), DistProgram().FindArgument("w")->dist_attr());
}

TEST(DistRoundTripTest, ModelPbBytesAreExact) {
  const Program p = DistProgram();
  const std::string bytes = Serialized(p);
  absl::StatusOr<Program> loaded = DeserializeProgram(bytes);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(PrintProgram(*loaded), kDistText);
  EXPECT_EQ(Serialized(*loaded), bytes);
  // The parsed text gives the same bytes as the built program.
  absl::StatusOr<Program> parsed = ParseProgram(kDistText);
  ASSERT_TRUE(parsed.ok());
  EXPECT_EQ(Serialized(*parsed), bytes);
  // Clone keeps every DistAttr and mark.
  EXPECT_EQ(PrintProgram(p.Clone()), kDistText);
}

TEST(DistRoundTripTest, TrainingProgramWithAnnotationsRoundTrips) {
  Program p = testing::TrainingProgram();
  const ProcessMesh mesh = ProcessMesh::Range({4}, {"dp"});
  ASSERT_TRUE(ShardTensor(p.FindArgument("x"), mesh, {Placement::Shard(0)}).ok());
  ASSERT_TRUE(ShardTensor(p.FindArgument("w.moment1"), mesh, {Placement::Shard(1)}).ok());
  const std::string text = PrintProgram(p);
  EXPECT_THAT(text, HasSubstr("state \"w.moment1\" : f32[6,6] dist! {mesh: [4] [dp], dims_mapping: [-1,0]} {init"));
  absl::StatusOr<Program> parsed = DecodeProgram(text);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(PrintProgram(*parsed), text);
  absl::StatusOr<Program> loaded = DeserializeProgram(Serialized(*parsed));
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(PrintProgram(*loaded), text);
}

TEST(DistRoundTripTest, ParseDistAttrReadsToString) {
  for (const char* text : {"{mesh: [2,2] [x,y], dims_mapping: [0,-1], partial: {1: sum}}",
                           "{mesh: [3] [d0] ids [5,3,4], dims_mapping: [-1,0]}", "{mesh: [1] [a], dims_mapping: []}"}) {
    absl::StatusOr<DistAttr> attr = ParseDistAttr(text);
    ASSERT_TRUE(attr.ok()) << text << ": " << attr.status();
    EXPECT_EQ(attr->ToString(), text);
  }
  // Ids written out in full read back as the default ones (printed without ids).
  absl::StatusOr<DistAttr> range = ParseDistAttr("{mesh: [2] [x] ids [0,1], dims_mapping: [0]}");
  ASSERT_TRUE(range.ok());
  EXPECT_EQ(range->ToString(), "{mesh: [2] [x], dims_mapping: [0]}");
}

TEST(DistParseErrorTest, ErrorsPointAtTheText) {
  const std::string head = "program {\n  %0 = data \"x\" : f32[8,6] ";
  EXPECT_EQ(ParseError(head + "dist {mesh: [2,2] [x,y], dims_mapping: [0,0]}\n}"),
            "line 2:28: value of type f32[8,6]: dist attr {mesh: [2,2] [x,y], dims_mapping: [0,0]}: "
            "mesh dim 0 (x) shards both tensor dim 0 and tensor dim 1");
  EXPECT_THAT(ParseError(head + "dist {mesh: [2] [x], dims_mapping: [0]}\n}"),
              HasSubstr("dims_mapping [0] has 1 entries for a tensor of shape [8,6] (rank 2)"));
  EXPECT_THAT(ParseError(head + "dist {mesh: [2] [x], dims_mapping: [3,-1]}\n}"), HasSubstr("mesh dim 3, out of range"));
  EXPECT_THAT(ParseError(head + "dist {mesh: [2,2] [x], dims_mapping: [0,-1]}\n}"),
              HasSubstr("line 2:40: process mesh [2,2] has 2 dims but 1 dim names"));
  EXPECT_THAT(ParseError(head + "dist {mesh: [2] [x] ids [0,0], dims_mapping: [0,-1]}\n}"),
              HasSubstr("process id 0 appears twice"));
  EXPECT_THAT(ParseError(head + "dist {mesh: [2] [x], dims_mapping: [-1,-1], partial: {0: prod}}\n}"),
              HasSubstr("unknown reduce type 'prod'"));
  EXPECT_THAT(ParseError(head + "dist {mesh: [2,2] [x,y], dims_mapping: [-1,-1], partial: {0: sum, 0: max}}\n}"),
              HasSubstr("partial mesh dim 0 is given twice"));
  EXPECT_THAT(ParseError(head + "dist {dims_mapping: [0,-1]}\n}"), HasSubstr("expected 'mesh' in the dist attr"));
  EXPECT_THAT(ParseError(head + "dist {mesh: [2] [x]}\n}"), HasSubstr("expected ',' after the mesh, got '}'"));
  EXPECT_THAT(ParseError(head + "dist [0,-1]\n}"), HasSubstr("expected '{' to open the dist attr"));
  EXPECT_THAT(ParseError(head + "dist {mesh: [4611686018427387904,4] [x,y], dims_mapping: [0,-1]}\n}"),
              HasSubstr("processes"));
  EXPECT_THAT(ParseError(head + "dist! {mesh: [2] [x], dims_mapping: [0,-1], partial: {0: sum}}\n}"),
              HasSubstr("mesh dim 0 (x) is both sharding tensor dim 0 and partial (sum)"));
}

TEST(DistVerifierTest, ChecksEachValueAgainstItsShape) {
  Program p = DistProgram();
  p.block().ops()[0]->result(0)->set_dist_attr(DistAttr{ProcessMesh::Range({2}), {0, 0}, {}});
  const absl::Status s = VerifyProgram(p);
  EXPECT_THAT(std::string(s.message()), HasSubstr("value %2 (f32[8,64]): dist attr"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("mesh dim 0 (d0) shards both tensor dim 0 and tensor dim 1"));
  EXPECT_FALSE(SerializeProgram(p).ok());

  Program q = testing::MatmulSumProgram();
  q.FindArgument("w")->set_dist_annotated(true);
  EXPECT_THAT(std::string(VerifyProgram(q).message()), HasSubstr("%1 is marked annotated but has no dist attr"));
}

TEST(DistVerifierTest, MeshesMayDifferBetweenOperandsAndResults) {
  // Cross-op agreement is the completion pass's job, not an IR invariant.
  Program p = testing::MatmulSumProgram();
  ASSERT_TRUE(ShardTensor(p.FindArgument("x"), ProcessMesh::Range({2}), {Placement::Shard(0)}).ok());
  ASSERT_TRUE(ShardTensor(p.FindArgument("w"), ProcessMesh::Range({4}), {Placement::Shard(1)}).ok());
  EXPECT_TRUE(VerifyProgram(p).ok());
}

TEST(DistSerializeTest, CorruptDistAttrsAreErrors) {
  auto load_with = [](const std::function<void(proto::DistAttr*)>& corrupt) {
    proto::Program p;
    EXPECT_TRUE(p.ParseFromString(Serialized(DistProgram())));
    p.clear_checksum();
    corrupt(p.mutable_values(2)->mutable_dist_attr());
    absl::StatusOr<Program> loaded = DeserializeProgram(SealModelBytes(p.SerializeAsString()));
    EXPECT_FALSE(loaded.ok());
    return std::string(loaded.status().message());
  };
  EXPECT_THAT(load_with([](proto::DistAttr* d) { d->set_partial_reduce(0, "prod"); }),
              HasSubstr("value 2: dist_attr: unknown reduce type 'prod'"));
  EXPECT_THAT(load_with([](proto::DistAttr* d) { d->add_partial_dims(0); }),
              HasSubstr("value 2: dist_attr: 2 partial dims but 1 reduce types"));
  EXPECT_THAT(load_with([](proto::DistAttr* d) {
                d->add_partial_dims(1);
                d->add_partial_reduce("sum");
              }),
              HasSubstr("partial mesh dim 1 appears twice"));
  EXPECT_THAT(load_with([](proto::DistAttr* d) { d->mutable_mesh()->add_process_ids(9); }),
              HasSubstr("value 2: dist_attr: process mesh [2,2] needs 4 process ids, got 5"));
  EXPECT_THAT(load_with([](proto::DistAttr* d) { d->add_dims_mapping(-1); }),
              HasSubstr("dims_mapping [0,-1,-1] has 3 entries"));
  EXPECT_THAT(load_with([](proto::DistAttr* d) { d->clear_mesh(); }), HasSubstr("at least one dim"));
}

}  // namespace
}  // namespace pdist::ir

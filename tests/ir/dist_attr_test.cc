// ProcessMesh, Placement and DistAttr: conversions both ways, printing, every Verify error.
#include "ir/dist/dist_attr.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ir/dist/shard_tensor.h"
#include "ir/spmd/spmd_rule.h"

namespace pdist::ir {
namespace {

using ::testing::HasSubstr;

const Placement R = Placement::Replicate();
Placement S(int64_t d) { return Placement::Shard(d); }
Placement P(ReduceType r = ReduceType::kSum) { return Placement::Partial(r); }

std::string Message(const absl::Status& s) { return std::string(s.message()); }

// ---- ProcessMesh ------------------------------------------------------------------------------

TEST(ProcessMeshTest, RangePrintsWithoutIds) {
  const ProcessMesh mesh = ProcessMesh::Range({2, 2}, {"dp", "mp"});
  EXPECT_EQ(mesh.ToString(), "[2,2] [dp,mp]");
  EXPECT_EQ(mesh.size(), 4);
  EXPECT_EQ(mesh.ndim(), 2);
  EXPECT_TRUE(mesh.has_default_ids());
  EXPECT_EQ(ProcessMesh::Range({4}).ToString(), "[4] [d0]");
}

TEST(ProcessMeshTest, OtherIdsArePrinted) {
  absl::StatusOr<ProcessMesh> mesh = ProcessMesh::Create({2, 2}, {4, 5, 6, 7}, {"x", "y"});
  ASSERT_TRUE(mesh.ok()) << mesh.status();
  EXPECT_EQ(mesh->ToString(), "[2,2] [x,y] ids [4,5,6,7]");
  EXPECT_FALSE(mesh->has_default_ids());
  EXPECT_TRUE(mesh->Contains(6));
  EXPECT_FALSE(mesh->Contains(0));
  EXPECT_EQ(mesh->DimIndex("y"), 1);
  EXPECT_EQ(mesh->DimIndex("z"), -1);
}

TEST(ProcessMeshTest, CreateDefaultsNamesAndRejectsBadInput) {
  absl::StatusOr<ProcessMesh> unnamed = ProcessMesh::Create({2}, {0, 1}, {});
  ASSERT_TRUE(unnamed.ok());
  EXPECT_EQ(unnamed->dim_names(), std::vector<std::string>({"d0"}));
  absl::StatusOr<ProcessMesh> default_ids = ProcessMesh::Create({2, 3}, {}, {"a", "b"});
  ASSERT_TRUE(default_ids.ok());
  EXPECT_EQ(*default_ids, ProcessMesh::Range({2, 3}, {"a", "b"}));
  // Absurd shapes from user input are errors, not a huge allocation.
  EXPECT_THAT(Message(ProcessMesh::Create({1 << 20, 1 << 20}, {}, {}).status()), HasSubstr("more than 1048576 processes"));
  EXPECT_THAT(Message(ProcessMesh::Create({2, 2}, {0, 1, 2}, {}).status()), HasSubstr("needs 4 process ids, got 3"));
  EXPECT_THAT(Message(ProcessMesh::Create({2}, {1, 1}, {}).status()), HasSubstr("process id 1 appears twice"));
  EXPECT_THAT(Message(ProcessMesh::Create({2}, {-1, 0}, {}).status()), HasSubstr("process id -1 is negative"));
  EXPECT_THAT(Message(ProcessMesh::Create({2, 1}, {0, 1}, {"x", "x"}).status()), HasSubstr("dim name 'x' appears twice"));
  EXPECT_THAT(Message(ProcessMesh::Create({2}, {0, 1}, {"a b"}).status()), HasSubstr("'a b' is not an identifier"));
  EXPECT_THAT(Message(ProcessMesh::Create({2}, {0, 1}, {"x", "y"}).status()), HasSubstr("1 dims but 2 dim names"));
  EXPECT_THAT(Message(ProcessMesh::Create({0}, {}, {}).status()), HasSubstr("every dim must be >= 1, got 0"));
  EXPECT_THAT(Message(ProcessMesh::Create({}, {}, {}).status()), HasSubstr("at least one dim"));
}

TEST(ProcessMeshTest, CoordinateOfIsRowMajor) {
  const ProcessMesh mesh = ProcessMesh::Range({2, 3});
  EXPECT_EQ(mesh.CoordinateOf(0), std::vector<int64_t>({0, 0}));
  EXPECT_EQ(mesh.CoordinateOf(4), std::vector<int64_t>({1, 1}));
  EXPECT_EQ(mesh.CoordinateOf(5), std::vector<int64_t>({1, 2}));
  EXPECT_TRUE(mesh.CoordinateOf(6).empty());
  absl::StatusOr<ProcessMesh> shifted = ProcessMesh::Create({2, 2}, {7, 6, 5, 4}, {});
  ASSERT_TRUE(shifted.ok());
  EXPECT_EQ(shifted->CoordinateOf(5), std::vector<int64_t>({1, 0}));
}

TEST(ProcessMeshTest, SubMeshTakesOneSliceAlongADim) {
  const ProcessMesh mesh = ProcessMesh::Range({2, 3}, {"pp", "mp"});
  absl::StatusOr<ProcessMesh> stage1 = mesh.SubMesh(0, 1);
  ASSERT_TRUE(stage1.ok()) << stage1.status();
  EXPECT_EQ(stage1->ToString(), "[3] [mp] ids [3,4,5]");
  absl::StatusOr<ProcessMesh> column = mesh.SubMesh(1, 2);
  ASSERT_TRUE(column.ok()) << column.status();
  EXPECT_EQ(column->ToString(), "[2] [pp] ids [2,5]");
  absl::StatusOr<ProcessMesh> first = mesh.SubMesh(0, 0);
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(first->ToString(), "[3] [mp]");  // ids 0,1,2 are the default ones
  // A 3-d mesh keeps the order of the remaining dims.
  absl::StatusOr<ProcessMesh> middle = ProcessMesh::Range({2, 2, 2}, {"a", "b", "c"}).SubMesh(1, 1);
  ASSERT_TRUE(middle.ok());
  EXPECT_EQ(middle->ToString(), "[2,2] [a,c] ids [2,3,6,7]");
  EXPECT_THAT(Message(mesh.SubMesh(2, 0).status()), HasSubstr("dim 2 is out of range"));
  EXPECT_THAT(Message(mesh.SubMesh(0, 2).status()), HasSubstr("index 2 is out of range for dim 0 (pp, size 2)"));
  EXPECT_THAT(Message(ProcessMesh::Range({4}).SubMesh(0, 0).status()), HasSubstr("2 or more dims"));
}

// ---- Placement ----------------------------------------------------------------------------------

TEST(PlacementTest, PrintsAndParsesLongAndShortForms) {
  EXPECT_EQ(S(1).ToString(), "Shard(1)");
  EXPECT_EQ(R.ToString(), "Replicate()");
  EXPECT_EQ(P(ReduceType::kAvg).ToString(), "Partial(avg)");
  const std::pair<const char*, Placement> cases[] = {
      {"Shard(0)", S(0)},   {"S(2)", S(2)},          {" Shard( -1 ) ", S(-1)},     {"Replicate()", R},
      {"R", R},             {"Replicate", R},        {"Partial()", P()},           {"P", P()},
      {"Partial(max)", P(ReduceType::kMax)},         {"P(avg)", P(ReduceType::kAvg)},
  };
  for (const auto& [text, expected] : cases) {
    absl::StatusOr<Placement> p = Placement::Parse(text);
    ASSERT_TRUE(p.ok()) << text << ": " << p.status();
    EXPECT_EQ(*p, expected) << text;
    absl::StatusOr<Placement> again = Placement::Parse(p->ToString());
    ASSERT_TRUE(again.ok());
    EXPECT_EQ(*again, *p);
  }
}

TEST(PlacementTest, ParseErrorsNameTheText) {
  EXPECT_THAT(Message(Placement::Parse("Shar(0)").status()), HasSubstr("unknown placement 'Shar(0)'"));
  EXPECT_THAT(Message(Placement::Parse("Shard(x)").status()), HasSubstr("'Shard(x)': the tensor dim must be an integer"));
  EXPECT_THAT(Message(Placement::Parse("Shard").status()), HasSubstr("unknown placement 'Shard'"));
  EXPECT_THAT(Message(Placement::Parse("Partial(prod)").status()), HasSubstr("unknown reduce type 'prod'"));
  EXPECT_THAT(Message(Placement::Parse("Replicate(0)").status()), HasSubstr("unknown placement"));
}

TEST(PlacementTest, ListsParseAndErrorsNameTheItem) {
  absl::StatusOr<std::vector<Placement>> list = ParsePlacements("Replicate(), Shard(1)");
  ASSERT_TRUE(list.ok()) << list.status();
  EXPECT_EQ(*list, std::vector<Placement>({R, S(1)}));
  EXPECT_EQ(PlacementsToString(*list), "[Replicate(), Shard(1)]");
  EXPECT_TRUE(ParsePlacements("")->empty());
  EXPECT_THAT(Message(ParsePlacements("R,Bad").status()), HasSubstr("item 1: unknown placement 'Bad'"));
}

// ---- DistAttr ----------------------------------------------------------------------------------

TEST(DistAttrTest, PlacementsToMappingOn1DMesh) {
  const ProcessMesh mesh = ProcessMesh::Range({4}, {"dp"});
  absl::StatusOr<DistAttr> row = DistAttr::FromPlacements(mesh, 2, {S(0)});
  ASSERT_TRUE(row.ok()) << row.status();
  EXPECT_EQ(row->dims_mapping, DimsMapping({0, -1}));
  EXPECT_TRUE(row->partial.empty());
  absl::StatusOr<DistAttr> last = DistAttr::FromPlacements(mesh, 3, {S(-1)});  // counts from the end
  ASSERT_TRUE(last.ok());
  EXPECT_EQ(last->dims_mapping, DimsMapping({-1, -1, 0}));
  absl::StatusOr<DistAttr> partial = DistAttr::FromPlacements(mesh, 2, {P(ReduceType::kAvg)});
  ASSERT_TRUE(partial.ok());
  EXPECT_EQ(partial->dims_mapping, DimsMapping({-1, -1}));
  EXPECT_EQ(partial->partial, PartialDims({{0, ReduceType::kAvg}}));
  EXPECT_TRUE(partial->is_partial());
  EXPECT_FALSE(partial->is_replicated());
  absl::StatusOr<DistAttr> replicated = DistAttr::FromPlacements(mesh, 2, {R});
  ASSERT_TRUE(replicated.ok());
  EXPECT_TRUE(replicated->is_replicated());
  EXPECT_EQ(*replicated, DistAttr::Replicated(mesh, 2));
}

TEST(DistAttrTest, PlacementsToMappingOn2DMesh) {
  const ProcessMesh mesh = ProcessMesh::Range({2, 2}, {"x", "y"});
  absl::StatusOr<DistAttr> a = DistAttr::FromPlacements(mesh, 2, {S(0), P()});
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->dims_mapping, DimsMapping({0, -1}));
  EXPECT_EQ(a->partial, PartialDims({{1, ReduceType::kSum}}));
  absl::StatusOr<DistAttr> b = DistAttr::FromPlacements(mesh, 3, {S(2), S(0)});
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->dims_mapping, DimsMapping({1, -1, 0}));
  absl::StatusOr<DistAttr> c = DistAttr::FromPlacements(mesh, 2, {R, S(1)});
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->dims_mapping, DimsMapping({-1, 1}));
}

TEST(DistAttrTest, MappingToPlacementsRoundTrips) {
  const ProcessMesh mesh = ProcessMesh::Range({2, 2}, {"x", "y"});
  const std::vector<std::vector<Placement>> cases = {
      {R, R}, {S(0), R}, {R, S(0)}, {S(1), S(0)}, {S(0), P()}, {P(ReduceType::kMax), S(1)}, {P(), P()}};
  for (const std::vector<Placement>& placements : cases) {
    absl::StatusOr<DistAttr> attr = DistAttr::FromPlacements(mesh, 2, placements);
    ASSERT_TRUE(attr.ok()) << PlacementsToString(placements) << ": " << attr.status();
    EXPECT_EQ(attr->ToPlacements(), placements) << attr->ToString();
    EXPECT_TRUE(attr->Verify({8, 6}).ok());
  }
  DistAttr hand{mesh, {1, 0}, {}};
  EXPECT_EQ(hand.ToPlacements(), std::vector<Placement>({S(1), S(0)}));
  EXPECT_EQ(DistAttr({ProcessMesh::Range({3}), {-1, -1}, {}}).ToPlacements(), std::vector<Placement>({R}));
}

TEST(DistAttrTest, FromPlacementsErrorsNameThePlacement) {
  const ProcessMesh mesh = ProcessMesh::Range({2, 2}, {"x", "y"});
  EXPECT_THAT(Message(DistAttr::FromPlacements(mesh, 2, {S(0)}).status()),
              HasSubstr("give 1 entries for the 2-d mesh [2,2] [x,y]"));
  EXPECT_THAT(Message(DistAttr::FromPlacements(mesh, 2, {R, S(2)}).status()),
              HasSubstr("placement 1 (Shard(2), mesh dim y): tensor dim 2 is out of range for a rank-2 tensor"));
  EXPECT_THAT(Message(DistAttr::FromPlacements(mesh, 2, {S(-3), R}).status()), HasSubstr("tensor dim -3 is out of range"));
  EXPECT_THAT(Message(DistAttr::FromPlacements(mesh, 2, {S(1), S(1)}).status()),
              HasSubstr("placement 1 (Shard(1), mesh dim y): tensor dim 1 is already sharded by mesh dim 0"));
}

TEST(DistAttrTest, Equality) {
  const ProcessMesh mesh = ProcessMesh::Range({2, 2}, {"x", "y"});
  const DistAttr a{mesh, {0, -1}, {{1, ReduceType::kSum}}};
  EXPECT_EQ(a, (DistAttr{mesh, {0, -1}, {{1, ReduceType::kSum}}}));
  EXPECT_NE(a, (DistAttr{mesh, {0, -1}, {{1, ReduceType::kAvg}}}));
  EXPECT_NE(a, (DistAttr{mesh, {-1, 0}, {{1, ReduceType::kSum}}}));
  EXPECT_NE(a, (DistAttr{ProcessMesh::Range({2, 2}, {"x", "z"}), {0, -1}, {{1, ReduceType::kSum}}}));
  EXPECT_NE(a, (DistAttr{*ProcessMesh::Create({2, 2}, {3, 2, 1, 0}, {"x", "y"}), {0, -1}, {{1, ReduceType::kSum}}}));
}

TEST(DistAttrTest, Printing) {
  const ProcessMesh mesh = ProcessMesh::Range({2, 2}, {"x", "y"});
  EXPECT_EQ((DistAttr{mesh, {0, -1}, {{1, ReduceType::kSum}}}).ToString(),
            "{mesh: [2,2] [x,y], dims_mapping: [0,-1], partial: {1: sum}}");
  EXPECT_EQ((DistAttr{mesh, {-1, 1}, {}}).ToString(), "{mesh: [2,2] [x,y], dims_mapping: [-1,1]}");
  EXPECT_EQ((DistAttr{mesh, {}, {{0, ReduceType::kMax}, {1, ReduceType::kAvg}}}).ToString(),
            "{mesh: [2,2] [x,y], dims_mapping: [], partial: {0: max, 1: avg}}");
  EXPECT_EQ((DistAttr{*ProcessMesh::Create({2}, {4, 5}, {"dp"}), {0}, {}}).ToString(),
            "{mesh: [2] [dp] ids [4,5], dims_mapping: [0]}");
  EXPECT_EQ(DimsMappingToString({1, -1, 0}), "[1,-1,0]");
  EXPECT_EQ(PartialDimsToString({}), "{}");
}

TEST(DistAttrTest, VerifyErrorsNameTheOffendingValue) {
  const ProcessMesh mesh = ProcessMesh::Range({2, 2}, {"x", "y"});
  EXPECT_TRUE((DistAttr{mesh, {0, 1}, {}}).Verify({8, 6}).ok());
  // Wrong mapping length.
  EXPECT_THAT(Message(DistAttr{mesh, {0, -1, -1}, {}}.Verify({8, 6})),
              HasSubstr("dims_mapping [0,-1,-1] has 3 entries for a tensor of shape [8,6] (rank 2)"));
  // Mesh dim out of range, above and below.
  EXPECT_THAT(Message(DistAttr{mesh, {2, -1}, {}}.Verify({8, 6})),
              HasSubstr("dims_mapping entry 0 is mesh dim 2, out of range for mesh [2,2] [x,y] (expected -1 or 0..1)"));
  EXPECT_THAT(Message(DistAttr{mesh, {-1, -2}, {}}.Verify({8, 6})), HasSubstr("entry 1 is mesh dim -2, out of range"));
  // A mesh dim used twice.
  EXPECT_THAT(Message(DistAttr{mesh, {1, 1}, {}}.Verify({8, 6})),
              HasSubstr("mesh dim 1 (y) shards both tensor dim 0 and tensor dim 1"));
  // Sharding and partial on one mesh dim.
  EXPECT_THAT(Message(DistAttr{mesh, {-1, 0}, {{0, ReduceType::kSum}}}.Verify({8, 6})),
              HasSubstr("mesh dim 0 (x) is both sharding tensor dim 1 and partial (sum)"));
  // Partial mesh dim out of range.
  EXPECT_THAT(Message(DistAttr{mesh, {-1, -1}, {{5, ReduceType::kSum}}}.Verify({8, 6})),
              HasSubstr("partial mesh dim 5 is out of range for mesh [2,2] [x,y]"));
  // No mesh at all.
  EXPECT_THAT(Message(DistAttr{}.Verify({})), HasSubstr("has no process mesh"));
  // Every message quotes the whole attribute.
  EXPECT_THAT(Message(DistAttr{mesh, {1, 1}, {}}.Verify({8, 6})),
              HasSubstr("dist attr {mesh: [2,2] [x,y], dims_mapping: [1,1]}: "));
}

TEST(DistAttrTest, UnevenShardsAreAllowedAndLocalShapeUsesCeil) {
  const ProcessMesh mesh = ProcessMesh::Range({4, 3}, {"x", "y"});
  const DistAttr attr{mesh, {0, -1, 1}, {}};
  EXPECT_TRUE(attr.Verify({10, 5, 7}).ok());
  EXPECT_EQ(attr.LocalShape({10, 5, 7}), Shape({3, 5, 3}));  // 10 over 4 → 3; 7 over 3 → 3
  EXPECT_EQ(attr.LocalShape({8, 5, 6}), Shape({2, 5, 2}));
  EXPECT_EQ((DistAttr{mesh, {-1}, {{0, ReduceType::kSum}}}).LocalShape({9}), Shape({9}));  // partial keeps the shape
  EXPECT_EQ((DistAttr{mesh, {1}, {}}).LocalShape({0}), Shape({0}));
}

// ---- ShardTensor and ValidateSpecs --------------------------------------------------------------

TEST(ShardTensorTest, SetsTheAttrAndMarksItAnnotated) {
  Program p;
  Value* w = p.NewValue({{64, 256}, DataType::kFloat32}, ValueRole::kParameter);
  w->set_name("w");
  const ProcessMesh mesh = ProcessMesh::Range({2, 2}, {"dp", "mp"});
  ASSERT_TRUE(ShardTensor(w, mesh, {R, S(1)}).ok());
  ASSERT_TRUE(w->dist_attr().has_value());
  EXPECT_TRUE(w->dist_annotated());
  EXPECT_EQ(w->dist_attr()->ToString(), "{mesh: [2,2] [dp,mp], dims_mapping: [-1,1]}");
}

TEST(ShardTensorTest, ErrorsNameTheValueAndThePlacementAndChangeNothing) {
  Program p;
  Value* w = p.NewValue({{64}, DataType::kFloat32}, ValueRole::kParameter);
  w->set_name("ln.scale");
  const ProcessMesh mesh = ProcessMesh::Range({2, 2}, {"dp", "mp"});
  const absl::Status s = ShardTensor(w, mesh, {R, S(1)});
  EXPECT_THAT(Message(s), HasSubstr("shard_tensor('ln.scale' f32[64], [Replicate(), Shard(1)])"));
  EXPECT_THAT(Message(s), HasSubstr("Shard(1)"));
  EXPECT_THAT(Message(s), HasSubstr("out of range for a rank-1 tensor"));
  EXPECT_FALSE(w->dist_attr().has_value());
  EXPECT_FALSE(w->dist_annotated());
  Value* unnamed = p.NewValue({{4}, DataType::kFloat32}, ValueRole::kActivation);
  EXPECT_THAT(Message(ShardTensor(unnamed, mesh, {R})), HasSubstr("value id 1"));
  EXPECT_THAT(Message(ShardTensor(unnamed, ProcessMesh(), {})), HasSubstr("the process mesh is empty"));
}

TEST(ValidateSpecsTest, NamesTheOperandAndTheProblem) {
  const std::vector<int64_t> mesh = {2, 2};
  EXPECT_TRUE(ValidateSpecs({{{64, 32}, {0, -1}, {}}, {{0}, {}, {}}}, mesh, "input").ok());  // absent optional
  EXPECT_THAT(Message(ValidateSpecs({{{64, 32}, {0, -1}, {}}, {{32, 48}, {0}, {}}}, mesh, "input")),
              HasSubstr("input 1 (shape [32,48]): "));
  EXPECT_THAT(Message(ValidateSpecs({{{64, 32}, {0, 0}, {}}}, mesh, "output")), HasSubstr("output 0"));
  EXPECT_THAT(Message(ValidateSpecs({{{64, 32}, {0, 0}, {}}}, mesh, "output")), HasSubstr("shards both"));
  EXPECT_THAT(Message(ValidateSpecs({{{64, 32}, {3, -1}, {}}}, mesh, "input")), HasSubstr("out of range"));
  EXPECT_THAT(Message(ValidateSpecs({{{64}, {0}, {{0, ReduceType::kSum}}}}, mesh, "input")), HasSubstr("partial"));
  EXPECT_THAT(Message(ValidateSpecs({}, {2, 0}, "input")), HasSubstr("every dim must be >= 1"));
}

}  // namespace
}  // namespace pdist::ir

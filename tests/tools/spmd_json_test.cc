// pdist-spmd's JSON layer: Paddle-style requests in both directions, Partial types, list-valued
// outputs, absent optional inputs, and errors that name the offending field.
#include "tools/spmd_json.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace pdist::tools {
namespace {

using Json = nlohmann::json;
using ::testing::HasSubstr;

Json Eval(const std::string& request) { return EvaluateSpmdRequest(Json::parse(request)); }

std::string Error(const std::string& request) {
  Json response = Eval(request);
  EXPECT_TRUE(response.contains("error")) << response.dump();
  return response.value("error", std::string());
}

TEST(SpmdJsonTest, MatmulForwardShardedContractionGivesPartial) {
  // Paddle's test_matmul_rule: mk[1,0] · kn[-1,-1] → y [0,-1], out [1,-1] Partial{0}.
  Json r = Eval(R"({"op": "matmul", "attrs": {"trans_x": false, "trans_y": false}, "mesh_shape": [2, 2],
                   "direction": "forward",
                   "inputs": [{"shape": [64, 32], "dims_mapping": [1, 0], "partial_dims": []},
                              {"shape": [32, 48], "dims_mapping": [-1, -1], "partial_dims": []}]})");
  EXPECT_EQ(r, Json::parse(R"({"inputs": [{"dims_mapping": [1, 0], "partial_dims": []},
                                          {"dims_mapping": [0, -1], "partial_dims": []}],
                               "outputs": [{"dims_mapping": [1, -1], "partial_dims": [0]}]})"));
}

TEST(SpmdJsonTest, MatmulReverseReadsTheOutputOnly) {
  Json r = Eval(R"({"op": "matmul", "mesh_shape": [2, 2], "direction": "reverse",
                   "inputs": [{"shape": [64, 32], "dims_mapping": [-1, -1]}, {"shape": [32, 48], "dims_mapping": [-1, -1]}],
                   "outputs": [{"shape": [64, 48], "dims_mapping": [1, 0]}]})");
  EXPECT_EQ(r["inputs"], Json::parse(R"([{"dims_mapping": [1, -1], "partial_dims": []},
                                         {"dims_mapping": [-1, 0], "partial_dims": []}])"));
}

TEST(SpmdJsonTest, NonSumPartialIsWrittenWithItsType) {
  Json r = Eval(R"({"op": "mean", "attrs": {"axis": [1]}, "mesh_shape": [2],
                   "inputs": [{"shape": [4, 8], "dims_mapping": [-1, 0]}]})");
  EXPECT_EQ(r["outputs"], Json::parse(R"([{"dims_mapping": [-1], "partial_dims": [{"dim": 0, "type": "avg"}]}])"));
}

TEST(SpmdJsonTest, PartialInputsAreRead) {
  // A Partial x of an elementwise add with a replicated y: the rule decides; the request reads.
  absl::StatusOr<SpmdRequest> r = ParseSpmdRequest(Json::parse(
      R"({"op": "add", "mesh_shape": [2, 2], "inputs": [{"shape": [4], "dims_mapping": [-1], "partial_dims": [0, {"dim": 1, "type": "max"}]},
                                                       {"shape": [4], "dims_mapping": [-1]}]})"));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->inputs[0].partial, (ir::PartialDims{{0, ir::ReduceType::kSum}, {1, ir::ReduceType::kMax}}));
}

TEST(SpmdJsonTest, SplitAnswersItsOutputsAsOneList) {
  Json r = Eval(R"({"op": "split_with_num", "attrs": {"num": 2, "axis": 1}, "mesh_shape": [2],
                   "inputs": [{"shape": [4, 8], "dims_mapping": [0, 0]}]})");
  EXPECT_THAT(r.dump(), HasSubstr("shards both"));  // a bad mapping first: the request is checked
  r = Eval(R"({"op": "split_with_num", "attrs": {"num": 2, "axis": 1}, "mesh_shape": [2],
              "inputs": [{"shape": [4, 8], "dims_mapping": [0, -1]}]})");
  ASSERT_TRUE(r.contains("outputs")) << r.dump();
  ASSERT_EQ(r["outputs"].size(), 1u);
  ASSERT_TRUE(r["outputs"][0].is_array());
  EXPECT_EQ(r["outputs"][0].size(), 2u);
  EXPECT_EQ(r["outputs"][0][1], Json::parse(R"({"dims_mapping": [0, -1], "partial_dims": []})"));
}

TEST(SpmdJsonTest, VariadicInputsComeBackInTheFormTheyWereGiven) {
  const std::string a = R"({"shape": [4, 4], "dims_mapping": [-1, 0]})";
  Json grouped = Eval(R"({"op": "concat", "attrs": {"axis": 0}, "mesh_shape": [2], "inputs": [[)" + a + "," + a + "]]}");
  ASSERT_TRUE(grouped.contains("inputs")) << grouped.dump();
  ASSERT_EQ(grouped["inputs"].size(), 1u);
  EXPECT_EQ(grouped["inputs"][0].size(), 2u);
  Json flat = Eval(R"({"op": "concat", "attrs": {"axis": 0}, "mesh_shape": [2], "inputs": [)" + a + "," + a + "]}");
  EXPECT_EQ(flat["inputs"].size(), 2u);
  EXPECT_EQ(flat["inputs"][0], grouped["inputs"][0][0]);
}

TEST(SpmdJsonTest, AbsentOptionalInputsAsNullOrEmptyShape) {
  const std::string qkv = R"({"shape": [2, 8, 4, 16], "dims_mapping": [0, -1, 1, -1]})";
  for (const std::string& absent : {std::string("null"), std::string(R"({"shape": [0], "dims_mapping": []})")}) {
    Json r = Eval(R"({"op": "flash_attn", "attrs": {"causal": true}, "mesh_shape": [2, 2], "inputs": [)" + qkv + "," +
                  qkv + "," + qkv + "," + absent + "," + absent + "]}");
    ASSERT_TRUE(r.contains("inputs")) << r.dump();
    EXPECT_EQ(r["inputs"][3], Json::parse(R"({"dims_mapping": [], "partial_dims": []})"));
    EXPECT_EQ(r["outputs"].size(), 4u);  // out, softmax, softmax_lse, seed_offset
    EXPECT_EQ(r["outputs"][0]["dims_mapping"], Json::parse("[0, -1, 1, -1]"));
  }
}

TEST(SpmdJsonTest, DescribeAddsTheRuleText) {
  Json r = Eval(R"({"op": "matmul", "mesh_shape": [2], "describe": true,
                   "inputs": [{"shape": [8, 4], "dims_mapping": [-1, -1]}, {"shape": [4, 6], "dims_mapping": [-1, -1]}]})");
  EXPECT_THAT(r.value("rule", ""), HasSubstr("mk,kn->mn"));
}

TEST(SpmdJsonTest, BadInputIsAnErrorNamingIt) {
  const std::string x = R"({"shape": [4, 8], "dims_mapping": [-1, -1]})";
  const std::string y = R"({"shape": [8, 4], "dims_mapping": [-1, -1]})";
  auto matmul = [&](const std::string& first, const std::string& mesh = "[2, 2]") {
    return Error(R"({"op": "matmul", "mesh_shape": )" + mesh + R"(, "inputs": [)" + first + "," + y + "]}");
  };
  EXPECT_THAT(Error(R"({"op": "matmull", "mesh_shape": [2], "inputs": []})"),
              HasSubstr("unknown op type 'matmull' (did you mean matmul?)"));
  EXPECT_THAT(matmul(R"({"shape": [4, 8], "dims_mapping": [0]})"),
              HasSubstr("inputs[0] (x, shape [4,8]): dist attr {mesh: [2,2] [d0,d1], dims_mapping: [0]}: dims_mapping [0] has 1 entries"));
  EXPECT_THAT(matmul(R"({"shape": [4, 8], "dims_mapping": [1, 1]})"),
              HasSubstr("inputs[0] (x, shape [4,8]): dist attr {mesh: [2,2] [d0,d1], dims_mapping: [1,1]}: mesh dim 1 (d1) shards both tensor dim 0 and tensor dim 1"));
  EXPECT_THAT(matmul(R"({"shape": [4, 8], "dims_mapping": [2, -1]})"),
              HasSubstr("dims_mapping entry 0 is mesh dim 2, out of range for mesh [2,2]"));
  EXPECT_THAT(matmul(x, "[]"), HasSubstr("mesh_shape"));
  EXPECT_THAT(matmul(R"({"shape": [4, 8], "dim_mapping": [-1, -1]})"), HasSubstr("inputs[0]: unknown key 'dim_mapping'"));
  EXPECT_THAT(Error(R"({"op": "matmul", "attrs": {"transpose_x": true}, "mesh_shape": [2], "inputs": [)" + x + "," + y + "]}"),
              HasSubstr("op 'matmul' has no attribute 'transpose_x' (known: trans_x, trans_y)"));
  EXPECT_THAT(Error(R"({"op": "matmul", "mesh_shape": [2], "inputs": [)" + x + "]}"), HasSubstr("op 'matmul' takes 2 operands, got 1"));
  EXPECT_THAT(Error(R"({"op": "matmul", "mesh_shape": [2], "direction": "reverse", "inputs": [)" + x + "," + y + "]}"),
              HasSubstr("a reverse request needs \"outputs\""));
  EXPECT_THAT(Error(R"({"op": "matmul", "mesh_shape": [2], "direction": "sideways", "inputs": []})"),
              HasSubstr("direction: 'sideways' is not forward or reverse"));
  EXPECT_THAT(Error(R"({"op": "matmul", "mesh_shape": [2], "inputs": [], "extra": 1})"), HasSubstr("unknown key 'extra'"));
}

// Shapes the op does not take are refused by its shape inference (they got a sharding).
TEST(SpmdJsonTest, ShapesTheOpDoesNotTakeAreRefused) {
  EXPECT_NE(Error(R"({"op": "matmul", "mesh_shape": [2],
                     "inputs": [{"shape": [64, 32], "dims_mapping": [-1, -1]}, {"shape": [31, 48], "dims_mapping": [-1, -1]}]})")
                .find("inputs: the shapes are not ones matmul takes"),
            std::string::npos);
  EXPECT_NE(Error(R"({"op": "relu", "mesh_shape": [2], "direction": "reverse",
                     "inputs": [{"shape": [8, 16], "dims_mapping": [-1, -1]}],
                     "outputs": [{"shape": [9, 16], "dims_mapping": [0, -1]}]})")
                .find("outputs[0]: shape [9,16], but relu of these inputs makes [8,16]"),
            std::string::npos);
  // Integer ids: a dtype the request does not carry, found by trying.
  Json ok = Eval(R"({"op": "embedding", "mesh_shape": [2],
                    "inputs": [{"shape": [4, 8], "dims_mapping": [0, -1]}, {"shape": [100, 16], "dims_mapping": [-1, -1]}]})");
  EXPECT_FALSE(ok.contains("error")) << ok.dump();
}

TEST(SpmdJsonTest, ArraysAnswerEachRequestInOrder) {
  absl::StatusOr<Json> r = EvaluateSpmdText(R"([{"op": "nope", "mesh_shape": [2], "inputs": []},
      {"op": "relu", "mesh_shape": [2], "inputs": [{"shape": [4], "dims_mapping": [0]}]}])");
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->size(), 2u);
  EXPECT_TRUE((*r)[0].contains("error"));
  EXPECT_EQ((*r)[1]["outputs"], Json::parse(R"([{"dims_mapping": [0], "partial_dims": []}])"));
  EXPECT_FALSE(EvaluateSpmdText("{not json").ok());
}

}  // namespace
}  // namespace pdist::tools

// Collective times against hand-computed alpha–beta values on a 2-node DGX A100 (NVLink
// 300 GB/s and 3.4 µs inside a node, 25 GB/s and 9.6 µs between nodes).
#include "planner/comm_cost.h"

#include <gtest/gtest.h>

namespace pdist::planner {
namespace {

strategy::Cluster TwoNodes() { return *strategy::ClusterPreset("dgx-a100", 16); }

TEST(CommCostTest, RingFormulasInsideANode) {
  const strategy::Cluster c = TwoNodes();
  const std::vector<int64_t> node0 = {0, 1, 2, 3, 4, 5, 6, 7};
  // 1 GB all-reduce over 8 GPUs: 14 latencies + 2·7/8 of the bytes at 300 GB/s.
  EXPECT_NEAR(CollectiveSeconds(c, Collective::kAllReduce, 1e9, node0), 14 * 3.4e-6 + 1.75e9 / 300e9, 1e-12);
  EXPECT_NEAR(CollectiveSeconds(c, Collective::kAllGather, 1e9, node0), 7 * 3.4e-6 + 0.875e9 / 300e9, 1e-12);
  EXPECT_NEAR(CollectiveSeconds(c, Collective::kReduceScatter, 1e9, node0), 7 * 3.4e-6 + 0.875e9 / 300e9, 1e-12);
  EXPECT_NEAR(CollectiveSeconds(c, Collective::kBroadcast, 1e9, node0), 7 * 3.4e-6 + 1e9 / 300e9, 1e-12);
  EXPECT_NEAR(CollectiveSeconds(c, Collective::kSendRecv, 1e6, {2, 3}), 3.4e-6 + 1e6 / 300e9, 1e-15);
  EXPECT_EQ(CollectiveSeconds(c, Collective::kAllReduce, 1e9, {5}), 0);
}

TEST(CommCostTest, SmallAllReducesOnManyRanksTakeTheTree) {
  const strategy::Cluster c = *strategy::ClusterPreset("dgx-a100", 1024);
  std::vector<int64_t> all(1024);
  for (int64_t i = 0; i < 1024; ++i) all[i] = i;
  // 1 KB over 1024 ranks: the ring pays 2046 latencies, the tree 20.
  EXPECT_NEAR(CollectiveSeconds(c, Collective::kAllReduce, 1e3, all), 20 * 9.6e-6 + 2 * 1e3 / 25e9, 1e-12);
  // 1 GB: 1023 latencies each way outweigh the ring's 1/1024 saving of bytes: still the tree.
  EXPECT_NEAR(CollectiveSeconds(c, Collective::kAllReduce, 1e9, all), 20 * 9.6e-6 + 2 * 1e9 / 25e9, 1e-12);
  // 1 GB inside a node: the ring's 2·7/8 of the bytes beats the tree's 2 (5.88 ms against 6.69).
  const std::vector<int64_t> node = {0, 1, 2, 3, 4, 5, 6, 7};
  EXPECT_NEAR(CollectiveSeconds(c, Collective::kAllReduce, 1e9, node), 14 * 3.4e-6 + 1.75e9 / 300e9, 1e-12);
}

TEST(CommCostTest, AGroupAcrossNodesGoesAtTheNetworksSpeed) {
  const strategy::Cluster c = TwoNodes();
  EXPECT_EQ(&SlowestLink(c, {0, 7}), &c.intra_node);
  EXPECT_EQ(&SlowestLink(c, {7, 8}), &c.inter_node);
  // Data parallel over the two nodes (device 3 of each): 2 latencies + 1 GB at 25 GB/s.
  EXPECT_NEAR(CollectiveSeconds(c, Collective::kAllReduce, 1e9, {3, 11}), 2 * 9.6e-6 + 1e9 / 25e9, 1e-12);
  // The same bytes inside a node are 12× faster: the bandwidth ratio.
  const double inside = CollectiveSeconds(c, Collective::kAllReduce, 1e9, {3, 4}) - 2 * 3.4e-6;
  const double across = CollectiveSeconds(c, Collective::kAllReduce, 1e9, {3, 11}) - 2 * 9.6e-6;
  EXPECT_NEAR(across / inside, 12.0, 1e-9);
}

}  // namespace
}  // namespace pdist::planner

// Collective times against hand-computed alpha–beta values on a 2-node DGX A100 (NVLink
// 230 GB/s and 3.4 µs inside a node, 23.5 GB/s per GPU and 9.6 µs between nodes: the bus
// bandwidths nccl-tests measures).
#include "planner/comm_cost.h"

#include <gtest/gtest.h>

namespace pdist::planner {
namespace {

strategy::Cluster TwoNodes() { return *strategy::ClusterPreset("dgx-a100", 16); }

TEST(CommCostTest, RingFormulasInsideANode) {
  const strategy::Cluster c = TwoNodes();
  const std::vector<int64_t> node0 = {0, 1, 2, 3, 4, 5, 6, 7};
  // 1 GB all-reduce over 8 GPUs: 14 latencies + 2·7/8 of the bytes at 230 GB/s.
  EXPECT_NEAR(CollectiveSeconds(c, Collective::kAllReduce, 1e9, node0), 14 * 3.4e-6 + 1.75e9 / 230e9, 1e-12);
  EXPECT_NEAR(CollectiveSeconds(c, Collective::kAllGather, 1e9, node0), 7 * 3.4e-6 + 0.875e9 / 230e9, 1e-12);
  EXPECT_NEAR(CollectiveSeconds(c, Collective::kReduceScatter, 1e9, node0), 7 * 3.4e-6 + 0.875e9 / 230e9, 1e-12);
  EXPECT_NEAR(CollectiveSeconds(c, Collective::kBroadcast, 1e9, node0), 7 * 3.4e-6 + 1e9 / 230e9, 1e-12);
  EXPECT_NEAR(CollectiveSeconds(c, Collective::kSendRecv, 1e6, {2, 3}), 3.4e-6 + 1e6 / 230e9, 1e-15);
  EXPECT_EQ(CollectiveSeconds(c, Collective::kAllReduce, 1e9, {5}), 0);
}

TEST(CommCostTest, SmallAllReducesOnManyRanksTakeTheTree) {
  const strategy::Cluster c = *strategy::ClusterPreset("dgx-a100", 1024);
  std::vector<int64_t> all(1024);
  for (int64_t i = 0; i < 1024; ++i) all[i] = i;
  // 1 KB over 1024 ranks: the ring pays 2046 latencies, the tree 20.
  EXPECT_NEAR(CollectiveSeconds(c, Collective::kAllReduce, 1e3, all), 20 * 9.6e-6 + 2 * 1e3 / 188e9, 1e-12);
  // 1 GB: 1023 latencies each way outweigh the ring's 1/1024 saving of bytes: still the tree.
  // Eight GPUs of each node take part: eight NICs at once, 188 GB/s.
  EXPECT_NEAR(CollectiveSeconds(c, Collective::kAllReduce, 1e9, all), 20 * 9.6e-6 + 2 * 1e9 / 188e9, 1e-12);
  // 1 GB inside a node: the ring's 2·7/8 of the bytes beats the tree's 2 (7.66 ms against 8.72).
  const std::vector<int64_t> node = {0, 1, 2, 3, 4, 5, 6, 7};
  EXPECT_NEAR(CollectiveSeconds(c, Collective::kAllReduce, 1e9, node), 14 * 3.4e-6 + 1.75e9 / 230e9, 1e-12);
}

TEST(CommCostTest, AGroupAcrossNodesGoesAtTheNetworksSpeed) {
  const strategy::Cluster c = TwoNodes();
  EXPECT_EQ(&SlowestLink(c, {0, 7}), &c.intra_node);
  EXPECT_EQ(&SlowestLink(c, {7, 8}), &c.inter_node);
  // Data parallel over the two nodes (device 3 of each): 2 latencies + 1 GB at one NIC's 23.5 GB/s.
  EXPECT_NEAR(CollectiveSeconds(c, Collective::kAllReduce, 1e9, {3, 11}), 2 * 9.6e-6 + 1e9 / 23.5e9, 1e-12);
  // The same bytes inside a node are 9.8× faster: the bandwidth ratio.
  const double inside = CollectiveSeconds(c, Collective::kAllReduce, 1e9, {3, 4}) - 2 * 3.4e-6;
  const double across = CollectiveSeconds(c, Collective::kAllReduce, 1e9, {3, 11}) - 2 * 9.6e-6;
  EXPECT_NEAR(across / inside, 230 / 23.5, 1e-9);
  // Two GPUs of each node: two NICs, twice one NIC's rate; all eight: NVLink's rate caps eight NICs.
  EXPECT_DOUBLE_EQ(GroupBandwidth(c, {0, 1, 8, 9}), 47e9);
  EXPECT_DOUBLE_EQ(GroupBandwidth(c, {0, 1, 2, 8, 9}), 47e9);  // the node with the fewest decides
  std::vector<int64_t> all(16);
  for (int64_t i = 0; i < 16; ++i) all[i] = i;
  EXPECT_DOUBLE_EQ(GroupBandwidth(c, all), 188e9);
  EXPECT_NEAR(CollectiveSeconds(c, Collective::kAllReduce, 1e9, all), 30 * 9.6e-6 + 2 * 15.0 / 16 * 1e9 / 188e9, 1e-12);
}

}  // namespace
}  // namespace pdist::planner

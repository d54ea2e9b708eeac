// Alpha–beta times of collectives over the slowest link of their group.
#include "planner/comm_cost.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

namespace pdist::planner {

const strategy::Link& SlowestLink(const strategy::Cluster& cluster, const std::vector<int64_t>& devices) {
  for (int64_t d : devices) {
    if (d / cluster.devices_per_node != devices.front() / cluster.devices_per_node) return cluster.inter_node;
  }
  return cluster.intra_node;
}

double GroupBandwidth(const strategy::Cluster& cluster, const std::vector<int64_t>& devices) {
  const strategy::Link& link = SlowestLink(cluster, devices);
  if (&link == &cluster.intra_node) return link.bandwidth;
  std::map<int64_t, int64_t> per_node;
  for (int64_t d : devices) ++per_node[d / cluster.devices_per_node];
  int64_t fewest = std::numeric_limits<int64_t>::max();
  for (const auto& [node, count] : per_node) fewest = std::min(fewest, count);
  return std::min(cluster.intra_node.bandwidth, static_cast<double>(fewest) * cluster.inter_node.bandwidth);
}

double CollectiveSeconds(const strategy::Cluster& cluster, Collective kind, double bytes,
                         const std::vector<int64_t>& devices) {
  const double n = static_cast<double>(devices.size());
  if (devices.size() < 2) return 0;
  const double alpha = SlowestLink(cluster, devices).latency;
  const double transfer = bytes / GroupBandwidth(cluster, devices);
  switch (kind) {
    case Collective::kAllReduce: {
      const double ring = 2 * (n - 1) * alpha + 2 * (n - 1) / n * transfer;
      const double tree = 2 * std::ceil(std::log2(n)) * alpha + 2 * transfer;
      return std::min(ring, tree);  // NCCL's tuner takes the faster
    }
    case Collective::kAllGather:
    case Collective::kReduceScatter:
    case Collective::kAllToAll: return (n - 1) * alpha + (n - 1) / n * transfer;
    case Collective::kBroadcast: return (n - 1) * alpha + transfer;
    case Collective::kSendRecv: return alpha + transfer;
  }
  return 0;
}

}  // namespace pdist::planner

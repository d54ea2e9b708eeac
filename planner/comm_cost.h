// Communication cost: the time of a collective on a group of devices of a cluster, in the
// alpha–beta form with the ring algorithm's bus-bandwidth factors (those nccl-tests reports):
//
//   all_reduce                      2(n−1)·α + 2(n−1)/n · S / B      ring
//                                   2⌈log₂n⌉·α + 2 · S / B           (double binary) tree, NCCL's
//                                                                    choice for small messages on
//                                                                    many ranks: the faster of the two
//   all_gather, reduce_scatter,     (n−1)·α  +  (n−1)/n · S / B     S: the whole (gathered) tensor
//   all_to_all
//   broadcast                       (n−1)·α  +  S / B               pipelined ring
//   send/recv                       α + S / B
//
// α is that of the slowest link the group crosses: NVLink inside one node, the network once the
// group spans nodes (devices are numbered node by node). B is that link's bus bandwidth — except
// that a group with k devices on each of its nodes crosses the network on k NICs at once (NCCL
// runs one ring per NIC), so B = min(NVLink, k · network per GPU): a data-parallel group of all
// 8 GPUs of each DGX A100 node all-reduces at 8 × 23.5 = 188 GB/s, as nccl-tests measures two
// such nodes, not at one NIC's 23.5. A group of one costs nothing.
#pragma once

#include <cstdint>
#include <vector>

#include "strategy/cluster.h"

namespace pdist::planner {

enum class Collective : int8_t { kAllReduce, kAllGather, kReduceScatter, kAllToAll, kBroadcast, kSendRecv };

// The link a group of devices (global indices) communicates over.
const strategy::Link& SlowestLink(const strategy::Cluster& cluster, const std::vector<int64_t>& devices);
// The group's bus bandwidth: the slowest link's, or k NICs' when it spans nodes with k devices
// on each (the fewest on any of its nodes), at most NVLink's.
double GroupBandwidth(const strategy::Cluster& cluster, const std::vector<int64_t>& devices);

// Seconds for `bytes` over `devices` (for send/recv: the two ends).
double CollectiveSeconds(const strategy::Cluster& cluster, Collective kind, double bytes,
                         const std::vector<int64_t>& devices);

}  // namespace pdist::planner

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
// B and α are those of the slowest link the group crosses: NVLink inside one node, the network
// once the group spans nodes (devices are numbered node by node). A group of one costs nothing.
#pragma once

#include <cstdint>
#include <vector>

#include "strategy/cluster.h"

namespace pdist::planner {

enum class Collective : int8_t { kAllReduce, kAllGather, kReduceScatter, kAllToAll, kBroadcast, kSendRecv };

// The link a group of devices (global indices) communicates over.
const strategy::Link& SlowestLink(const strategy::Cluster& cluster, const std::vector<int64_t>& devices);

// Seconds for `bytes` over `devices` (for send/recv: the two ends).
double CollectiveSeconds(const strategy::Cluster& cluster, Collective kind, double bytes,
                         const std::vector<int64_t>& devices);

}  // namespace pdist::planner

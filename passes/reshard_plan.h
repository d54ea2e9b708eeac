// Reshard planning: how a tensor moves from one DistAttr to another, as a list of primitive
// steps, each along one mesh dim. Partition lowers a plan into collective ops; the cost model
// prices the same plan, so what is priced is what runs.
//
//   x f32[8,16] on [2,2] [dp,mp]:  [Shard(0), Replicate()] → [Replicate(), Shard(1)]
//   PDIST_ASSIGN_OR_RETURN(ReshardPlan plan, PlanReshard(source, target, {8, 16}));
//   plan.ToString()   // "S(0)R → RR → RS(1)"  (all_gather along dp, then a local slice on mp)
//
// The planner never co-shards (one tensor dim over several mesh dims) and never splits
// unevenly: a sharded tensor dim must divide by its mesh dim, or planning fails naming both.
// Between two meshes (pipeline stages): of the same shape, the source first takes the target's
// placements and then every rank sends its piece to the rank at the same coordinate of the
// target; of different shapes, the source replicates, each target rank receives the whole
// tensor from one source rank, and the target then takes its placements:
//   S(0) on [2] ids [0,1] → S(0) on [2] ids [2,3]:   "S(0) → S(0)@[2,3]"  (send/recv)
// Between a mesh and one over the same processes that splits one of its dims in two (hybrid
// sharded data parallelism, ir/dist/remesh.h), the plan runs on whichever mesh both ends can be
// said on, with a free remesh step at its start or its end:
//   P on [4] [dp] → S(0) along dp_shard of [2,2]:   "P → PP@2x2 → PS(0)@2x2 → RS(0)@2x2"
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "absl/status/statusor.h"
#include "ir/dist/dist_attr.h"
#include "ir/types.h"

namespace pdist::passes {

struct ReshardStep {
  enum class Kind : int8_t {
    kAllReduce,      // P → R
    kAllGather,      // S(d) → R
    kReduceScatter,  // P → S(d)
    kAllToAll,       // S(from) → S(d)
    kSlice,          // R → S(d): keep the local piece, no communication
    kMakePartial,    // R → P: one rank of the group keeps the value (sum), or all do (avg, max)
    kSendRecv,       // to another mesh: each target rank receives its piece from one source rank
    kRemesh,         // to a mesh over the same processes that splits (or merges) a dim: no communication
  };
  Kind kind = Kind::kAllReduce;
  int64_t mesh_dim = 0;           // -1 for kSendRecv and kRemesh
  int64_t tensor_dim = -1;       // the axis gathered, sliced, scattered, or (all_to_all) split
  int64_t from_tensor_dim = -1;  // all_to_all: the axis that was sharded and becomes whole
  ir::ReduceType reduce = ir::ReduceType::kSum;
  ir::DistAttr after;            // the distribution once this step is done

  // "all_gather(mesh dim 0, axis 0)"
  std::string ToString() const;
};
const char* ReshardStepName(ReshardStep::Kind kind);

struct ReshardPlan {
  ir::DistAttr source;
  ir::DistAttr target;
  ir::Shape shape;  // global
  std::vector<ReshardStep> steps;

  // The placements after each step, "S(0)R → RR → RS(1)"; a plan without steps prints its
  // source alone; a state on another mesh than the source's is followed by "@[ids]".
  std::string ToString() const;
};

// Compact placements of one DistAttr: "S(0)R", "RP", "RP(avg)".
std::string CompactPlacements(const ir::DistAttr& attr);

// Plans source → target for a tensor of `shape`. InvalidArgument naming the tensor dim and the
// mesh dim when a shard would be uneven.
absl::StatusOr<ReshardPlan> PlanReshard(const ir::DistAttr& source, const ir::DistAttr& target, const ir::Shape& shape);

// Checks that every sharded dim of `attr` divides evenly over its mesh dim (partition's local
// shapes rely on it). `what` names the tensor in the error.
absl::Status CheckEvenShards(const ir::DistAttr& attr, const ir::Shape& shape, const std::string& what);

// Memoises PlanReshard by (source, target, shape): a 96-layer model has thousands of reshards
// but a handful of distinct ones. Thread-safe.
class ReshardPlanCache {
 public:
  absl::StatusOr<ReshardPlan> Get(const ir::DistAttr& source, const ir::DistAttr& target, const ir::Shape& shape);
  size_t size() const;

 private:
  mutable std::mutex mu_;
  std::map<std::tuple<std::string, std::string, ir::Shape>, ReshardPlan> plans_;
};

}  // namespace pdist::passes

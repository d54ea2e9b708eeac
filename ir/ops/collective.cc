// Collective ops: the communication of a partitioned (per-rank, local) program. The partition
// pass lowers each `reshard` of the global program into these, so they never appear in a
// program that completion or autodiff sees: their SPMD rules refuse to run and they have no
// gradient (the backward of a reshard is another reshard, lowered on its own).
//
//   %5 = c_allreduce(%4) {reduce = "sum", ranks = [0, 1]} : f32[8,64]
//   %7 = c_allgather(%6) {axis = 1, ranks = [0, 2]} : f32[8,128]        // %6 : f32[8,64]
//   %9 = c_reduce_scatter(%8) {axis = 0, reduce = "sum", ranks = [0, 1]} : f32[4,64]
//   %b = c_alltoall(%a) {split_axis = 1, concat_axis = 0, ranks = [0, 1]} : f32[8,32]  // %a f32[4,64]
//   %c, %d = c_allreduce_coalesced(%a, %b) {reduce = "sum", ranks = [0, 2]} : f32[64], f32[64,64]
//   c_send(%h) {peer = 2}                  // on rank 0
//   %h2 = c_recv() {dtype = f32, peer = 0, shape = [4,8]} : f32[4,8]   // on rank 2
//
// `ranks` are the group's global ranks in group order; the executor finds the communicator
// through its CommGroups. Pieces are concatenated / split in that order along the axis.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "ir/dist/placement.h"
#include "ir/op_def.h"
#include "ir/ops/op_families.h"
#include "ir/ops/op_helpers.h"
#include "ir/status.h"

namespace pdist::ir {
namespace {

absl::StatusOr<int64_t> GroupSize(const AttributeMap& attrs) {
  PDIST_ASSIGN_OR_RETURN(std::vector<int64_t> ranks, GetIntList(attrs, "ranks"));
  if (ranks.empty()) return absl::InvalidArgumentError("ranks must name at least one rank");
  for (int64_t r : ranks) {
    if (r < 0) return absl::InvalidArgumentError(absl::StrCat("ranks holds a negative rank ", r));
  }
  return static_cast<int64_t>(ranks.size());
}

absl::Status CheckPeer(const AttributeMap& attrs) {
  PDIST_ASSIGN_OR_RETURN(int64_t peer, GetInt(attrs, "peer"));
  if (peer < 0) return absl::InvalidArgumentError(absl::StrCat("peer must be a rank, got ", peer));
  PDIST_ASSIGN_OR_RETURN(int64_t lane, GetInt(attrs, "lane"));
  if (lane < 0) return absl::InvalidArgumentError(absl::StrCat("lane must be 0 or more, got ", lane));
  return absl::OkStatus();
}

absl::Status CheckReduce(const AttributeMap& attrs) {
  PDIST_ASSIGN_OR_RETURN(std::string reduce, GetString(attrs, "reduce"));
  return ParseReduceType(reduce).status();
}

// Shape of x with dim `axis` multiplied (factor > 0) or divided (factor < 0) by the group size.
absl::StatusOr<TensorType> Rescaled(const TensorType& x, const AttributeMap& attrs, const std::string& axis_attr,
                                    bool multiply) {
  PDIST_ASSIGN_OR_RETURN(int64_t n, GroupSize(attrs));
  PDIST_ASSIGN_OR_RETURN(int64_t axis, GetInt(attrs, axis_attr));
  PDIST_ASSIGN_OR_RETURN(axis, ops::NormalizeAxis(axis, static_cast<int64_t>(x.shape.size())));
  TensorType out = x;
  int64_t& dim = out.shape[static_cast<size_t>(axis)];
  if (multiply) {
    dim *= n;
  } else if (dim % n != 0) {
    return absl::InvalidArgumentError(absl::StrCat(axis_attr, " ", axis, " of ", x.ToString(),
                                                   " does not divide over ", n, " ranks"));
  } else {
    dim /= n;
  }
  return out;
}

// Bytes one rank sends (ring algorithms, nccl-tests' bus-bandwidth factors): the planner's
// alpha-beta model refines this with the group's links.
CostFn RingCost(double factor_numerator_offset) {
  return [factor_numerator_offset](const InputTypes& in, const std::vector<TensorType>& out, const AttributeMap& attrs) {
    const double n = static_cast<double>(GroupSize(attrs).value_or(1));
    const double bytes = static_cast<double>(std::max(in[0]->num_bytes(), out[0].num_bytes()));
    return OpCost{0, factor_numerator_offset * (n - 1) / n * bytes};
  };
}

OpDef CollectiveDef(std::string name, CollectiveKind kind, std::vector<AttrSpec> attrs, InferMetaFn meta, CostFn cost,
                    const std::string& description) {
  attrs.push_back({"ranks", std::vector<int64_t>{}});
  OpDef def;
  def.name = std::move(name);
  def.inputs = {{"x"}};
  def.outputs = {{"out"}};
  def.attrs = std::move(attrs);
  def.infer_meta = std::move(meta);
  def.cost = std::move(cost);
  def.communicates = true;
  def.collective = kind;
  ops::MarkLocalOnly(def, description);
  return def;
}

// A gradient bucket: one collective over several tensors of one dtype (a flat buffer), whose
// results `per_member` derives; costs `factor`·(n−1)/n of every member's bytes.
OpDef BucketDef(std::string name, CollectiveKind kind, double factor, InferMetaFn per_member,
                const std::string& description) {
  OpDef def = CollectiveDef(
      std::move(name), kind, {{"reduce", std::string("sum")}},
      [per_member = std::move(per_member)](const InputTypes& in,
                                           const AttributeMap& attrs) -> absl::StatusOr<std::vector<TensorType>> {
        PDIST_RETURN_IF_ERROR(CheckReduce(attrs));
        for (const TensorType* t : in) {
          if (t->dtype != in[0]->dtype) {
            return absl::InvalidArgumentError(absl::StrCat("a bucket holds one dtype: ", in[0]->ToString(), " and ",
                                                           t->ToString()));
          }
        }
        return per_member(in, attrs);
      },
      [factor](const InputTypes& in, const std::vector<TensorType>&, const AttributeMap& attrs) {
        const double n = static_cast<double>(GroupSize(attrs).value_or(1));
        double bytes = 0;
        for (const TensorType* t : in) bytes += static_cast<double>(t->num_bytes());
        return OpCost{0, factor * (n - 1) / n * bytes};
      },
      description);
  def.inputs = {{"x", false, true}};
  def.outputs = {{"out", true}};
  return def;
}

}  // namespace

absl::Status RegisterCollectiveOps(OpRegistry& registry) {
  PDIST_RETURN_IF_ERROR(registry.Register(CollectiveDef(
      "c_allreduce", CollectiveKind::kAllReduce, {{"reduce", std::string("sum")}},
      [](const InputTypes& in, const AttributeMap& attrs) -> absl::StatusOr<std::vector<TensorType>> {
        PDIST_RETURN_IF_ERROR(GroupSize(attrs).status());
        PDIST_RETURN_IF_ERROR(CheckReduce(attrs));
        return std::vector<TensorType>{*in[0]};
      },
      RingCost(2), "local: out = reduce over ranks of x (P→R)")));
  PDIST_RETURN_IF_ERROR(registry.Register(CollectiveDef(
      "c_allgather", CollectiveKind::kAllGather, {{"axis", int64_t{0}}},
      [](const InputTypes& in, const AttributeMap& attrs) -> absl::StatusOr<std::vector<TensorType>> {
        PDIST_ASSIGN_OR_RETURN(TensorType out, Rescaled(*in[0], attrs, "axis", true));
        return std::vector<TensorType>{out};
      },
      RingCost(1), "local: out = concat over ranks of x along axis (S→R)")));
  PDIST_RETURN_IF_ERROR(registry.Register(CollectiveDef(
      "c_reduce_scatter", CollectiveKind::kReduceScatter, {{"axis", int64_t{0}}, {"reduce", std::string("sum")}},
      [](const InputTypes& in, const AttributeMap& attrs) -> absl::StatusOr<std::vector<TensorType>> {
        PDIST_RETURN_IF_ERROR(CheckReduce(attrs));
        PDIST_ASSIGN_OR_RETURN(TensorType out, Rescaled(*in[0], attrs, "axis", false));
        return std::vector<TensorType>{out};
      },
      RingCost(1), "local: out = this rank's piece along axis of the reduce over ranks (P→S)")));
  PDIST_RETURN_IF_ERROR(registry.Register(CollectiveDef(
      "c_alltoall", CollectiveKind::kAllToAll, {{"split_axis", int64_t{0}}, {"concat_axis", int64_t{0}}},
      [](const InputTypes& in, const AttributeMap& attrs) -> absl::StatusOr<std::vector<TensorType>> {
        PDIST_ASSIGN_OR_RETURN(TensorType split, Rescaled(*in[0], attrs, "split_axis", false));
        PDIST_ASSIGN_OR_RETURN(TensorType out, Rescaled(split, attrs, "concat_axis", true));
        return std::vector<TensorType>{out};
      },
      RingCost(1), "local: split x along split_axis, exchange, concat along concat_axis (S(i)→S(j))")));
  // Gradient buckets: one all-reduce over several tensors of one dtype (a flat buffer), made by
  // passes/fuse_allreduce.h from the c_allreduce ops of gradients.
  PDIST_RETURN_IF_ERROR(registry.Register(BucketDef(
      "c_allreduce_coalesced", CollectiveKind::kAllReduce, 2,
      [](const InputTypes& in, const AttributeMap& attrs) -> absl::StatusOr<std::vector<TensorType>> {
        PDIST_RETURN_IF_ERROR(GroupSize(attrs).status());
        std::vector<TensorType> out;
        for (const TensorType* t : in) out.push_back(*t);
        return out;
      },
      "local: out_i = reduce over ranks of x_i, as one flat all-reduce (a gradient bucket)")));
  // ZeRO 2/3 gradient buckets: one reduce-scatter over several tensors of one dtype, each cut
  // along dim 0 (rank r's region of the flat buffer holds piece r of every tensor), made by
  // passes/fuse_allreduce.h from the c_reduce_scatter ops of gradients.
  PDIST_RETURN_IF_ERROR(registry.Register(BucketDef(
      "c_reduce_scatter_coalesced", CollectiveKind::kReduceScatter, 1,
      [](const InputTypes& in, const AttributeMap& attrs) -> absl::StatusOr<std::vector<TensorType>> {
        AttributeMap along0 = attrs;
        along0["axis"] = int64_t{0};
        std::vector<TensorType> out;
        for (const TensorType* t : in) {
          PDIST_ASSIGN_OR_RETURN(TensorType piece, Rescaled(*t, along0, "axis", false));
          out.push_back(piece);
        }
        return out;
      },
      "local: out_i = this rank's piece along dim 0 of the reduce over ranks of x_i, as one flat reduce-scatter")));

  // Point to point between meshes (pipeline stages): `peer` is a global rank. A c_send pairs
  // with the peer's c_recv of the same `tag`, in order. The backends differ past that: the host
  // ones buffer sends and match by tag, NCCL matches a direction's messages in issue order and
  // holds each send until its receive runs; the executor's channel per direction
  // (executor/comm/comm_groups.h) separates an activation from the gradient coming back, and
  // the schedules issue each direction's messages in the same order on both ends (checked on
  // the CPU by the inproc backend's rendezvous sends). That holds for messages between
  // neighbouring virtual stages, and for those of the prologue and the optimizer job, which
  // every rank runs first and last; any other (a value made in a forward job and read in a
  // backward one) is sent in jobs the schedule orders differently on the two ends, so partition
  // gives it a `lane` > 0: a channel of its own for the moves between one pair of jobs, where
  // its messages come one per micro-batch, in micro-batch order on both ends.
  OpDef send = CollectiveDef(
      "c_send", CollectiveKind::kNone, {{"peer", int64_t{0}}, {"tag", int64_t{0}}, {"lane", int64_t{0}}},
      [](const InputTypes&, const AttributeMap& attrs) -> absl::StatusOr<std::vector<TensorType>> {
        PDIST_RETURN_IF_ERROR(CheckPeer(attrs));
        return std::vector<TensorType>{};
      },
      [](const InputTypes& in, const std::vector<TensorType>&, const AttributeMap&) {
        return OpCost{0, static_cast<double>(in[0]->num_bytes())};
      },
      "local: send x to rank `peer`");
  send.attrs.pop_back();  // no group: the world's ranks
  send.outputs = {};
  send.point_to_point = PointToPoint::kSend;
  PDIST_RETURN_IF_ERROR(registry.Register(std::move(send)));
  OpDef recv = CollectiveDef(
      "c_recv", CollectiveKind::kNone, {{"peer", int64_t{0}}, {"shape", std::vector<int64_t>{}}, {"dtype", DataType::kFloat32},
                 {"tag", int64_t{0}}, {"lane", int64_t{0}}},
      [](const InputTypes&, const AttributeMap& attrs) -> absl::StatusOr<std::vector<TensorType>> {
        PDIST_RETURN_IF_ERROR(CheckPeer(attrs));
        PDIST_ASSIGN_OR_RETURN(std::vector<int64_t> shape, GetIntList(attrs, "shape"));
        PDIST_ASSIGN_OR_RETURN(DataType dtype, GetDataType(attrs, "dtype"));
        for (int64_t d : shape) {
          if (d < 0) return absl::InvalidArgumentError(absl::StrCat("c_recv: negative dim in shape ", ShapeToString(shape)));
        }
        return std::vector<TensorType>{{shape, dtype}};
      },
      [](const InputTypes&, const std::vector<TensorType>& out, const AttributeMap&) {
        return OpCost{0, static_cast<double>(out[0].num_bytes())};
      },
      "local: out = what rank `peer` sends");
  recv.attrs.pop_back();
  recv.inputs = {};
  recv.point_to_point = PointToPoint::kRecv;
  return registry.Register(std::move(recv));
}

}  // namespace pdist::ir

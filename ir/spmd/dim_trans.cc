// DimTrans construction for reshapes and sharding inference through it (Paddle's dim_trans.cc).
#include "ir/spmd/dim_trans.h"

#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "ir/status.h"

namespace pdist::ir::spmd {

DimTrans DimTrans::InputDim(int64_t dim) {
  DimTrans t;
  t.kind = Kind::kInputDim;
  t.input_dim = dim;
  return t;
}

DimTrans DimTrans::Singleton() { return DimTrans{}; }

DimTrans DimTrans::Flatten(std::vector<DimTrans> parts) {
  if (parts.empty()) return Singleton();
  if (parts.size() == 1) return std::move(parts[0]);
  DimTrans t;
  t.kind = Kind::kFlatten;
  t.parts = std::move(parts);
  return t;
}

DimTrans DimTrans::Split(DimTrans input, Shape split_shape, int64_t split_id) {
  if (split_shape.size() == 1) return input;
  if (split_shape[static_cast<size_t>(split_id)] == 1) return Singleton();
  DimTrans t;
  t.kind = Kind::kSplit;
  t.parts.push_back(std::move(input));
  t.split_shape = std::move(split_shape);
  t.split_id = split_id;
  return t;
}

std::string DimTrans::ToString() const {
  switch (kind) {
    case Kind::kInputDim:
      return input_dim >= 0 && input_dim < 26 ? std::string(1, static_cast<char>('a' + input_dim))
                                              : absl::StrCat("#", input_dim);
    case Kind::kSingleton:
      return "1";
    case Kind::kFlatten: {
      std::string text = "(";
      for (const DimTrans& p : parts) text += p.ToString();
      return text + ")";
    }
    case Kind::kSplit:
      return absl::StrCat("split(", parts[0].ToString(), ",", ShapeToString(split_shape), ",", split_id, ")");
  }
  return "?";
}

std::string DimTransListToString(const std::vector<DimTrans>& dims) {
  return absl::StrJoin(dims, ",", [](std::string* out, const DimTrans& d) { out->append(d.ToString()); });
}

absl::StatusOr<Shape> InferReshapeTarget(const Shape& src, const Shape& tgt) {
  const auto error = [&](const std::string& why) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot reshape ", ShapeToString(src), " into ", ShapeToString(tgt), ": ", why));
  };
  int64_t src_count = 1;
  for (int64_t d : src) {
    if (d <= 0) return error("dims must be positive");
    src_count *= d;
  }
  Shape out = tgt;
  int64_t known = 1;
  int64_t inferred = -1;
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i] == -1) {
      if (inferred >= 0) return error("more than one -1");
      inferred = static_cast<int64_t>(i);
    } else if (out[i] <= 0) {
      return error("dims must be positive (or one -1)");
    } else {
      known *= out[i];
    }
  }
  if (inferred >= 0) {
    if (src_count % known != 0) return error("the -1 cannot be inferred");
    out[static_cast<size_t>(inferred)] = src_count / known;
  } else if (known != src_count) {
    return error(absl::StrCat(src_count, " elements vs ", known));
  }
  return out;
}

absl::StatusOr<std::vector<DimTrans>> MakeReshapeDimTrans(const Shape& src, const Shape& tgt_in) {
  PDIST_ASSIGN_OR_RETURN(Shape tgt, InferReshapeTarget(src, tgt_in));
  std::vector<DimTrans> result;
  size_t si = 0, ti = 0;
  while (si < src.size() || ti < tgt.size()) {
    std::vector<int64_t> src_dims;
    Shape group;
    int64_t s = 1, t = 1;
    if (si < src.size()) {
      s = src[si];
      src_dims.push_back(static_cast<int64_t>(si++));
    }
    if (ti < tgt.size()) {
      t = tgt[ti];
      group.push_back(tgt[ti++]);
    }
    if (s == 1 && t != 1) {  // a size-1 source dim: step the source only
      --ti;
      group.clear();
    } else if (s != 1 && t == 1) {  // a size-1 target dim: step the target only
      --si;
      src_dims.clear();
    } else {
      while (s != t) {  // equal element counts guarantee both walks stay in range
        if (s < t) {
          s *= src[si];
          src_dims.push_back(static_cast<int64_t>(si++));
        } else {
          t *= tgt[ti];
          group.push_back(tgt[ti++]);
        }
      }
    }
    if (group.empty()) continue;
    std::vector<DimTrans> inputs;
    for (int64_t d : src_dims) {
      if (src[static_cast<size_t>(d)] > 1) inputs.push_back(DimTrans::InputDim(d));
    }
    const DimTrans flat = DimTrans::Flatten(std::move(inputs));
    for (size_t i = 0; i < group.size(); ++i) result.push_back(DimTrans::Split(flat, group, static_cast<int64_t>(i)));
  }
  return result;
}

namespace {

// The walk of Paddle's GetDimTrans: marks unshardable (input dim, mesh dim) pairs and returns
// the input dim whose sharding `t` carries, or -1.
struct ShardingWalk {
  const Shape& shape;
  const DimsMapping& mapping;
  const std::vector<int64_t>& mesh_shape;
  std::vector<std::vector<bool>> shardable;  // [input dim][mesh dim]
  std::set<int64_t> seen;

  bool Sharded(int64_t dim) const {
    return dim >= 0 && static_cast<size_t>(dim) < mapping.size() && mapping[static_cast<size_t>(dim)] >= 0;
  }
  void Forbid(int64_t dim) {
    if (dim >= 0 && static_cast<size_t>(dim) < shardable.size()) shardable[dim].assign(mesh_shape.size(), false);
  }

  int64_t Carried(const DimTrans& t) {
    switch (t.kind) {
      case DimTrans::Kind::kInputDim:
        seen.insert(t.input_dim);
        return Sharded(t.input_dim) ? t.input_dim : -1;
      case DimTrans::Kind::kSingleton:
        return -1;
      case DimTrans::Kind::kFlatten: {
        for (size_t i = 1; i < t.parts.size(); ++i) {
          if (t.parts[i].kind == DimTrans::Kind::kInputDim) Forbid(t.parts[i].input_dim);
          Carried(t.parts[i]);
        }
        const DimTrans& first = t.parts[0];
        const int64_t carried = Carried(first);
        return first.kind == DimTrans::Kind::kInputDim ? carried : -1;
      }
      case DimTrans::Kind::kSplit: {
        const int64_t carried = Carried(t.parts[0]);
        if (t.split_id != 0) return -1;
        if (carried >= 0) {
          const int64_t part = t.split_shape[static_cast<size_t>(t.split_id)];
          for (size_t m = 0; m < mesh_shape.size(); ++m) shardable[carried][m] = part % mesh_shape[m] == 0;
        }
        return carried;
      }
    }
    return -1;
  }
};

}  // namespace

DimTransMappings InferFromDimTrans(const Shape& input_shape, const DimsMapping& input_mapping,
                                   const std::vector<DimTrans>& dims, const std::vector<int64_t>& mesh_shape) {
  const size_t ndim = input_shape.size();
  ShardingWalk walk{input_shape,
                    input_mapping,
                    mesh_shape,
                    std::vector<std::vector<bool>>(ndim, std::vector<bool>(mesh_shape.size(), true)),
                    {}};
  std::vector<int64_t> target_of(ndim, -1);  // input dim → the output dim carrying its sharding
  for (size_t i = 0; i < dims.size(); ++i) {
    const int64_t carried = walk.Carried(dims[i]);
    if (carried >= 0 && static_cast<size_t>(carried) < ndim) target_of[carried] = static_cast<int64_t>(i);
  }
  DimTransMappings out{input_mapping, DimsMapping(dims.size(), -1)};
  for (size_t i = 0; i < ndim && i < input_mapping.size(); ++i) {
    const int64_t mesh_dim = input_mapping[i];
    const bool reaches = mesh_dim >= 0 && static_cast<size_t>(mesh_dim) < mesh_shape.size() &&
                         walk.shardable[i][mesh_dim] && walk.seen.count(static_cast<int64_t>(i)) && target_of[i] >= 0;
    if (reaches) {
      out.output[static_cast<size_t>(target_of[i])] = mesh_dim;
    } else {
      out.input[i] = -1;
    }
  }
  return out;
}

}  // namespace pdist::ir::spmd

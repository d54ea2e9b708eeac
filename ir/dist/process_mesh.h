// ProcessMesh: an N-d grid of process ids with named dims (Paddle's ProcessMesh).
//
//   ProcessMesh mesh = ProcessMesh::Range({2, 2}, {"dp", "mp"});   // ids 0..3, row-major
//   mesh.ToString()            // "[2,2] [dp,mp]"
//   mesh.CoordinateOf(3)       // {1, 1}
//   mesh.SubMesh(0, 1)         // "[2] [mp] ids [2,3]": the row of dp index 1
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace pdist::ir {

class ProcessMesh {
 public:
  // More processes than any cluster has; guards against absurd shapes from user input.
  static constexpr int64_t kMaxProcesses = int64_t{1} << 20;

  ProcessMesh() = default;

  // Validates: at least one dim, every dim >= 1, at most kMaxProcesses processes, ids count =
  // product of shape, ids unique and >= 0, one unique identifier name per dim. Empty
  // `process_ids` give 0..n-1 and empty `dim_names` give d0, d1, ... (so untrusted input —
  // text, JSON, C API — never goes through Range). Errors name the mesh and the offending
  // id or name.
  static absl::StatusOr<ProcessMesh> Create(std::vector<int64_t> shape, std::vector<int64_t> process_ids,
                                            std::vector<std::string> dim_names);
  // Ids 0..n-1 in row-major order; names default to d0, d1, ... For shapes the caller trusts.
  static ProcessMesh Range(std::vector<int64_t> shape, std::vector<std::string> dim_names = {});

  int64_t ndim() const { return static_cast<int64_t>(shape_.size()); }
  int64_t dim_size(int64_t dim) const { return shape_.at(static_cast<size_t>(dim)); }
  int64_t size() const;  // number of processes
  const std::vector<int64_t>& shape() const { return shape_; }
  const std::vector<int64_t>& process_ids() const { return process_ids_; }
  const std::vector<std::string>& dim_names() const { return dim_names_; }
  bool empty() const { return shape_.empty(); }
  // True when the ids are 0..n-1 in order (what Range gives; ToString then omits them).
  bool has_default_ids() const;

  bool Contains(int64_t process_id) const;
  // -1 when there is no dim of that name.
  int64_t DimIndex(const std::string& name) const;
  // Coordinate of `process_id` in the grid; empty when the mesh does not contain it.
  std::vector<int64_t> CoordinateOf(int64_t process_id) const;
  // The processes that differ from `process_id` only along `dims`, in row-major order: the
  // group of a collective over those mesh dims. Empty when the mesh does not contain the id.
  //   [2,2] ids 0..3: GroupAlong({0}, 3) → {1, 3};  GroupAlong({1}, 3) → {2, 3}
  std::vector<int64_t> GroupAlong(const std::vector<int64_t>& dims, int64_t process_id) const;
  // The (ndim-1)-d mesh at `index` along `dim` (a pipeline stage of a [pp, ...] mesh). Needs a
  // mesh of 2 or more dims; errors name the dim, the index and the mesh.
  absl::StatusOr<ProcessMesh> SubMesh(int64_t dim, int64_t index) const;

  // "[2,2] [x,y]"; ids are appended ("ids [4,5,6,7]") only when they are not 0..n-1.
  std::string ToString() const;

  friend bool operator==(const ProcessMesh&, const ProcessMesh&) = default;

 private:
  ProcessMesh(std::vector<int64_t> shape, std::vector<int64_t> ids, std::vector<std::string> names)
      : shape_(std::move(shape)), process_ids_(std::move(ids)), dim_names_(std::move(names)) {}

  std::vector<int64_t> shape_;
  std::vector<int64_t> process_ids_;
  std::vector<std::string> dim_names_;
};

}  // namespace pdist::ir

// ProcessMesh: validation, coordinates, sub-meshes and the printed form.
#include "ir/dist/process_mesh.h"

#include <algorithm>
#include <cctype>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "ir/types.h"

namespace pdist::ir {

namespace {

// Dim names print bare inside `[x,y]` and must lex back as one identifier of the text IR.
bool IsDimName(const std::string& name) {
  if (name.empty() || !(std::isalpha(static_cast<unsigned char>(name[0])) || name[0] == '_')) return false;
  return std::all_of(name.begin(), name.end(),
                     [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; });
}

std::vector<std::string> DefaultDimNames(size_t ndim) {
  std::vector<std::string> names;
  for (size_t i = 0; i < ndim; ++i) names.push_back(absl::StrCat("d", i));
  return names;
}

}  // namespace

absl::StatusOr<ProcessMesh> ProcessMesh::Create(std::vector<int64_t> shape, std::vector<int64_t> process_ids,
                                                std::vector<std::string> dim_names) {
  const std::string what = absl::StrCat("process mesh ", ShapeToString(shape));
  if (shape.empty()) return absl::InvalidArgumentError("a process mesh needs at least one dim");
  int64_t count = 1;
  for (int64_t d : shape) {
    if (d < 1) return absl::InvalidArgumentError(absl::StrCat(what, ": every dim must be >= 1, got ", d));
    if (count > kMaxProcesses / d) {
      return absl::InvalidArgumentError(absl::StrCat(what, " has more than ", kMaxProcesses, " processes"));
    }
    count *= d;
  }
  if (process_ids.empty()) process_ids = Range(shape).process_ids();
  if (static_cast<int64_t>(process_ids.size()) != count) {
    return absl::InvalidArgumentError(absl::StrCat(what, " needs ", count, " process ids, got ", process_ids.size(),
                                                   " [", absl::StrJoin(process_ids, ","), "]"));
  }
  absl::flat_hash_set<int64_t> seen;
  for (int64_t id : process_ids) {
    if (id < 0) return absl::InvalidArgumentError(absl::StrCat(what, ": process id ", id, " is negative"));
    if (id >= kMaxProcesses) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": process id ", id, " is beyond the largest job pdist runs (", kMaxProcesses, " ranks)"));
    }
    if (!seen.insert(id).second) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": process id ", id, " appears twice"));
    }
  }
  if (dim_names.empty()) dim_names = DefaultDimNames(shape.size());
  if (dim_names.size() != shape.size()) {
    return absl::InvalidArgumentError(absl::StrCat(what, " has ", shape.size(), " dims but ", dim_names.size(),
                                                   " dim names [", absl::StrJoin(dim_names, ","), "]"));
  }
  absl::flat_hash_set<std::string> names;
  for (const std::string& name : dim_names) {
    if (!IsDimName(name)) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": dim name '", name, "' is not an identifier ([A-Za-z_][A-Za-z0-9_]*)"));
    }
    if (!names.insert(name).second) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": dim name '", name, "' appears twice"));
    }
  }
  return ProcessMesh(std::move(shape), std::move(process_ids), std::move(dim_names));
}

ProcessMesh ProcessMesh::Range(std::vector<int64_t> shape, std::vector<std::string> dim_names) {
  int64_t count = 1;
  for (int64_t d : shape) count *= d;
  std::vector<int64_t> ids(static_cast<size_t>(std::max<int64_t>(count, 0)));
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int64_t>(i);
  if (dim_names.empty()) dim_names = DefaultDimNames(shape.size());
  return ProcessMesh(std::move(shape), std::move(ids), std::move(dim_names));
}

int64_t ProcessMesh::size() const { return static_cast<int64_t>(process_ids_.size()); }

bool ProcessMesh::has_default_ids() const {
  for (size_t i = 0; i < process_ids_.size(); ++i) {
    if (process_ids_[i] != static_cast<int64_t>(i)) return false;
  }
  return true;
}

bool ProcessMesh::Contains(int64_t process_id) const {
  return std::find(process_ids_.begin(), process_ids_.end(), process_id) != process_ids_.end();
}

int64_t ProcessMesh::DimIndex(const std::string& name) const {
  auto it = std::find(dim_names_.begin(), dim_names_.end(), name);
  return it == dim_names_.end() ? -1 : static_cast<int64_t>(it - dim_names_.begin());
}

std::vector<int64_t> ProcessMesh::CoordinateOf(int64_t process_id) const {
  auto it = std::find(process_ids_.begin(), process_ids_.end(), process_id);
  if (it == process_ids_.end()) return {};
  int64_t flat = it - process_ids_.begin();
  std::vector<int64_t> coord(shape_.size());
  for (size_t i = shape_.size(); i-- > 0;) {  // row-major: the last dim varies fastest
    coord[i] = flat % shape_[i];
    flat /= shape_[i];
  }
  return coord;
}

absl::StatusOr<ProcessMesh> ProcessMesh::SubMesh(int64_t dim, int64_t index) const {
  if (dim < 0 || dim >= ndim()) {
    return absl::InvalidArgumentError(absl::StrCat("SubMesh: dim ", dim, " is out of range for mesh ", ToString()));
  }
  if (ndim() < 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("SubMesh: mesh ", ToString(), " has one dim; a sub-mesh needs a mesh of 2 or more dims"));
  }
  if (index < 0 || index >= shape_[dim]) {
    return absl::InvalidArgumentError(absl::StrCat("SubMesh: index ", index, " is out of range for dim ", dim, " (",
                                                   dim_names_[dim], ", size ", shape_[dim], ") of mesh ", ToString()));
  }
  std::vector<int64_t> shape = shape_;
  std::vector<std::string> names = dim_names_;
  shape.erase(shape.begin() + dim);
  names.erase(names.begin() + dim);
  // Row-major: ids whose coordinate along `dim` is `index`, in order.
  int64_t inner = 1;
  for (size_t i = static_cast<size_t>(dim) + 1; i < shape_.size(); ++i) inner *= shape_[i];
  std::vector<int64_t> ids;
  for (size_t flat = 0; flat < process_ids_.size(); ++flat) {
    if ((static_cast<int64_t>(flat) / inner) % shape_[dim] == index) ids.push_back(process_ids_[flat]);
  }
  return ProcessMesh(std::move(shape), std::move(ids), std::move(names));
}

std::string ProcessMesh::ToString() const {
  if (empty()) return "<empty mesh>";
  std::string text = absl::StrCat(ShapeToString(shape_), " [", absl::StrJoin(dim_names_, ","), "]");
  if (!has_default_ids()) absl::StrAppend(&text, " ids [", absl::StrJoin(process_ids_, ","), "]");
  return text;
}

std::vector<int64_t> ProcessMesh::GroupAlong(const std::vector<int64_t>& dims, int64_t process_id) const {
  const std::vector<int64_t> coord = CoordinateOf(process_id);
  if (coord.empty()) return {};
  // Walk the grid in row-major order, keeping the ids whose fixed coordinates match.
  std::vector<int64_t> members;
  for (size_t linear = 0; linear < process_ids_.size(); ++linear) {
    int64_t rest = static_cast<int64_t>(linear);
    bool same = true;
    for (int64_t d = ndim() - 1; d >= 0; --d) {
      const int64_t c = rest % shape_[static_cast<size_t>(d)];
      rest /= shape_[static_cast<size_t>(d)];
      const bool free = std::find(dims.begin(), dims.end(), d) != dims.end();
      same = same && (free || c == coord[static_cast<size_t>(d)]);
    }
    if (same) members.push_back(process_ids_[linear]);
  }
  return members;
}

}  // namespace pdist::ir

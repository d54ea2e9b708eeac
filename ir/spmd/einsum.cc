// Einsum-notation helpers shared by the SPMD rules: merging axis shardings across tensors.
#include "ir/spmd/einsum.h"

#include <algorithm>

namespace pdist::ir::spmd {

AxisShardings MergeAxisShardings(const std::vector<std::pair<std::string, DimsMapping>>& tensors) {
  AxisShardings merged;
  // Mesh dim → the letters it shards, in the order first recorded (Paddle's dim_to_axis_map).
  std::map<int64_t, std::string> letters_of_mesh_dim;
  for (const auto& [axes, mapping] : tensors) {
    const size_t n = std::min(axes.size(), mapping.size());
    for (size_t i = 0; i < n; ++i) {
      const char letter = axes[i];
      if (letter == '1') continue;
      auto [it, inserted] = merged.emplace(letter, mapping[i]);
      if (!inserted && it->second == -1) it->second = mapping[i];  // -1 yields; a conflict keeps the first
      const int64_t mesh_dim = it->second;
      if (mesh_dim < 0) continue;
      std::string& letters = letters_of_mesh_dim[mesh_dim];
      if (letters.find(letter) == std::string::npos) letters.push_back(letter);
    }
  }
  // One mesh dim on several letters: the first recorded keeps it.
  for (const auto& [mesh_dim, letters] : letters_of_mesh_dim) {
    for (size_t i = 1; i < letters.size(); ++i) merged[letters[i]] = -1;
  }
  return merged;
}

DimsMapping MappingForAxes(const std::string& axes, const AxisShardings& shardings) {
  DimsMapping mapping(axes.size(), -1);
  for (size_t i = 0; i < axes.size(); ++i) {
    if (axes[i] == '1') continue;
    auto it = shardings.find(axes[i]);
    if (it != shardings.end()) mapping[i] = it->second;
  }
  return mapping;
}

PartialDims PartialForMissingAxes(const std::string& out_axes, const AxisShardings& shardings, ReduceType reduce) {
  PartialDims partial;
  for (const auto& [letter, mesh_dim] : shardings) {
    if (mesh_dim < 0 || out_axes.find(letter) != std::string::npos) continue;
    partial[mesh_dim] = reduce;
  }
  return partial;
}

std::string BroadcastAxes(int64_t rank, int64_t max_rank, const std::string& alphabet) {
  if (rank <= 0 || max_rank < rank) return "";
  const auto start = static_cast<size_t>(max_rank - rank);
  if (start >= alphabet.size()) return "";
  return alphabet.substr(start, static_cast<size_t>(rank));
}

DimsMapping Unshard(DimsMapping mapping, const std::vector<int64_t>& dims) {
  for (int64_t d : dims) {
    if (d >= 0 && d < static_cast<int64_t>(mapping.size())) mapping[static_cast<size_t>(d)] = -1;
  }
  return mapping;
}

namespace {

// Elements of one rank's piece of `t` under its current mapping (ceil division).
double LocalNumel(const AxesTensor& t, const std::vector<int64_t>& mesh_shape) {
  double numel = 1;
  for (size_t i = 0; i < t.shape.size(); ++i) {
    int64_t size = t.shape[i];
    const int64_t m = i < t.dims_mapping.size() ? t.dims_mapping[i] : -1;
    if (m >= 0 && m < static_cast<int64_t>(mesh_shape.size())) size = (size + mesh_shape[m] - 1) / mesh_shape[m];
    numel *= static_cast<double>(size);
  }
  return numel;
}

}  // namespace

AxisShardings AlignAxisShardings(const std::vector<AxesTensor>& tensors, const std::vector<int64_t>& mesh_shape,
                                 const std::string& exclude) {
  AxisShardings aligned;
  std::map<char, int64_t> letter_size;
  for (const AxesTensor& t : tensors) {
    for (size_t i = 0; i < t.axes.size() && i < t.shape.size(); ++i) {
      if (t.axes[i] == '1') continue;
      aligned.emplace(t.axes[i], -1);
      letter_size[t.axes[i]] = std::max(letter_size[t.axes[i]], t.shape[i]);
    }
  }
  for (int64_t d = 0; d < static_cast<int64_t>(mesh_shape.size()); ++d) {
    std::string candidates;  // letters sharded on d somewhere, in order of appearance
    for (const AxesTensor& t : tensors) {
      for (size_t i = 0; i < t.axes.size() && i < t.dims_mapping.size(); ++i) {
        const char letter = t.axes[i];
        if (t.dims_mapping[i] != d || letter == '1' || exclude.find(letter) != std::string::npos) continue;
        if (candidates.find(letter) == std::string::npos) candidates.push_back(letter);
      }
    }
    char best = 0;
    double best_cost = 0;
    for (char letter : candidates) {
      if (aligned[letter] != -1 || letter_size[letter] < mesh_shape[d]) continue;
      double cost = 0;
      for (const AxesTensor& t : tensors) {
        const size_t pos = t.axes.find(letter);
        if (pos == std::string::npos) continue;
        if (pos < t.dims_mapping.size() && t.dims_mapping[pos] == d) continue;
        cost += LocalNumel(t, mesh_shape) * static_cast<double>(mesh_shape[d]);
      }
      if (best == 0 || cost < best_cost) {
        best = letter;
        best_cost = cost;
      }
    }
    if (best != 0) aligned[best] = d;
  }
  return aligned;
}

}  // namespace pdist::ir::spmd

// The sin/cos tables of fused_rope on the host, for every backend: given (sin, cos inputs), or
// computed from rotary_emb_base for the positions used; position ids checked against them.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "executor/math/rope.h"
#include "executor/tensor.h"

namespace pdist::exec {

using math::RopeLayout;

// The sin/cos tables [positions, head_dim], given or computed from rotary_emb_base:
// theta(pos, i) = pos * base^(-2i/d) for pair i.
template <typename T>
struct RopeTables {
  std::vector<T> owned_sin, owned_cos;
  const T* sin = nullptr;
  const T* cos = nullptr;
  int64_t positions = 0;
};

// `sin`, `cos` (T-typed) and `position_ids` (i64) are host tensors or null.
template <typename T>
absl::StatusOr<RopeTables<T>> MakeRopeTables(const RopeLayout& l, const Tensor* sin, const Tensor* cos,
                                             const Tensor* position_ids, double base) {
  RopeTables<T> t;
  if (sin != nullptr) {
    t.sin = sin->data<T>();
    t.cos = cos->data<T>();
    t.positions = sin->num_elements() / l.head_dim;
  } else {
    t.positions = l.seq;
    if (position_ids != nullptr) {
      const int64_t* pos = position_ids->data<int64_t>();
      for (int64_t i = 0; i < position_ids->num_elements(); ++i) t.positions = std::max(t.positions, pos[i] + 1);
    }
    t.owned_sin.resize(static_cast<size_t>(t.positions * l.head_dim));
    t.owned_cos.resize(t.owned_sin.size());
    for (int64_t p = 0; p < t.positions; ++p) {
      for (int64_t j = 0; j < l.head_dim; ++j) {
        const int64_t pair = l.adjacent_pairs ? j / 2 : j % (l.head_dim / 2);
        const double theta =
            static_cast<double>(p) * std::pow(base, -2.0 * static_cast<double>(pair) / static_cast<double>(l.head_dim));
        t.owned_sin[static_cast<size_t>(p * l.head_dim + j)] = static_cast<T>(std::sin(theta));
        t.owned_cos[static_cast<size_t>(p * l.head_dim + j)] = static_cast<T>(std::cos(theta));
      }
    }
    t.sin = t.owned_sin.data();
    t.cos = t.owned_cos.data();
  }
  if (position_ids != nullptr) {
    const int64_t* pos = position_ids->data<int64_t>();
    for (int64_t i = 0; i < position_ids->num_elements(); ++i) {
      if (pos[i] < 0 || pos[i] >= t.positions) {
        return absl::InvalidArgumentError(absl::StrCat("position id ", pos[i], " at flat index ", i,
                                                       " is out of range for ", t.positions, " sin/cos positions"));
      }
    }
  }
  return t;
}

}  // namespace pdist::exec

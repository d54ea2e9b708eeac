// CPU kernels of sum, mean, max, min, their gradients, and full.
//
// Every reduction walks x as rows (see ReduceLayout); each output element is accumulated by one
// thread in a fixed order that depends on the shape only, so results do not change with the
// number of threads. float32 sums accumulate in double, so that a sum split into parts (across
// ranks) agrees with the serial sum up to the float32 rounding of the parts.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "executor/cpu/cpu_common.h"
#include "executor/cpu/cpu_kernels.h"
#include "executor/dtype_dispatch.h"
#include "executor/kernel.h"
#include "ir/ops/reduction.h"
#include "ir/status.h"

namespace pdist::exec::cpu {
namespace {

using ir::NumElements;

// Columns per task when rows are kept: a strip of accumulators that stays in L1. Narrower strips
// (down to kMinColumnBlock) when there are fewer groups than threads, so that a reduction over
// the leading axis still spreads across threads; a column's result does not depend on its strip.
constexpr int64_t kColumnBlock = 1024;
constexpr int64_t kMinColumnBlock = 64;
// Elements of x per thread below which threads do not pay.
constexpr int64_t kGrainElements = 16384;

// x seen by a reduction, after dropping size-1 dims and merging neighbouring dims that are both
// reduced or both kept. x is a set of contiguous rows of `row_len` elements: row r of group o
// starts at GroupOffset(o) + row_offsets[r]. A group enumerates the kept dims before the last
// dim; rows enumerate the reduced dims before it, in row-major order (the summation order).
// If the last dim is kept (row_kept), element j of a row belongs to output o·row_len + j;
// otherwise the whole row belongs to output o.
struct ReduceLayout {
  bool row_kept = true;
  int64_t row_len = 1;
  int64_t groups = 1;
  std::vector<int64_t> group_dims, group_strides;
  std::vector<int64_t> row_offsets = {0};
  int64_t count = 1;  // elements of x reduced into each output element

  int64_t GroupOffset(int64_t o) const {
    int64_t offset = 0;
    for (size_t d = group_dims.size(); d-- > 0;) {
      offset += (o % group_dims[d]) * group_strides[d];
      o /= group_dims[d];
    }
    return offset;
  }
};

ReduceLayout MakeLayout(const Shape& x, const std::vector<bool>& reduced) {
  std::vector<int64_t> sizes;
  std::vector<bool> is_reduced;
  for (size_t i = 0; i < x.size(); ++i) {
    if (x[i] == 1) continue;
    if (!sizes.empty() && is_reduced.back() == reduced[i]) {
      sizes.back() *= x[i];
    } else {
      sizes.push_back(x[i]);
      is_reduced.push_back(reduced[i]);
    }
  }
  ReduceLayout l;
  if (sizes.empty()) return l;  // a single element
  const std::vector<int64_t> strides = Strides(sizes);
  const size_t last = sizes.size() - 1;
  l.row_kept = !is_reduced[last];
  l.row_len = sizes[last];
  if (!l.row_kept) l.count = sizes[last];
  std::vector<int64_t> row_dims, row_strides;
  for (size_t d = 0; d < last; ++d) {
    if (is_reduced[d]) {
      row_dims.push_back(sizes[d]);
      row_strides.push_back(strides[d]);
      l.count *= sizes[d];
    } else {
      l.group_dims.push_back(sizes[d]);
      l.group_strides.push_back(strides[d]);
      l.groups *= sizes[d];
    }
  }
  // Row offsets by an odometer over the reduced dims.
  const int64_t rows = NumElements(row_dims);
  l.row_offsets.assign(static_cast<size_t>(rows), 0);
  std::vector<int64_t> index(row_dims.size(), 0);
  for (int64_t r = 1; r < rows; ++r) {
    int64_t offset = l.row_offsets[r - 1];
    for (size_t d = row_dims.size(); d-- > 0;) {
      offset += row_strides[d];
      if (++index[d] < row_dims[d]) break;
      offset -= row_strides[d] * row_dims[d];
      index[d] = 0;
    }
    l.row_offsets[r] = offset;
  }
  return l;
}

// Calls fn(group, first_column, end_column) over disjoint tasks that cover every output element
// once, in parallel. Without kept rows a task is one whole group (columns [0, row_len)).
template <typename Fn>
void ForEachTask(const ReduceLayout& l, Fn fn) {
  int64_t block = l.row_len;
  if (l.row_kept) {
    const int64_t splits = (MaxThreads() + l.groups - 1) / l.groups;  // strips wanted per group
    block = std::clamp((l.row_len + splits - 1) / splits, kMinColumnBlock, kColumnBlock);
  }
  const int64_t blocks = (l.row_len + block - 1) / block;
  const int64_t elements_per_task =
      std::max<int64_t>(1, static_cast<int64_t>(l.row_offsets.size()) * std::min(block, l.row_len));
  ParallelFor(l.groups * blocks, std::max<int64_t>(1, kGrainElements / elements_per_task),
              [&](int64_t begin, int64_t end) {
                for (int64_t t = begin; t < end; ++t) {
                  const int64_t c0 = (t % blocks) * block;
                  fn(t / blocks, c0, std::min(l.row_len, c0 + block));
                }
              });
}

// Reducers: an accumulator type, its identity, and how an element joins it.
template <typename T>
struct SumReducer {
  using Acc = double;
  static Acc Init() { return 0; }
  static Acc Join(Acc a, Acc x) { return a + x; }
  static T Finish(Acc a, int64_t) { return static_cast<T>(a); }
};
template <typename T>
struct MeanReducer : SumReducer<T> {
  static T Finish(double a, int64_t count) { return static_cast<T>(a / static_cast<double>(count)); }
};
// max and min propagate NaN: a NaN element makes the result NaN.
template <typename T>
struct MaxReducer {
  using Acc = T;
  static Acc Init() { return -std::numeric_limits<T>::infinity(); }
  static Acc Join(Acc a, Acc x) { return (x > a) | (x != x) ? x : a; }
  static T Finish(Acc a, int64_t) { return a; }
};
template <typename T>
struct MinReducer {
  using Acc = T;
  static Acc Init() { return std::numeric_limits<T>::infinity(); }
  static Acc Join(Acc a, Acc x) { return (x < a) | (x != x) ? x : a; }
  static T Finish(Acc a, int64_t) { return a; }
};

// Independent accumulators of a contiguous row: enough to hide the add (or compare) latency of
// the vector units; the row is folded into them and they are combined in a fixed tree.
constexpr int kLanes = 32;

template <typename R, typename T>
typename R::Acc ReduceRow(const T* p, int64_t n) {
  using Acc = typename R::Acc;
  Acc lanes[kLanes];
  for (Acc& a : lanes) a = R::Init();
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int l = 0; l < kLanes; ++l) lanes[l] = R::Join(lanes[l], static_cast<Acc>(p[i + l]));
  }
  for (int l = 0; i < n; ++i, ++l) lanes[l] = R::Join(lanes[l], static_cast<Acc>(p[i]));
  for (int width = kLanes / 2; width > 0; width /= 2) {
    for (int l = 0; l < width; ++l) lanes[l] = R::Join(lanes[l], lanes[l + width]);
  }
  return lanes[0];
}

template <typename R, typename T>
void Reduce(const ReduceLayout& l, const T* x, T* out) {
  using Acc = typename R::Acc;
  ForEachTask(l, [&](int64_t o, int64_t c0, int64_t c1) {
    const T* base = x + l.GroupOffset(o);
    if (!l.row_kept) {
      Acc acc = R::Init();
      for (int64_t r : l.row_offsets) acc = R::Join(acc, ReduceRow<R>(base + r, l.row_len));
      out[o] = R::Finish(acc, l.count);
      return;
    }
    Acc acc[kColumnBlock];
    const int64_t n = c1 - c0;
    for (int64_t j = 0; j < n; ++j) acc[j] = R::Init();
    for (int64_t r : l.row_offsets) {
      const T* row = base + r + c0;
      for (int64_t j = 0; j < n; ++j) acc[j] = R::Join(acc[j], static_cast<Acc>(row[j]));
    }
    for (int64_t j = 0; j < n; ++j) out[o * l.row_len + c0 + j] = R::Finish(acc[j], l.count);
  });
}

// x_grad = out_grad broadcast back over the reduced axes, divided by `divisor` (1 for sum, the
// reduced count for mean).
template <typename T>
void BroadcastBack(const ReduceLayout& l, const T* g, double divisor, T* dx) {
  ForEachTask(l, [&](int64_t o, int64_t c0, int64_t c1) {
    T* base = dx + l.GroupOffset(o);
    for (int64_t r : l.row_offsets) {
      if (!l.row_kept) {
        std::fill(base + r, base + r + l.row_len, static_cast<T>(g[o] / divisor));
        continue;
      }
      const T* gi = g + o * l.row_len;
      for (int64_t j = c0; j < c1; ++j) base[r + j] = static_cast<T>(gi[j] / divisor);
    }
  });
}

// max_grad / min_grad: out_grad is split evenly among the elements equal to the extreme.
template <typename T>
void ExtremeGrad(const ReduceLayout& l, const T* x, const T* out, const T* g, T* dx) {
  ForEachTask(l, [&](int64_t o, int64_t c0, int64_t c1) {
    const int64_t offset = l.GroupOffset(o);
    const T* xb = x + offset;
    T* db = dx + offset;
    if (!l.row_kept) {
      int64_t ties = 0;
      for (int64_t r : l.row_offsets) {
        for (int64_t j = 0; j < l.row_len; ++j) ties += xb[r + j] == out[o];
      }
      const T share = ties > 0 ? g[o] / static_cast<T>(ties) : T(0);
      for (int64_t r : l.row_offsets) {
        for (int64_t j = 0; j < l.row_len; ++j) db[r + j] = xb[r + j] == out[o] ? share : T(0);
      }
      return;
    }
    const T* oi = out + o * l.row_len;
    const T* gi = g + o * l.row_len;
    int64_t ties[kColumnBlock] = {};
    for (int64_t r : l.row_offsets) {
      for (int64_t j = c0; j < c1; ++j) ties[j - c0] += xb[r + j] == oi[j];
    }
    for (int64_t r : l.row_offsets) {
      for (int64_t j = c0; j < c1; ++j) {
        db[r + j] = xb[r + j] == oi[j] ? gi[j] / static_cast<T>(ties[j - c0]) : T(0);
      }
    }
  });
}

// The reduction over the op's axes of a tensor shaped `x` (the reduced operand's shape).
absl::StatusOr<ReduceLayout> LayoutOf(const KernelContext& ctx, const Shape& x) {
  PDIST_ASSIGN_OR_RETURN(std::vector<int64_t> axis, ir::GetIntList(ctx.attrs(), "axis"));
  PDIST_ASSIGN_OR_RETURN(std::vector<bool> reduced, ir::ops::ReducedAxes(static_cast<int64_t>(x.size()), axis));
  return MakeLayout(x, reduced);
}

template <template <typename> class R>
KernelFn ReduceKernel() {
  return [](KernelContext& ctx) -> absl::Status {
    const Tensor& x = *ctx.input(0);
    PDIST_ASSIGN_OR_RETURN(ReduceLayout l, LayoutOf(ctx, x.shape()));
    Tensor& out = ctx.AllocateOutput(0);
    PDIST_DISPATCH_FLOAT(x.dtype(), T, {
      if (x.num_elements() == 0) {
        // An empty reduction: the identity (sum 0, mean NaN, max -inf, min +inf).
        std::fill(out.data<T>(), out.data<T>() + out.num_elements(), R<T>::Finish(R<T>::Init(), 0));
      } else {
        Reduce<R<T>>(l, x.data<T>(), out.data<T>());
      }
    });
    return absl::OkStatus();
  };
}

// sum_grad(x, out_grad) and mean_grad(x, out_grad). x is there for its type alone
// (ir::OpDef::type_only_operands: the kernel gets no tensor): x_grad has it.
KernelFn BroadcastGradKernel(bool mean) {
  return [mean](KernelContext& ctx) -> absl::Status {
    PDIST_ASSIGN_OR_RETURN(ReduceLayout l, LayoutOf(ctx, ctx.output_type(0).shape));
    Tensor& dx = ctx.AllocateOutput(0);
    if (dx.num_elements() == 0) return absl::OkStatus();
    const double divisor = mean ? static_cast<double>(l.count) : 1.0;
    PDIST_DISPATCH_FLOAT(dx.dtype(), T, { BroadcastBack<T>(l, ctx.input(1)->data<T>(), divisor, dx.data<T>()); });
    return absl::OkStatus();
  };
}

// max_grad(x, out, out_grad) and min_grad(x, out, out_grad).
absl::Status ExtremeGradKernel(KernelContext& ctx) {
  PDIST_ASSIGN_OR_RETURN(ReduceLayout l, LayoutOf(ctx, ctx.input(0)->shape()));
  Tensor& dx = ctx.AllocateOutput(0);
  if (dx.num_elements() == 0) return absl::OkStatus();
  PDIST_DISPATCH_FLOAT(dx.dtype(), T, {
    ExtremeGrad<T>(l, ctx.input(0)->data<T>(), ctx.input(1)->data<T>(), ctx.input(2)->data<T>(), dx.data<T>());
  });
  return absl::OkStatus();
}

absl::Status FullKernel(KernelContext& ctx) {
  PDIST_ASSIGN_OR_RETURN(double value, ir::GetDouble(ctx.attrs(), "value"));
  Tensor& out = ctx.AllocateOutput(0);
  PDIST_DISPATCH_ALL(out.dtype(), T, {
    const T v = static_cast<T>(value);
    T* p = out.data<T>();
    ParallelFor(out.num_elements(), 1 << 16, [&](int64_t begin, int64_t end) { std::fill(p + begin, p + end, v); });
  });
  return absl::OkStatus();
}

}  // namespace

void RegisterReductionKernels(KernelRegistry& registry) {
  registry.Register(DeviceType::kCPU, "sum", ReduceKernel<SumReducer>());
  registry.Register(DeviceType::kCPU, "mean", ReduceKernel<MeanReducer>());
  registry.Register(DeviceType::kCPU, "max", ReduceKernel<MaxReducer>());
  registry.Register(DeviceType::kCPU, "min", ReduceKernel<MinReducer>());
  registry.Register(DeviceType::kCPU, "sum_grad", BroadcastGradKernel(false));
  registry.Register(DeviceType::kCPU, "mean_grad", BroadcastGradKernel(true));
  registry.Register(DeviceType::kCPU, "max_grad", ExtremeGradKernel);
  registry.Register(DeviceType::kCPU, "min_grad", ExtremeGradKernel);
  registry.Register(DeviceType::kCPU, "full", FullKernel);
}

}  // namespace pdist::exec::cpu

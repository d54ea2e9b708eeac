// CPU kernels of the elementwise binary family: broadcast arithmetic, comparisons, and gradient
// ops that sum over broadcast dims.
//
// One loop serves every case. StridedLoop walks the output in row-major order with a stride per
// input (0 along broadcast dims) after merging dims that are contiguous for every operand, so a
// same-shape op is one flat run, a scalar operand is a run with stride 0, and [m,n] + [n] is m
// runs of n. Each run picks, per operand, a contiguous or a splatted-scalar access with its own
// compiled loop, which the compiler vectorises.
//
// Determinism: work is split over output elements only (cpu::ParallelFor), and every summed
// gradient element adds its terms in the same row-major order whatever the thread count.
#include <algorithm>
#include <array>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "executor/cpu/cpu_common.h"
#include "executor/cpu/cpu_kernels.h"
#include "executor/dtype_dispatch.h"
#include "executor/kernel.h"
#include "executor/strides.h"
#include "executor/math/arithmetic.h"
#include "ir/status.h"

namespace pdist::exec::cpu {
namespace {

constexpr int64_t kGrain = 32768;  // elements per thread before a loop is split

using Dims = absl::InlinedVector<int64_t, 6>;

// A row-major walk over a shape carrying one element offset per operand.
template <size_t N>
class StridedLoop {
 public:
  using Offsets = std::array<int64_t, N>;

  // Drops size-1 dims and merges each dim into the previous one when that is contiguous with it
  // for every operand (stride[d-1] == stride[d] * shape[d]).
  static StridedLoop Make(const Shape& shape, const std::array<std::vector<int64_t>, N>& strides) {
    StridedLoop loop;
    for (size_t d = 0; d < shape.size(); ++d) {
      if (shape[d] == 1) continue;
      bool merge = !loop.dims_.empty();
      for (size_t k = 0; k < N && merge; ++k) merge = loop.strides_[k].back() == strides[k][d] * shape[d];
      if (merge) {
        loop.dims_.back() *= shape[d];
        for (size_t k = 0; k < N; ++k) loop.strides_[k].back() = strides[k][d];
      } else {
        loop.dims_.push_back(shape[d]);
        for (size_t k = 0; k < N; ++k) loop.strides_[k].push_back(strides[k][d]);
      }
    }
    return loop;
  }

  int64_t size() const {
    int64_t n = 1;
    for (int64_t d : dims_) n *= d;
    return n;
  }
  // Length of the innermost run and operand k's stride along it (1 and 0 for a scalar walk).
  int64_t inner_size() const { return dims_.empty() ? 1 : dims_.back(); }
  int64_t inner_stride(size_t k) const { return dims_.empty() ? 0 : strides_[k].back(); }

  // Calls fn(flat, offsets, inner_strides, count) for each piece of an innermost run inside the
  // row-major index range [begin, end); `flat` is the piece's first row-major index.
  template <typename Fn>
  void ForEachRun(int64_t begin, int64_t end, Fn&& fn) const {
    if (begin >= end) return;
    const size_t rank = dims_.size();
    Offsets inner{};
    for (size_t k = 0; k < N; ++k) inner[k] = inner_stride(k);
    if (rank == 0) {
      fn(begin, Offsets{}, inner, end - begin);
      return;
    }
    // Position of `begin`: idx over the outer dims, pos along the innermost one.
    Dims idx(rank, 0);
    for (int64_t rest = begin, d = static_cast<int64_t>(rank) - 1; d >= 0; --d) {
      idx[d] = rest % dims_[d];
      rest /= dims_[d];
    }
    Offsets row{};  // offsets of (idx[0], ..., idx[rank-2], 0)
    for (size_t d = 0; d + 1 < rank; ++d) {
      for (size_t k = 0; k < N; ++k) row[k] += idx[d] * strides_[k][d];
    }
    int64_t pos = idx[rank - 1];
    for (int64_t flat = begin; flat < end;) {
      const int64_t count = std::min(dims_.back() - pos, end - flat);
      Offsets at;
      for (size_t k = 0; k < N; ++k) at[k] = row[k] + pos * inner[k];
      fn(flat, at, inner, count);
      flat += count;
      pos = 0;
      for (size_t d = rank - 1; d-- > 0;) {  // odometer carry over the outer dims
        for (size_t k = 0; k < N; ++k) row[k] += strides_[k][d];
        if (++idx[d] < dims_[d]) break;
        for (size_t k = 0; k < N; ++k) row[k] -= idx[d] * strides_[k][d];
        idx[d] = 0;
      }
    }
  }

 private:
  Dims dims_;
  std::array<Dims, N> strides_;
};

// How one operand is read within a run: contiguous, or one broadcast value.
template <typename T>
struct Contiguous {
  const T* p;
  T operator[](int64_t i) const { return p[i]; }
};
template <typename T>
struct Splat {
  T v;
  T operator[](int64_t) const { return v; }
};

// out[i] = f(a[i]...) for i < n, once every operand's access is resolved to a type.
template <typename R, typename F, typename... A>
void RunLoop(R* out, int64_t n, const F& f, std::tuple<A...> resolved) {
  std::apply([&](const A&... a) {
    for (int64_t i = 0; i < n; ++i) out[i] = f(a[i]...);
  }, resolved);
}
// Resolves the next operand (pointer, inner stride): stride 1 reads contiguously, stride 0 is a
// broadcast scalar. The innermost stride of a broadcast operand is always one of the two.
template <typename R, typename F, typename... A, typename T, typename... Rest>
void RunLoop(R* out, int64_t n, const F& f, std::tuple<A...> resolved, std::pair<const T*, int64_t> next,
             Rest... rest) {
  if (next.second == 0) {
    RunLoop(out, n, f, std::tuple_cat(resolved, std::make_tuple(Splat<T>{*next.first})), rest...);
  } else {
    RunLoop(out, n, f, std::tuple_cat(resolved, std::make_tuple(Contiguous<T>{next.first})), rest...);
  }
}

// out = f(in...) elementwise, each input broadcast numpy-style to out; input k's elements are of
// type Ts[k] (where's bool condition beside its float operands).
template <typename R, typename... Ts, typename F, typename... In>
void BroadcastMapOf(Tensor& out, const F& f, const In&... in) {
  constexpr size_t N = sizeof...(In);
  static_assert(sizeof...(Ts) == N, "one element type per input");
  const Shape& shape = out.shape();
  const auto loop = StridedLoop<N>::Make(shape, {BroadcastStrides(in.shape(), shape)...});
  const std::tuple<const Ts*...> base = {in.template data<Ts>()...};
  R* dst = out.data<R>();
  ParallelFor(loop.size(), kGrain, [&](int64_t begin, int64_t end) {
    loop.ForEachRun(begin, end, [&](int64_t flat, const auto& at, const auto& inner, int64_t n) {
      [&]<size_t... I>(std::index_sequence<I...>) {
        RunLoop(dst + flat, n, f, std::tuple<>(), std::make_pair(std::get<I>(base) + at[I], inner[I])...);
      }(std::make_index_sequence<N>{});
    });
  });
}

// The same with every input of element type T.
template <typename R, typename T, typename F, typename... In>
void BroadcastMap(Tensor& out, const F& f, const In&... in) {
  BroadcastMapOf<R, std::conditional_t<true, T, In>...>(out, f, in...);
}

// result (shape `to`) = `full` (shape `from`) summed over the dims along which `to` broadcasts.
// Threads split the result elements; each element sums its terms in row-major order.
template <typename T>
void ReduceToShape(const T* full, const Shape& from, const Shape& to, T* result) {
  const std::vector<int64_t> strides = Strides(from);
  const std::vector<int64_t> to_strides = BroadcastStrides(to, from);
  Shape kept(from.size(), 1), reduced(from.size(), 1);
  for (size_t d = 0; d < from.size(); ++d) (to_strides[d] == 0 ? reduced : kept)[d] = from[d];
  const auto kept_loop = StridedLoop<1>::Make(kept, {strides});  // row-major index == result index
  const auto reduced_loop = StridedLoop<1>::Make(reduced, {strides});
  const int64_t terms = reduced_loop.size();  // 0 only when `from` has a zero-sized dim
  // Bias-like sums ([m,n] → [n]) add whole contiguous rows of `full` into the result: vectorised.
  // Otherwise (row sums, reductions to a scalar) each element sums its terms in one inner loop.
  const bool add_rows = kept_loop.inner_stride(0) == 1 && kept_loop.inner_size() >= 16;
  const int64_t grain = std::max<int64_t>(1, kGrain / std::max<int64_t>(terms, 1));
  ParallelFor(kept_loop.size(), grain, [&](int64_t begin, int64_t end) {
    if (add_rows) {
      std::fill(result + begin, result + end, T(0));
      reduced_loop.ForEachRun(0, terms, [&](int64_t, const auto& at, const auto& inner, int64_t n) {
        for (int64_t r = 0; r < n; ++r) {
          const T* row = full + at[0] + r * inner[0];
          kept_loop.ForEachRun(begin, end, [&](int64_t flat, const auto& kat, const auto&, int64_t count) {
            for (int64_t j = 0; j < count; ++j) result[flat + j] += row[kat[0] + j];
          });
        }
      });
      return;
    }
    kept_loop.ForEachRun(begin, end, [&](int64_t flat, const auto& kat, const auto& kinner, int64_t count) {
      for (int64_t j = 0; j < count; ++j) {
        const T* first = full + kat[0] + j * kinner[0];
        T sum = 0;
        reduced_loop.ForEachRun(0, terms, [&](int64_t, const auto& at, const auto& inner, int64_t n) {
          for (int64_t r = 0; r < n; ++r) sum += first[at[0] + r * inner[0]];
        });
        result[flat + j] = sum;
      }
    });
  });
}

// One operand's gradient: d(x, y, out_grad) over out's shape, summed back to the operand's
// shape when the operand was broadcast.
template <typename T, typename D>
void OperandGrad(const Tensor& x, const Tensor& y, const Tensor& out_grad, const D& d, Tensor& grad) {
  if (grad.num_elements() == out_grad.num_elements()) {  // same layout; at most size-1 dims differ
    Tensor view = grad.Reshaped(out_grad.shape());
    BroadcastMap<T, T>(view, d, x, y, out_grad);
    return;
  }
  Tensor full = Tensor::Empty(out_grad.type());
  BroadcastMap<T, T>(full, d, x, y, out_grad);
  ReduceToShape(full.data<T>(), out_grad.shape(), grad.shape(), grad.data<T>());
}

template <typename Op>
absl::Status ArithmeticKernel(KernelContext& ctx) {
  const Tensor& x = *ctx.input(0);
  const Tensor& y = *ctx.input(1);
  Tensor& out = ctx.AllocateOutput(0);
  PDIST_DISPATCH_FLOAT(x.dtype(), T, { BroadcastMap<T, T>(out, [](T a, T b) { return Op::F(a, b); }, x, y); });
  return absl::OkStatus();
}

// add_grad and subtract_grad get no x and y (ir::OpDef::type_only_operands; their derivatives
// do not read them): out_grad, of the broadcast shape, stands in, and the outputs' types give the
// shapes to sum back to. Where a gradient is out_grad itself (ir::OpDef::aliases_if_same_type:
// an operand of add that was not broadcast) it is handed back, not copied.
template <typename Op>
absl::Status ArithmeticGradKernel(KernelContext& ctx) {
  const Tensor& out_grad = *ctx.input(2);
  const Tensor& x = ctx.input(0) != nullptr ? *ctx.input(0) : out_grad;
  const Tensor& y = ctx.input(1) != nullptr ? *ctx.input(1) : out_grad;
  const bool x_aliased = ctx.AliasOperand(0), y_aliased = ctx.AliasOperand(1);
  PDIST_DISPATCH_FLOAT(out_grad.dtype(), T, {
    if (!x_aliased) {
      OperandGrad<T>(x, y, out_grad, [](T a, T b, T g) { return Op::Dx(a, b, g); }, ctx.AllocateOutput(0));
    }
    if (!y_aliased) {
      OperandGrad<T>(x, y, out_grad, [](T a, T b, T g) { return Op::Dy(a, b, g); }, ctx.AllocateOutput(1));
    }
  });
  return absl::OkStatus();
}

struct GreaterThan {
  template <typename T> static bool F(T x, T y) { return x > y; }
};
struct LessThan {
  template <typename T> static bool F(T x, T y) { return x < y; }
};
struct Equal {
  template <typename T> static bool F(T x, T y) { return x == y; }
};

template <typename Op, typename T>
void Compare(const Tensor& x, const Tensor& y, Tensor& out) {
  BroadcastMap<bool, T>(out, [](T a, T b) { return Op::F(a, b); }, x, y);
}

// Comparisons also accept integer operands (labels, ids).
template <typename Op>
absl::Status CompareKernel(KernelContext& ctx) {
  const Tensor& x = *ctx.input(0);
  const Tensor& y = *ctx.input(1);
  Tensor& out = ctx.AllocateOutput(0);
  if (ir::IsFloatingPoint(x.dtype())) {
    PDIST_DISPATCH_FLOAT(x.dtype(), T, { Compare<Op, T>(x, y, out); });
  } else {
    PDIST_DISPATCH_INDEX(x.dtype(), T, { Compare<Op, T>(x, y, out); });
  }
  return absl::OkStatus();
}

// expand: x broadcast to out's shape.
absl::Status ExpandKernel(KernelContext& ctx) {
  const Tensor& x = *ctx.input(0);
  Tensor& out = ctx.AllocateOutput(0);
  PDIST_RETURN_IF_ERROR(CheckBroadcastsTo("expand", out.shape(), {&x.shape()}));
  PDIST_DISPATCH_ALL(x.dtype(), T, { BroadcastMap<T, T>(out, [](T a) { return a; }, x); });
  return absl::OkStatus();
}

// where: condition ? x : y, the three broadcast together.
absl::Status WhereKernel(KernelContext& ctx) {
  const Tensor& condition = *ctx.input(0);
  const Tensor& x = *ctx.input(1);
  const Tensor& y = *ctx.input(2);
  Tensor& out = ctx.AllocateOutput(0);
  PDIST_RETURN_IF_ERROR(CheckBroadcastsTo("where", out.shape(), {&condition.shape(), &x.shape(), &y.shape()}));
  PDIST_DISPATCH_ALL(x.dtype(), T, {
    BroadcastMapOf<T, bool, T, T>(out, [](bool c, T a, T b) { return c ? a : b; }, condition, x, y);
  });
  return absl::OkStatus();
}

template <typename Op>
void RegisterArithmetic(KernelRegistry& registry, const std::string& name) {
  registry.Register(DeviceType::kCPU, name, ArithmeticKernel<Op>);
  registry.Register(DeviceType::kCPU, name + "_grad", ArithmeticGradKernel<Op>);
}

}  // namespace

void RegisterElementwiseKernels(KernelRegistry& registry) {
  RegisterArithmetic<math::Add>(registry, "add");
  RegisterArithmetic<math::Subtract>(registry, "subtract");
  RegisterArithmetic<math::Multiply>(registry, "multiply");
  RegisterArithmetic<math::Divide>(registry, "divide");
  RegisterArithmetic<math::Maximum>(registry, "maximum");
  registry.Register(DeviceType::kCPU, "greater_than", CompareKernel<GreaterThan>);
  registry.Register(DeviceType::kCPU, "less_than", CompareKernel<LessThan>);
  registry.Register(DeviceType::kCPU, "equal", CompareKernel<Equal>);
  registry.Register(DeviceType::kCPU, "expand", ExpandKernel);
  registry.Register(DeviceType::kCPU, "where", WhereKernel);
}

}  // namespace pdist::exec::cpu

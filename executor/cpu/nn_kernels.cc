// CPU kernels for embedding and cross_entropy_with_softmax (and their gradients).
#include <Eigen/Core>
#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "executor/cpu/cpu_common.h"
#include "executor/cpu/cpu_kernels.h"
#include "executor/cpu/row_utils.h"
#include "executor/dtype_dispatch.h"
#include "executor/embedding_rows.h"
#include "executor/label_check.h"
#include "executor/kernel.h"
#include "ir/attribute.h"
#include "ir/status.h"

namespace pdist::exec::cpu {
namespace {

// --- embedding -----------------------------------------------------------------------------

// (x, weight [V, H]) → out [..., H]: out[i] = weight[x[i]], zeros where x[i] == padding_idx.
absl::Status EmbeddingKernel(KernelContext& ctx) {
  const Tensor& ids = *ctx.input(0);
  const Tensor& weight = *ctx.input(1);
  PDIST_ASSIGN_OR_RETURN(int64_t padding_idx, ir::GetInt(ctx.attrs(), "padding_idx"));
  const int64_t vocab = weight.shape()[0];
  const int64_t hidden = weight.shape()[1];
  const int64_t n = ids.num_elements();
  Tensor& out = ctx.AllocateOutput(0);
  PDIST_RETURN_IF_ERROR(CheckIds(ids, vocab, "embedding id"));
  PDIST_DISPATCH_INDEX(ids.dtype(), I, {
    const I* id = ids.data<I>();
    PDIST_DISPATCH_FLOAT(weight.dtype(), T, {
      const T* w = weight.data<T>();
      T* y = out.data<T>();
      ParallelFor(n, RowGrain(hidden), [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) {
          T* row = y + i * hidden;
          if (id[i] == padding_idx) {
            std::fill(row, row + hidden, T(0));
          } else {
            std::copy(w + static_cast<int64_t>(id[i]) * hidden, w + (static_cast<int64_t>(id[i]) + 1) * hidden, row);
          }
        }
      });
    });
  });
  return absl::OkStatus();
}

// (x, weight, out_grad) → weight_grad: weight_grad[v] = sum of out_grad[i] over x[i] == v.
// Deterministic scatter-add: positions are grouped by id with a stable counting sort, then each
// vocab row sums its positions in order, rows in parallel. The padding row stays zero.
absl::Status EmbeddingGradKernel(KernelContext& ctx) {
  const Tensor& ids = *ctx.input(0);
  const Tensor& out_grad = *ctx.input(2);
  PDIST_ASSIGN_OR_RETURN(int64_t padding_idx, ir::GetInt(ctx.attrs(), "padding_idx"));
  Tensor& weight_grad = ctx.AllocateOutput(0);
  const int64_t vocab = weight_grad.shape()[0];
  const int64_t hidden = weight_grad.shape()[1];
  const int64_t n = ids.num_elements();
  PDIST_RETURN_IF_ERROR(CheckIds(ids, vocab, "embedding id"));
  const IdGroups groups = GroupIds(ids, vocab);
  const std::vector<int64_t>& start = groups.start;
  const std::vector<int64_t>& order = groups.order;
  PDIST_DISPATCH_FLOAT(weight_grad.dtype(), T, {
    using RowMap = Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>>;
    using ConstRowMap = Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>>;
    ParallelFor(vocab, RowGrain(hidden * (n / std::max<int64_t>(vocab, 1) + 1)), [&](int64_t begin, int64_t end) {
      for (int64_t v = begin; v < end; ++v) {
        RowMap acc(weight_grad.data<T>() + v * hidden, hidden);
        acc.setZero();
        if (v == padding_idx) continue;
        for (int64_t p = start[v]; p < start[v + 1]; ++p)
          acc += ConstRowMap(out_grad.data<T>() + order[p] * hidden, hidden);
      }
    });
  });
  return absl::OkStatus();
}

// --- cross_entropy_with_softmax --------------------------------------------------------------

// Attributes and layout shared by the forward and backward kernels. logits are viewed as
// [outer, V, inner] around `axis`; loss and a hard label hold one element per lane, at the
// lane's number (their axis has size 1).
struct CrossEntropyConfig {
  bool soft_label;
  bool use_softmax;
  int64_t ignore_index;
  AxisView view;
};

absl::StatusOr<CrossEntropyConfig> GetCrossEntropyConfig(const KernelContext& ctx, const Shape& logits) {
  CrossEntropyConfig c;
  PDIST_ASSIGN_OR_RETURN(c.soft_label, ir::GetBool(ctx.attrs(), "soft_label"));
  PDIST_ASSIGN_OR_RETURN(c.use_softmax, ir::GetBool(ctx.attrs(), "use_softmax"));
  PDIST_ASSIGN_OR_RETURN(c.ignore_index, ir::GetInt(ctx.attrs(), "ignore_index"));
  PDIST_ASSIGN_OR_RETURN(int64_t axis, ir::GetInt(ctx.attrs(), "axis"));
  if (axis < 0) axis += static_cast<int64_t>(logits.size());
  c.view = MakeAxisView(logits, axis);
  return c;
}

// Runs fn(lane, class_of(lane)) over lanes in parallel, where class_of(lane) is the hard label
// (or -1 for an ignored lane) — or, for soft labels, -1 always and the caller reads the label
// tensor itself. Validates hard labels first.
template <typename Fn>
absl::Status ForEachLane(const Tensor& label, const CrossEntropyConfig& c, Fn fn) {
  if (c.soft_label) {
    ParallelFor(c.view.lanes(), RowGrain(c.view.n), [&](int64_t begin, int64_t end) {
      for (int64_t lane = begin; lane < end; ++lane) fn(lane, int64_t{-1});
    });
    return absl::OkStatus();
  }
  PDIST_RETURN_IF_ERROR(CheckLabels(label, c.view.n, c.ignore_index));
  PDIST_DISPATCH_INDEX(label.dtype(), I, {
    const I* l = label.data<I>();
    ParallelFor(c.view.lanes(), RowGrain(c.view.n), [&](int64_t begin, int64_t end) {
      for (int64_t lane = begin; lane < end; ++lane) {
        fn(lane, l[lane] == c.ignore_index ? int64_t{-1} : static_cast<int64_t>(l[lane]));
      }
    });
  });
  return absl::OkStatus();
}

// (logits, label) → softmax, loss. With use_softmax, loss = logsumexp(x) - x[label] (hard) or
// sum_j label_j * (logsumexp(x) - x_j) (soft). Without, logits are already probabilities p:
// softmax = p and loss = -log p[label] or -sum_j label_j * log p_j. Ignored lanes: loss 0.
absl::Status CrossEntropyKernel(KernelContext& ctx) {
  const Tensor& logits = *ctx.input(0);
  const Tensor& label = *ctx.input(1);
  PDIST_ASSIGN_OR_RETURN(CrossEntropyConfig c, GetCrossEntropyConfig(ctx, logits.shape()));
  Tensor& softmax = ctx.AllocateOutput(0);
  Tensor& loss = ctx.AllocateOutput(1);
  // Without return_softmax the result is an empty f[0] and the loss needs only each lane's
  // logsumexp: nothing of the logits' size is made (the bytes the planner counts; a bf16 head's
  // f32 loss would otherwise hold a second f32 copy of its logits for the kernel's length).
  const bool keep_softmax = softmax.num_elements() == logits.num_elements();
  const AxisView& v = c.view;
  const Eigen::InnerStride<> stride(v.inner);
  PDIST_DISPATCH_FLOAT(logits.dtype(), T, {
    return ForEachLane(label, c, [&](int64_t lane, int64_t cls) {
      const int64_t s = v.LaneStart(lane);
      ConstLaneMap<T> x(logits.data<T>() + s, v.n, stride);
      T& l = loss.data<T>()[lane];
      if (c.use_softmax) {
        const T lse = keep_softmax ? SoftmaxLane(logits.data<T>() + s, softmax.data<T>() + s, v.n, v.inner, false)
                                   : LogSumExpLane(logits.data<T>() + s, v.n, v.inner);
        if (c.soft_label) {
          l = (ConstLaneMap<T>(label.data<T>() + s, v.n, stride) * (lse - x)).sum();
        } else {
          l = cls < 0 ? T(0) : lse - x(cls);
        }
      } else {
        if (keep_softmax) LaneMap<T>(softmax.data<T>() + s, v.n, stride) = x;
        if (c.soft_label) {
          l = -(ConstLaneMap<T>(label.data<T>() + s, v.n, stride) * x.log()).sum();
        } else {
          l = cls < 0 ? T(0) : -std::log(x(cls));
        }
      }
    });
  });
  return absl::OkStatus();
}

// (label, softmax, loss_grad) → logits_grad, per lane with g = loss_grad:
//   use_softmax, hard: g * (p - onehot(label));   soft: g * (p * sum(label) - label)
//   probabilities, hard: -g / p[label] at the label; soft: -g * label / p
// (Paddle's soft-label gradient assumes sum(label) = 1; this one is exact for any label.)
// logits_grad may be softmax's storage: each element is read before it is written.
absl::Status CrossEntropyGradInto(KernelContext& ctx, const Tensor& softmax, Tensor& logits_grad) {
  const Tensor& label = *ctx.input(0);
  const Tensor& loss_grad = *ctx.input(2);
  PDIST_ASSIGN_OR_RETURN(CrossEntropyConfig c, GetCrossEntropyConfig(ctx, softmax.shape()));
  const AxisView& v = c.view;
  const Eigen::InnerStride<> stride(v.inner);
  PDIST_DISPATCH_FLOAT(softmax.dtype(), T, {
    return ForEachLane(label, c, [&](int64_t lane, int64_t cls) {
      const int64_t s = v.LaneStart(lane);
      ConstLaneMap<T> p(softmax.data<T>() + s, v.n, stride);
      LaneMap<T> dx(logits_grad.data<T>() + s, v.n, stride);
      const T g = loss_grad.data<T>()[lane];
      if (c.soft_label) {
        ConstLaneMap<T> y(label.data<T>() + s, v.n, stride);
        if (c.use_softmax) {
          dx = g * (p * y.sum() - y);
        } else {
          dx = -g * y / p;
        }
        return;
      }
      if (cls < 0) {
        dx.setZero();
      } else if (c.use_softmax) {
        dx = g * p;
        dx(cls) -= g;
      } else {
        const T at_label = p(cls);  // read first: dx may be p's storage (written over the logits)
        dx.setZero();
        dx(cls) = -g / at_label;
      }
    });
  });
  return absl::OkStatus();
}

absl::Status CrossEntropyGradKernel(KernelContext& ctx) {
  return CrossEntropyGradInto(ctx, *ctx.input(1), ctx.AllocateOutput(0));
}

// (label, logits, loss_grad) → logits_grad: the forward's softmax again, written straight into
// logits_grad, then the gradient above over it — no temporary of the logits' size. Without
// use_softmax the logits are the probabilities. logits_grad may be the logits' storage
// (ir::OpDef::overwrites_dying_operand): SoftmaxLane reads each element before it writes it.
absl::Status CrossEntropyGradFromLogitsKernel(KernelContext& ctx) {
  const Tensor& logits = *ctx.input(1);
  PDIST_ASSIGN_OR_RETURN(bool use_softmax, ir::GetBool(ctx.attrs(), "use_softmax"));
  Tensor& logits_grad = ctx.AllocateOutput(0);
  if (!use_softmax) return CrossEntropyGradInto(ctx, logits, logits_grad);
  PDIST_ASSIGN_OR_RETURN(CrossEntropyConfig c, GetCrossEntropyConfig(ctx, logits.shape()));
  const AxisView& v = c.view;
  PDIST_DISPATCH_FLOAT(logits.dtype(), T, {
    ParallelFor(v.lanes(), RowGrain(v.n), [&](int64_t begin, int64_t end) {
      for (int64_t lane = begin; lane < end; ++lane) {
        const int64_t s = v.LaneStart(lane);
        SoftmaxLane(logits.data<T>() + s, logits_grad.data<T>() + s, v.n, v.inner, false);
      }
    });
  });
  return CrossEntropyGradInto(ctx, logits_grad, logits_grad);
}

}  // namespace

void RegisterAttentionKernels(KernelRegistry& registry);  // attention_kernels.cc

void RegisterNnKernels(KernelRegistry& registry) {
  registry.Register(DeviceType::kCPU, "embedding", EmbeddingKernel);
  registry.Register(DeviceType::kCPU, "embedding_grad", EmbeddingGradKernel);
  registry.Register(DeviceType::kCPU, "cross_entropy_with_softmax", CrossEntropyKernel);
  registry.Register(DeviceType::kCPU, "cross_entropy_with_softmax_grad", CrossEntropyGradKernel);
  registry.Register(DeviceType::kCPU, "cross_entropy_with_softmax_grad_from_logits", CrossEntropyGradFromLogitsKernel);
  RegisterAttentionKernels(registry);
}

}  // namespace pdist::exec::cpu

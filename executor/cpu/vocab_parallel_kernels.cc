// CPU kernels of the vocab-parallel ops (ir/ops/vocab_parallel.cc): each rank holds the
// classes [start_index, start_index + n) of the last axis.
#include <Eigen/Core>
#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "executor/comm/comm_groups.h"
#include "executor/cpu/cpu_common.h"
#include "executor/cpu/cpu_kernels.h"
#include "executor/cpu/row_utils.h"
#include "executor/dtype_dispatch.h"
#include "executor/kernel.h"
#include "ir/attribute.h"
#include "ir/status.h"

namespace pdist::exec::cpu {
namespace {

// Index of `id` in the local piece, or -1 when another rank holds it.
inline int64_t LocalIndex(int64_t id, int64_t start, int64_t n) {
  return id >= start && id < start + n ? id - start : -1;
}

absl::Status CheckHardLabelLastAxis(const KernelContext& ctx, int64_t rank) {
  PDIST_ASSIGN_OR_RETURN(bool soft_label, ir::GetBool(ctx.attrs(), "soft_label"));
  PDIST_ASSIGN_OR_RETURN(bool use_softmax, ir::GetBool(ctx.attrs(), "use_softmax"));
  PDIST_ASSIGN_OR_RETURN(int64_t axis, ir::GetInt(ctx.attrs(), "axis"));
  if (soft_label || !use_softmax || (axis != -1 && axis != rank - 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat(ctx.op().type(), " needs a hard label, use_softmax and the last axis"));
  }
  return absl::OkStatus();
}

// (ids, table piece [n, H]) → out: the piece's rows, zeros for ids outside it.
absl::Status CEmbeddingKernel(KernelContext& ctx) {
  const Tensor& ids = *ctx.input(0);
  const Tensor& table = *ctx.input(1);
  PDIST_ASSIGN_OR_RETURN(int64_t start, ir::GetInt(ctx.attrs(), "start_index"));
  const int64_t rows = table.shape()[0], hidden = table.shape()[1], n = ids.num_elements();
  Tensor& out = ctx.AllocateOutput(0);
  PDIST_DISPATCH_INDEX(ids.dtype(), I, {
    const I* id = ids.data<I>();
    PDIST_DISPATCH_FLOAT(table.dtype(), T, {
      const T* w = table.data<T>();
      T* y = out.data<T>();
      ParallelFor(n, RowGrain(hidden), [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) {
          const int64_t row = LocalIndex(static_cast<int64_t>(id[i]), start, rows);
          if (row < 0) std::fill(y + i * hidden, y + (i + 1) * hidden, T(0));
          else std::copy(w + row * hidden, w + (row + 1) * hidden, y + i * hidden);
        }
      });
    });
  });
  return absl::OkStatus();
}

// (ids, table piece, out_grad) → the piece's gradient; positions add in order, as on one rank.
absl::Status CEmbeddingGradKernel(KernelContext& ctx) {
  const Tensor& ids = *ctx.input(0);
  const Tensor& out_grad = *ctx.input(2);
  PDIST_ASSIGN_OR_RETURN(int64_t start, ir::GetInt(ctx.attrs(), "start_index"));
  Tensor& grad = ctx.AllocateOutput(0);
  const int64_t rows = grad.shape()[0], hidden = grad.shape()[1], n = ids.num_elements();
  PDIST_DISPATCH_INDEX(ids.dtype(), I, {
    const I* id = ids.data<I>();
    PDIST_DISPATCH_FLOAT(grad.dtype(), T, {
      T* g = grad.data<T>();
      const T* dy = out_grad.data<T>();
      std::fill(g, g + rows * hidden, T(0));
      for (int64_t i = 0; i < n; ++i) {
        const int64_t row = LocalIndex(static_cast<int64_t>(id[i]), start, rows);
        if (row < 0) continue;
        for (int64_t h = 0; h < hidden; ++h) g[row * hidden + h] += dy[i * hidden + h];
      }
    });
  });
  return absl::OkStatus();
}

// The global softmax of a vocab piece over `ranks`: the row max in one all-reduce, then the sum
// of exponentials and the label's logit (where held here) in another. Fills `softmax` (the
// piece's probabilities; nullptr: the loss alone, nothing of the piece's size written) and
// returns per lane log Σ exp + max − the label's logit, the loss before ignore_index. Shared by
// the forward and the gradient that recomputes it from the logits; softmax may be the logits'
// storage (each logit is read before its probability is written).
template <typename T>
absl::StatusOr<std::vector<T>> GlobalSoftmaxPiece(const KernelContext& ctx, const Tensor& logits,
                                                  const std::vector<int64_t>& cls, T* softmax) {
  PDIST_ASSIGN_OR_RETURN(int64_t start, ir::GetInt(ctx.attrs(), "start_index"));
  PDIST_ASSIGN_OR_RETURN(std::vector<int64_t> ranks, ir::GetIntList(ctx.attrs(), "ranks"));
  if (ctx.comm_groups() == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(ctx.op().type(), " needs communicators (run it through the engine)"));
  }
  PDIST_ASSIGN_OR_RETURN(comm::Communicator * group, ctx.comm_groups()->Get(ranks));
  const int64_t n = logits.shape().back();
  const auto lanes = static_cast<int64_t>(cls.size());
  const T* x = logits.data<T>();
  Tensor max = Tensor::Empty({{lanes}, logits.dtype()});
  for (int64_t lane = 0; lane < lanes; ++lane) {
    max.data<T>()[lane] = *std::max_element(x + lane * n, x + (lane + 1) * n);
  }
  PDIST_RETURN_IF_ERROR(group->AllReduce(max, max, comm::ReduceOp::kMax));
  // sums [0, lanes): Σ exp(x − max);  [lanes, 2·lanes): the label's logit where held here.
  Tensor sums = Tensor::Zeros({{2 * lanes}, logits.dtype()});
  T* s = sums.data<T>();
  T* p = softmax;
  for (int64_t lane = 0; lane < lanes; ++lane) {
    const T m = max.data<T>()[lane];
    const int64_t local = LocalIndex(cls[lane], start, n);
    if (local >= 0) s[lanes + lane] = x[lane * n + local];  // before p may write over it
    for (int64_t j = 0; j < n; ++j) {
      const T e = std::exp(x[lane * n + j] - m);
      if (p != nullptr) p[lane * n + j] = e;
      s[lane] += e;
    }
  }
  PDIST_RETURN_IF_ERROR(group->AllReduce(sums, sums, comm::ReduceOp::kSum));
  std::vector<T> loss(static_cast<size_t>(lanes));
  for (int64_t lane = 0; lane < lanes; ++lane) {
    const T total = s[lane];
    if (p != nullptr) {
      for (int64_t j = 0; j < n; ++j) p[lane * n + j] /= total;
    }
    loss[lane] = std::log(total) + max.data<T>()[lane] - s[lanes + lane];
  }
  return loss;
}

absl::StatusOr<std::vector<int64_t>> HardLabels(const Tensor& label) {
  std::vector<int64_t> cls(static_cast<size_t>(label.num_elements()));
  PDIST_DISPATCH_INDEX(label.dtype(), I, {
    for (size_t lane = 0; lane < cls.size(); ++lane) cls[lane] = static_cast<int64_t>(label.data<I>()[lane]);
  });
  return cls;
}

// (logits piece [..., n], label [..., 1]) → softmax piece, loss. Three reductions over the
// group: the row max, then (in one all-reduce) the sum of exponentials and the label's logit.
absl::Status CSoftmaxCrossEntropyKernel(KernelContext& ctx) {
  const Tensor& logits = *ctx.input(0);
  PDIST_RETURN_IF_ERROR(CheckHardLabelLastAxis(ctx, static_cast<int64_t>(logits.shape().size())));
  PDIST_ASSIGN_OR_RETURN(int64_t ignore_index, ir::GetInt(ctx.attrs(), "ignore_index"));
  PDIST_ASSIGN_OR_RETURN(const std::vector<int64_t> cls, HardLabels(*ctx.input(1)));
  Tensor& softmax = ctx.AllocateOutput(0);
  Tensor& loss = ctx.AllocateOutput(1);
  // Without return_softmax (an empty f[0] result) only the loss is computed.
  const bool keep_softmax = softmax.num_elements() == logits.num_elements();
  PDIST_DISPATCH_FLOAT(logits.dtype(), T, {
    PDIST_ASSIGN_OR_RETURN(std::vector<T> l,
                           GlobalSoftmaxPiece<T>(ctx, logits, cls, keep_softmax ? softmax.data<T>() : nullptr));
    for (size_t lane = 0; lane < cls.size(); ++lane) loss.data<T>()[lane] = cls[lane] == ignore_index ? T(0) : l[lane];
  });
  return absl::OkStatus();
}

// logits_grad piece = g · (p − onehot(label − start)), from the softmax piece p; dx may be p's
// storage.
absl::Status CSoftmaxCrossEntropyGradInto(KernelContext& ctx, const Tensor& softmax, Tensor& dx) {
  const Tensor& label = *ctx.input(0);
  const Tensor& loss_grad = *ctx.input(2);
  PDIST_RETURN_IF_ERROR(CheckHardLabelLastAxis(ctx, static_cast<int64_t>(softmax.shape().size())));
  PDIST_ASSIGN_OR_RETURN(int64_t start, ir::GetInt(ctx.attrs(), "start_index"));
  PDIST_ASSIGN_OR_RETURN(int64_t ignore_index, ir::GetInt(ctx.attrs(), "ignore_index"));
  const int64_t n = softmax.shape().back();
  const int64_t lanes = softmax.num_elements() / std::max<int64_t>(n, 1);
  PDIST_DISPATCH_INDEX(label.dtype(), I, {
    PDIST_DISPATCH_FLOAT(softmax.dtype(), T, {
      const T* p = softmax.data<T>();
      T* d = dx.data<T>();
      for (int64_t lane = 0; lane < lanes; ++lane) {
        const auto cls = static_cast<int64_t>(label.data<I>()[lane]);
        const T g = cls == ignore_index ? T(0) : loss_grad.data<T>()[lane];
        for (int64_t j = 0; j < n; ++j) d[lane * n + j] = g * p[lane * n + j];
        const int64_t local = LocalIndex(cls, start, n);
        if (local >= 0 && cls != ignore_index) d[lane * n + local] -= g;
      }
    });
  });
  return absl::OkStatus();
}

// (label, softmax piece, loss_grad) → logits_grad piece.
absl::Status CSoftmaxCrossEntropyGradKernel(KernelContext& ctx) {
  return CSoftmaxCrossEntropyGradInto(ctx, *ctx.input(1), ctx.AllocateOutput(0));
}

// (label, logits piece, loss_grad) → logits_grad piece: the forward's two all-reduces again for
// the softmax piece, written straight into the gradient, then the gradient over it (no
// temporary of the piece's size).
absl::Status CSoftmaxCrossEntropyGradFromLogitsKernel(KernelContext& ctx) {
  const Tensor& logits = *ctx.input(1);
  PDIST_RETURN_IF_ERROR(CheckHardLabelLastAxis(ctx, static_cast<int64_t>(logits.shape().size())));
  PDIST_ASSIGN_OR_RETURN(const std::vector<int64_t> cls, HardLabels(*ctx.input(0)));
  Tensor& dx = ctx.AllocateOutput(0);
  PDIST_DISPATCH_FLOAT(logits.dtype(), T, {
    PDIST_RETURN_IF_ERROR(GlobalSoftmaxPiece<T>(ctx, logits, cls, dx.data<T>()).status());
  });
  return CSoftmaxCrossEntropyGradInto(ctx, dx, dx);
}

}  // namespace

void RegisterVocabParallelKernels(KernelRegistry& registry) {
  registry.Register(DeviceType::kCPU, "c_embedding", CEmbeddingKernel);
  registry.Register(DeviceType::kCPU, "c_embedding_grad", CEmbeddingGradKernel);
  registry.Register(DeviceType::kCPU, "c_softmax_with_cross_entropy", CSoftmaxCrossEntropyKernel);
  registry.Register(DeviceType::kCPU, "c_softmax_with_cross_entropy_grad", CSoftmaxCrossEntropyGradKernel);
  registry.Register(DeviceType::kCPU, "c_softmax_with_cross_entropy_grad_from_logits",
                    CSoftmaxCrossEntropyGradFromLogitsKernel);
}

}  // namespace pdist::exec::cpu

// CPU kernels for fused_rope and flash_attn (and their gradients).
//
// flash_attn on CPU is exact scaled dot-product attention computed per (batch, head) in tiles
// of query rows: each head's q, k, v are copied from the strided [b, s, h, d] layout into
// contiguous scratch, scores come from Eigen GEMMs, and only the logsumexp of each score row
// is kept for the backward pass, which recomputes the probabilities from it.
#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "executor/cpu/cpu_common.h"
#include "executor/cpu/cpu_kernels.h"
#include "executor/cpu/row_utils.h"
#include "executor/dtype_dispatch.h"
#include "executor/kernel.h"
#include "executor/math/rope.h"
#include "executor/rope_tables.h"
#include "ir/attribute.h"
#include "ir/status.h"

namespace pdist::exec::cpu {
namespace {

template <typename T>
using Mat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <typename T>
using Vec = Eigen::Matrix<T, Eigen::Dynamic, 1>;

// --- fused_rope ------------------------------------------------------------------------------

// Rotates every head of one (b, s) row (math::RopeElement).
template <typename T>
void RotateRow(const math::RopeLayout& l, const T* in, T* out, int64_t heads, const T* sin, const T* cos, bool transpose) {
  for (int64_t h = 0; h < heads; ++h) {
    const T* x = in + h * l.head_dim;
    T* y = out + h * l.head_dim;
    for (int64_t j = 0; j < l.head_dim; ++j) y[j] = math::RopeElement<T, T>(l, x, sin, cos, j, transpose);
  }
}

// Shared by fused_rope (tensors q, k, v → out_q, out_k, out_v) and fused_rope_grad (out grads →
// input grads, transpose = true). `tensors` holds the three (possibly absent) inputs.
absl::Status RopeKernel(KernelContext& ctx, const std::vector<const Tensor*>& tensors, const Tensor* sin,
                        const Tensor* cos, const Tensor* position_ids, bool transpose) {
  const Tensor& q = *tensors[0];
  PDIST_ASSIGN_OR_RETURN(bool time_major, ir::GetBool(ctx.attrs(), "time_major"));
  PDIST_ASSIGN_OR_RETURN(bool adjacent, ir::GetBool(ctx.attrs(), "use_neox_rotary_style"));
  PDIST_ASSIGN_OR_RETURN(double base, ir::GetDouble(ctx.attrs(), "rotary_emb_base"));
  const math::RopeLayout l{
      q.shape()[time_major ? 1 : 0], q.shape()[time_major ? 0 : 1], q.shape()[2], q.shape()[3], time_major, adjacent};
  PDIST_DISPATCH_FLOAT(q.dtype(), T, {
    PDIST_ASSIGN_OR_RETURN(RopeTables<T> tables, MakeRopeTables<T>(l, sin, cos, position_ids, base));
    const int64_t* pos = position_ids ? position_ids->data<int64_t>() : nullptr;
    for (size_t t = 0; t < 3; ++t) {
      Tensor& out = ctx.AllocateOutput(t);
      const Tensor* in = tensors[t];
      if (in == nullptr || !in->defined()) continue;
      const int64_t heads = in->shape()[2];
      ParallelFor(l.batch * l.seq, RowGrain(heads * l.head_dim), [&](int64_t begin, int64_t end) {
        for (int64_t bs = begin; bs < end; ++bs) {
          const int64_t b = bs / l.seq;
          const int64_t s = bs % l.seq;
          const int64_t row = (pos ? pos[bs] : s) * l.head_dim;
          const int64_t start = l.RowStart(b, s, heads);
          RotateRow(l, in->data<T>() + start, out.data<T>() + start, heads, tables.sin + row, tables.cos + row,
                    transpose);
        }
      });
    }
  });
  return absl::OkStatus();
}

// --- flash_attn ------------------------------------------------------------------------------

constexpr int64_t kQueryTile = 128;

// Shapes and options of one attention call (see ir/ops/attention.cc for the layout).
struct Attention {
  int64_t batch, seq_q, seq_k, heads_q, heads_k, head_dim, v_dim;
  bool causal;
  const Tensor* mask;  // additive [b|1, hq|1, sq, sk], or nullptr
  double scale;

  // Query i sees keys j < KeyEnd(i) (bottom-right aligned causal mask).
  int64_t KeyEnd(int64_t i) const { return causal ? std::clamp<int64_t>(i + 1 + seq_k - seq_q, 0, seq_k) : seq_k; }
  int64_t KvHead(int64_t h) const { return h / (heads_q / heads_k); }
  // Multiply-adds of one (batch, q head) forward: q·kᵀ and p·v.
  int64_t HeadWork() const { return seq_q * seq_k * (head_dim + v_dim); }
};

Attention MakeAttention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor* mask, bool causal) {
  const int64_t d = q.shape()[3];
  return Attention{q.shape()[0],
                   q.shape()[1],
                   k.shape()[1],
                   q.shape()[2],
                   k.shape()[2],
                   d,
                   v.shape()[3],
                   causal,
                   (mask && mask->defined()) ? mask : nullptr,
                   1.0 / std::sqrt(static_cast<double>(d))};
}

// Copies head h of a [b, s, heads, d] tensor into a contiguous [s, d] matrix, and back.
template <typename T>
void GatherHead(const Tensor& t, int64_t b, int64_t h, Mat<T>& out) {
  const int64_t s = t.shape()[1], heads = t.shape()[2], d = t.shape()[3];
  out.resize(s, d);
  for (int64_t i = 0; i < s; ++i) std::copy_n(t.data<T>() + ((b * s + i) * heads + h) * d, d, out.row(i).data());
}
template <typename T>
void ScatterHead(const Mat<T>& m, int64_t row0, int64_t b, int64_t h, Tensor& t) {
  const int64_t s = t.shape()[1], heads = t.shape()[2], d = t.shape()[3];
  for (int64_t r = 0; r < m.rows(); ++r)
    std::copy_n(m.row(r).data(), d, t.data<T>() + ((b * s + row0 + r) * heads + h) * d);
}

// Scaled, masked scores of query rows [i0, i0 + rows) of head (b, h) against the first `keys`
// keys; entries a query may not see are -inf.
template <typename T>
void Scores(const Attention& a, const Mat<T>& q, const Mat<T>& k, int64_t b, int64_t h, int64_t i0, int64_t rows,
            int64_t keys, Mat<T>& s) {
  s.noalias() = (q.middleRows(i0, rows) * k.topRows(keys).transpose()) * static_cast<T>(a.scale);
  if (a.mask != nullptr) {
    const Shape& ms = a.mask->shape();
    const int64_t base = ((ms[0] == 1 ? 0 : b) * ms[1] + (ms[1] == 1 ? 0 : h)) * a.seq_q * a.seq_k;
    for (int64_t r = 0; r < rows; ++r) {
      s.row(r) += Eigen::Map<const Vec<T>>(a.mask->data<T>() + base + (i0 + r) * a.seq_k, keys).transpose();
    }
  }
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t end = a.KeyEnd(i0 + r);
    if (end < keys) s.row(r).tail(keys - end).setConstant(-std::numeric_limits<T>::infinity());
  }
}

// Turns scores into probabilities exp(s - lse), in place. A row with no visible key (lse =
// -inf) becomes zeros.
template <typename T>
void Probabilities(Mat<T>& s, const T* lse) {
  for (int64_t r = 0; r < s.rows(); ++r) {
    if (std::isinf(lse[r]))
      s.row(r).setZero();
    else
      s.row(r) = (s.row(r).array() - lse[r]).exp().matrix();
  }
}

absl::Status CheckNoDropout(const KernelContext& ctx, bool is_test) {
  PDIST_ASSIGN_OR_RETURN(double dropout, ir::GetDouble(ctx.attrs(), "dropout"));
  if (dropout > 0 && !is_test) {
    return absl::UnimplementedError(absl::StrCat(ctx.op().type(), ": attention dropout (", dropout,
                                                 ") is not implemented on CPU; use dropout = 0 or is_test"));
  }
  return absl::OkStatus();
}

// (q, k, v, fixed_seed_offset?, attn_mask?) → out, softmax, softmax_lse, seed_offset.
absl::Status FlashAttnKernel(KernelContext& ctx) {
  const Tensor& q = *ctx.input(0);
  const Tensor& k = *ctx.input(1);
  const Tensor& v = *ctx.input(2);
  PDIST_ASSIGN_OR_RETURN(bool is_test, ir::GetBool(ctx.attrs(), "is_test"));
  PDIST_RETURN_IF_ERROR(CheckNoDropout(ctx, is_test));
  PDIST_ASSIGN_OR_RETURN(bool causal, ir::GetBool(ctx.attrs(), "causal"));
  PDIST_ASSIGN_OR_RETURN(bool return_softmax, ir::GetBool(ctx.attrs(), "return_softmax"));
  const Attention a = MakeAttention(q, k, v, ctx.input(4), causal);
  Tensor& out = ctx.AllocateOutput(0);
  Tensor& softmax = ctx.AllocateOutput(1);
  Tensor& lse = ctx.AllocateOutput(2);
  Tensor& seed_offset = ctx.AllocateOutput(3);
  const Tensor* fixed = ctx.input(3);
  for (int i = 0; i < 2; ++i)
    seed_offset.data<int64_t>()[i] = fixed && fixed->defined() ? fixed->data<int64_t>()[i] : 0;
  PDIST_DISPATCH_FLOAT(q.dtype(), T, {
    // Every (batch, q head) is independent; writes never overlap.
    ParallelFor(a.batch * a.heads_q, RowGrain(a.HeadWork()), [&](int64_t begin, int64_t end) {
      Mat<T> qh, kh, vh, s, o;
      for (int64_t bh = begin; bh < end; ++bh) {
        const int64_t b = bh / a.heads_q, h = bh % a.heads_q;
        GatherHead(q, b, h, qh);
        GatherHead(k, b, a.KvHead(h), kh);
        GatherHead(v, b, a.KvHead(h), vh);
        T* row_lse = lse.data<T>() + bh * a.seq_q;
        for (int64_t i0 = 0; i0 < a.seq_q; i0 += kQueryTile) {
          const int64_t rows = std::min(kQueryTile, a.seq_q - i0);
          const int64_t keys = a.KeyEnd(i0 + rows - 1);  // the tile's last row sees the most keys
          Scores(a, qh, kh, b, h, i0, rows, keys, s);
          // Row-wise stable softmax in place, keeping each row's logsumexp.
          for (int64_t r = 0; r < rows; ++r) {
            const T max = keys > 0 ? s.row(r).maxCoeff() : -std::numeric_limits<T>::infinity();
            if (std::isinf(max)) {  // no visible key: zero probabilities, lse = -inf
              row_lse[i0 + r] = max;
              s.row(r).setZero();
              continue;
            }
            s.row(r) = (s.row(r).array() - max).exp().matrix();
            const T sum = s.row(r).sum();
            row_lse[i0 + r] = max + std::log(sum);
            s.row(r) /= sum;
          }
          o.noalias() = s * vh.topRows(keys);
          ScatterHead(o, i0, b, h, out);
          if (return_softmax) {
            T* p = softmax.data<T>() + (bh * a.seq_q + i0) * a.seq_k;
            for (int64_t r = 0; r < rows; ++r) {
              std::copy_n(s.row(r).data(), keys, p + r * a.seq_k);
              std::fill(p + r * a.seq_k + keys, p + (r + 1) * a.seq_k, T(0));
            }
          }
        }
      }
    });
  });
  return absl::OkStatus();
}

// (q, k, v, out, softmax_lse, seed_offset?, attn_mask?, out_grad) → q_grad, k_grad, v_grad.
// With P = exp(S - lse) and D_i = sum_j dO_ij * O_ij:
//   dV = Pᵀ dO,  dP = dO Vᵀ,  dS = P ∘ (dP - D),  dQ = scale · dS K,  dK = scale · dSᵀ Q.
// Parallel over (batch, kv head) so that the q heads sharing a kv head add into its dK and dV
// in a fixed order.
absl::Status FlashAttnGradKernel(KernelContext& ctx) {
  const Tensor& q = *ctx.input(0);
  const Tensor& k = *ctx.input(1);
  const Tensor& v = *ctx.input(2);
  const Tensor& out = *ctx.input(3);
  const Tensor& lse = *ctx.input(4);
  const Tensor& out_grad = *ctx.input(7);
  PDIST_RETURN_IF_ERROR(CheckNoDropout(ctx, /*is_test=*/false));
  PDIST_ASSIGN_OR_RETURN(bool causal, ir::GetBool(ctx.attrs(), "causal"));
  const Attention a = MakeAttention(q, k, v, ctx.input(6), causal);
  Tensor& q_grad = ctx.AllocateOutput(0);
  Tensor& k_grad = ctx.AllocateOutput(1);
  Tensor& v_grad = ctx.AllocateOutput(2);
  PDIST_DISPATCH_FLOAT(q.dtype(), T, {
    const T scale = static_cast<T>(a.scale);
    ParallelFor(a.batch * a.heads_k, RowGrain(a.HeadWork() * (a.heads_q / a.heads_k)), [&](int64_t begin, int64_t end) {
      Mat<T> qh, kh, vh, oh, doh, s, dp, dq, dk, dv;
      Vec<T> d_row;
      for (int64_t bk = begin; bk < end; ++bk) {
        const int64_t b = bk / a.heads_k, hk = bk % a.heads_k;
        GatherHead(k, b, hk, kh);
        GatherHead(v, b, hk, vh);
        dk.setZero(a.seq_k, a.head_dim);
        dv.setZero(a.seq_k, a.v_dim);
        for (int64_t h = hk * (a.heads_q / a.heads_k); h < (hk + 1) * (a.heads_q / a.heads_k); ++h) {
          GatherHead(q, b, h, qh);
          GatherHead(out, b, h, oh);
          GatherHead(out_grad, b, h, doh);
          const T* row_lse = lse.data<T>() + (b * a.heads_q + h) * a.seq_q;
          for (int64_t i0 = 0; i0 < a.seq_q; i0 += kQueryTile) {
            const int64_t rows = std::min(kQueryTile, a.seq_q - i0);
            const int64_t keys = a.KeyEnd(i0 + rows - 1);
            Scores(a, qh, kh, b, h, i0, rows, keys, s);
            Probabilities(s, row_lse + i0);
            const auto do_tile = doh.middleRows(i0, rows);
            dv.topRows(keys).noalias() += s.transpose() * do_tile;
            dp.noalias() = do_tile * vh.topRows(keys).transpose();
            d_row = (do_tile.array() * oh.middleRows(i0, rows).array()).rowwise().sum().matrix();
            s.array() *= (dp.colwise() - d_row).array();  // s is now dS
            dq.noalias() = (s * kh.topRows(keys)) * scale;
            ScatterHead(dq, i0, b, h, q_grad);
            dk.topRows(keys).noalias() += (s.transpose() * qh.middleRows(i0, rows)) * scale;
          }
        }
        ScatterHead(dk, 0, b, hk, k_grad);
        ScatterHead(dv, 0, b, hk, v_grad);
      }
    });
  });
  return absl::OkStatus();
}

}  // namespace

void RegisterAttentionKernels(KernelRegistry& registry) {
  registry.Register(DeviceType::kCPU, "fused_rope", [](KernelContext& ctx) {
    return RopeKernel(ctx, {ctx.input(0), ctx.input(1), ctx.input(2)}, ctx.input(3), ctx.input(4), ctx.input(5),
                      /*transpose=*/false);
  });
  registry.Register(DeviceType::kCPU, "fused_rope_grad", [](KernelContext& ctx) {
    return RopeKernel(ctx, {ctx.input(3), ctx.input(4), ctx.input(5)}, ctx.input(0), ctx.input(1), ctx.input(2),
                      /*transpose=*/true);
  });
  registry.Register(DeviceType::kCPU, "flash_attn", FlashAttnKernel);
  registry.Register(DeviceType::kCPU, "flash_attention", FlashAttnKernel);
  registry.Register(DeviceType::kCPU, "flash_attn_grad", FlashAttnGradKernel);
}

}  // namespace pdist::exec::cpu
